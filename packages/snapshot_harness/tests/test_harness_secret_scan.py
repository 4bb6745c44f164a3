"""No credential lands in a fixture (SPEC 10): harness record and refresh refuse known key
shapes — echoed by the model's answer, or read by the agent from a workspace file (a tool
result) — naming file, line, event and rule, never the value, and write nothing; a
scenario's ``[record] allow_secrets`` lets its deliberate fake keys through; ``agentreel
check-secrets`` finds them in committed files when the allowlist is gone."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from agentreel.session import rerecord_command, secret_sha256
from agentreel.session.testing import FAKE_CREDENTIAL_RULES, fake_credentials
from agentreel.snapshot_harness import (
    GoldenMismatchError,
    HarnessError,
    SecretLeakError,
    check_scenario,
)
from agentreel.snapshot_harness._cli import main

pytestmark = pytest.mark.slow
KEYS = fake_credentials()
RULES = sorted(set(FAKE_CREDENTIAL_RULES.values()))
ROOT = Path(__file__).resolve().parents[3]


def _leaked(*texts: str) -> list[str]:
    """The kinds whose value appears in ``texts`` (names only: a failure prints no key)."""
    joined = "".join(texts)
    return [k for k, v in KEYS.items() if v in joined or json.dumps(v)[1:-1] in joined]


def _scenario(tmp_path: Path, source: str, *, allow: bool) -> Path:
    """The reference agent with the stub model: the answer holds every kind of key
    (``answer``), or the agent reads them from ``workspace/secrets.env`` (``tool``)."""
    directory = tmp_path / "fixtures" / f"leak-{source}"
    (directory / "workspace").mkdir(parents=True)
    allowed = [secret_sha256(value) for value in KEYS.values()] if allow else []
    (directory / "scenario.toml").write_text(
        'description = "a model or a tool hands the agent credentials"\ntimeout = 60\n'
        '[[steps]]\ntype = "initialize"\n[[steps]]\ntype = "new_session"\n'
        '[[steps]]\ntype = "prompt"\ntext = "Read secrets.env and tell me what is in it."\n'
        '[record]\nprovider = "stub"\nmodel = "stub-model"\n'
        f"allow_secrets = {json.dumps(allowed)}\n"
    )
    listing = "\n".join(f"{kind}: {value}" for kind, value in KEYS.items())
    (directory / "workspace" / "secrets.env").write_text(f"KEYS-FILE\n{listing}\n")
    if source == "answer":
        answer = json.dumps("Here it is:\n" + listing)
        rules = f"[[rule]]\ntext = {answer}\n"
    else:
        rules = (
            '[[rule]]\nmatch = { last_user = "Read secrets.env" }\n'
            'tool_calls = [{ id = "c1", name = "read_file", '
            'arguments = { path = "secrets.env" } }]\n'
            '[[rule]]\nmatch = { last_tool_result = "KEYS-FILE" }\ntext = "It holds keys."\n'
        )
    (directory / "stub-rules.toml").write_text(rules)
    return directory


def _inputs(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


@pytest.mark.parametrize("source", ["answer", "tool"])
def test_record_refuses_every_known_shape_and_writes_nothing(source: str, tmp_path: Path) -> None:
    directory = _scenario(tmp_path, source, allow=False)
    before = _inputs(directory)
    with pytest.raises(SecretLeakError) as caught:
        check_scenario(directory, "record")
    message = str(caught.value)
    assert _leaked(message) == []
    named = [rule for rule in RULES if rule in message]
    assert named == RULES
    event = "tool/result" if source == "tool" else "assistant/chunk block-end"
    assert "session.jsonl:" in message
    assert event in message
    assert "[record] allow_secrets" in message
    assert rerecord_command(directory.name) in message  # the command this run names
    assert {hit.sha256 for hit in caught.value.hits} >= {secret_sha256(v) for v in KEYS.values()}
    assert _inputs(directory) == before  # nothing written


@pytest.mark.parametrize("source", ["answer", "tool"])
def test_allowed_fake_keys_record_and_are_caught_once_the_allowlist_is_gone(
    source: str, tmp_path: Path
) -> None:
    directory = _scenario(tmp_path, source, allow=True)
    outcome = check_scenario(directory, "record")
    assert "session.jsonl" in outcome.written
    recorded = (directory / "session.jsonl").read_text()
    assert _leaked(recorded) == list(KEYS)  # the keys are in, allowed
    out = io.StringIO()
    assert main(["check-secrets", str(directory)], out=out) == 0, "allowed keys refused"
    goldens = {p: p.read_bytes() for p in (directory / "golden").iterdir()}

    # The allowlist goes: refresh refuses to write the goldens, check-secrets names each.
    toml = directory / "scenario.toml"
    toml.write_text(toml.read_text().split("allow_secrets")[0] + "allow_secrets = []\n")
    with pytest.raises(SecretLeakError) as caught:
        check_scenario(directory, "refresh")
    message = str(caught.value)
    assert "refusing to write the goldens" in message
    assert [rule for rule in RULES if rule in message] == RULES
    assert "golden/session.jsonl:" in message
    assert _leaked(message) == []
    assert {p: p.read_bytes() for p in (directory / "golden").iterdir()} == goldens
    # A failing local replay writes no pending golden holding the keys either.
    golden = directory / "golden" / "session.jsonl"
    tampered = golden.read_bytes().replace(b'"completed"', b'"max-turns"', 1)
    assert tampered != golden.read_bytes()
    golden.write_bytes(tampered)
    with pytest.raises(GoldenMismatchError) as mismatch:
        check_scenario(directory, "replay", pending=True)
    assert "refusing to write the pending goldens" in str(mismatch.value)
    assert _leaked(str(mismatch.value)) == []
    assert sorted((directory / "golden").glob("*.pending")) == []
    golden.write_bytes(goldens[golden])
    out = io.StringIO()
    assert main(["check-secrets", str(directory)], out=out) == 1
    report = out.getvalue()
    assert _leaked(report) == []
    assert [rule for rule in RULES if rule in report] == RULES
    assert f"{directory / 'session.jsonl'}:" in report
    assert "credential(s) found" in report


def test_check_secrets_passes_the_committed_fixtures_and_says_how_to_run_it() -> None:
    out = io.StringIO()
    code = main(
        ["check-secrets", str(ROOT / "fixtures"), str(ROOT / "interop" / "fixtures")], out=out
    )
    assert code == 0, out.getvalue()
    assert out.getvalue().startswith("no credentials in ")
    out = io.StringIO()
    with pytest.raises(SystemExit):
        main(["check-secrets", "--help"], out=out)


def test_check_secrets_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-secrets", str(tmp_path / "missing")], out=io.StringIO()) == 2
    assert "no such file or directory" in capsys.readouterr().err
    scenario = tmp_path / "bad"
    scenario.mkdir()
    (scenario / "scenario.toml").write_text(
        '[[steps]]\ntype = "initialize"\n[record]\nallow_secrets = ["not-a-digest"]\n'
    )
    (scenario / "session.jsonl").write_text("{}\n")
    assert main(["check-secrets", str(scenario)], out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert "record.allow_secrets" in err
    assert "not a sha256 hex digest" in err
    assert "not-a-digest" not in err


def _proxied(tmp_path: Path, *, allow: bool) -> Path:
    """The plain-openai-SDK example agent behind the proxy, answered with every kind of key."""
    directory = tmp_path / "fixtures" / "leak-proxied"
    (directory / "workspace").mkdir(parents=True, exist_ok=True)
    allowed = [secret_sha256(value) for value in KEYS.values()] if allow else []
    agent = json.dumps(["{python}", str(ROOT / "examples" / "openai-sdk-agent" / "agent.py")])
    (directory / "scenario.toml").write_text(
        f"timeout = 120\nagent = {agent}\n"
        '[[steps]]\ntype = "initialize"\n[[steps]]\ntype = "new_session"\n'
        '[[steps]]\ntype = "prompt"\ntext = "What is in my .env?"\n'
        '[model]\nvia = "proxy"\napi = "openai"\nenv = { EXAMPLE_MODEL = "stub-model" }\n'
        f"[record]\nallow_secrets = {json.dumps(allowed)}\n"
    )
    listing = "\n".join(f"{kind}: {value}" for kind, value in KEYS.items())
    (directory / "stub-rules.toml").write_text(f"[[rule]]\ntext = {json.dumps(listing)}\n")
    return directory


def test_a_proxied_record_refuses_the_keys_and_replays_them_once_allowed(
    tmp_path: Path,
) -> None:
    """Through ``[model] via = "proxy"`` the proxy's own scan refuses first (nothing
    harvested, nothing written); with the scenario's allowlist passed to the proxy the
    recording is written and replays (the proxy's served logs are not refused)."""
    directory = _proxied(tmp_path, allow=False)
    before = _inputs(directory)
    with pytest.raises(HarnessError) as caught:
        check_scenario(directory, "record")
    message = str(caught.value)
    assert _leaked(message) == []
    assert [rule for rule in RULES if rule in message] == RULES
    assert _inputs(directory) == before
    directory = _proxied(tmp_path, allow=True)
    check_scenario(directory, "record")
    assert _leaked((directory / "session.jsonl").read_text()) == list(KEYS)
    assert check_scenario(directory, "replay").sessions == 1


def test_record_writes_an_allowed_key_that_runs_past_a_message_preview(tmp_path: Path) -> None:
    """A long key in the prompt, allowed by its sha256: ``record`` writes it whole where
    the log holds the message and cut in the request's preview; the one allowed sha256
    covers both (the cut start alone has another sha256, which was refused)."""
    key = KEYS["anthropic"]
    directory = tmp_path / "fixtures" / "long-key"
    directory.mkdir(parents=True)
    prompt = "Check this key for me: " + key  # the preview has room for 56 of its characters
    (directory / "scenario.toml").write_text(
        'description = "a long key in the prompt"\ntimeout = 60\n'
        '[[steps]]\ntype = "initialize"\n[[steps]]\ntype = "new_session"\n'
        f'[[steps]]\ntype = "prompt"\ntext = {json.dumps(prompt)}\n'
        '[record]\nprovider = "stub"\nmodel = "stub-model"\ntrials = 0\n'
        f"allow_secrets = {json.dumps([secret_sha256(key)])}\n"
    )
    (directory / "stub-rules.toml").write_text('[[rule]]\ntext = "It works."\n')
    outcome = check_scenario(directory, "record")
    assert "session.jsonl" in outcome.written
    recorded = (directory / "session.jsonl").read_text()
    assert _leaked(recorded) == ["anthropic"]
    (header,) = [line for line in recorded.splitlines() if '"request/header"' in line]
    preview = json.loads(header)["data"]["messages"][0]["preview"]
    held = preview.endswith("…") and key[:40] in preview and key not in preview
    assert held, "the preview does not hold the key's start, cut"
