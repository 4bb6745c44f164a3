"""``agentreel proxy record --fixture DIR -- COMMAND`` proves the fixture before keeping it
(issue 39): the program runs once through the recording proxy, then the fixture is
replayed through the same program under record's trial perturbations (another zone, user,
host, and one trial on another day under libfaketime); a failing trial keeps nothing and
prints its readable diff. Real subprocesses: the program is a small OpenAI SDK script."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from agentreel.llm.stub import StubServer
from agentreel.snapshot_harness._cli import main
from agentreel.snapshot_harness._record_proof import TRIALS_ENV

RULES = '[[rule]]\nmatch = { last_user = "hello" }\ntext = "hi"\n'
PROGRAM = """
import os
import openai

system = "You answer briefly."
if os.environ.get("PROGRAM_NAMES_USER"):
    system += f" The user is {os.environ.get('USER', 'nobody')}."
with openai.OpenAI(max_retries=0) as client:
    reply = client.chat.completions.create(
        model="m",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": "hello"}],
    )
assert reply.choices[0].message.content == "hi", reply
"""


@pytest.fixture
def program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.delenv(TRIALS_ENV)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proxy-trials-0123")
    monkeypatch.delenv("USER", raising=False)
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    return [sys.executable, str(script)]


def _record(fixture: Path, command: list[str], *flags: str) -> tuple[int, str]:
    out = io.StringIO()
    with StubServer.from_toml(RULES) as stub:
        words = ["proxy", "record", "--upstream", stub.base_url, "--fixture", str(fixture)]
        status = main([*words, *flags, "--", *command], out=out)
    return status, out.getvalue()


def test_the_fixture_is_kept_once_its_trial_replays_pass(
    tmp_path: Path, program: list[str]
) -> None:
    fixture = tmp_path / "fixture"
    status, out = _record(fixture, program, "--trials", "2")
    assert status == 0, out
    assert f"wrote {fixture}, proved by 2 trial replay(s) of" in out
    assert (fixture / "session.jsonl").is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".agentreel")] == []


def test_a_failing_trial_keeps_nothing_and_prints_its_diff(
    tmp_path: Path,
    program: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A program naming $USER (unset when it recorded): trial 1 (another user) drifts, the
    old fixture stays as it was and the drift is printed."""
    fixture = tmp_path / "fixture"
    fixture.mkdir()
    (fixture / "session.jsonl").write_text("the committed recording\n")
    monkeypatch.setenv("PROGRAM_NAMES_USER", "1")
    status, _ = _record(fixture, program)
    err = capsys.readouterr().err
    assert status == 1, err
    assert "recorded, but trial replay 1 of 3 (TZ=Pacific/Kiritimati, USER=reel-trial-a" in err
    assert f"so nothing was written to {fixture}" in err
    assert "RequestDriftError" in err
    assert "The user is reel-trial-a." in err
    assert (fixture / "session.jsonl").read_text() == "the committed recording\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fixture", "program.py"]
