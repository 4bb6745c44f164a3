"""``[model] via = "proxy"``: an agent that knows nothing of agentreel, recorded through the
proxy in front of the stub server and replayed keylessly with the same goldens and checks.

What must hold: the agent's config file is rendered into its fresh HOME and its key
variable gets the dummy key; the proxy's logs become the recordings and the goldens;
replay needs no upstream; the agent command's relative path still resolves in record's
trial replay (which runs from a scratch copy); an agent that keeps serving after stdin
closes is stopped with SIGTERM when the scenario says so; and a drifted request fails with
the readable, masked diff.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agentreel.snapshot_harness import (
    ReplayConsumptionError,
    check_scenario,
    load_scenario,
)

AGENT = Path(__file__).with_name("harness_proxy_agent.py")
SCENARIO = """
timeout = 90
agent = ["{{python}}", "./agent.py"]
{extra}
[env]
{env}

[[steps]]
type = "initialize"

[[steps]]
type = "new_session"

[[steps]]
type = "prompt"
text = "say hello"

[model]
via = "proxy"
api = "openai"
base_url_env = []
key_env = ["TINY_KEY"]

[[model.files]]
path = ".config/tiny-agent/config.json"
text = '{{"base_url": "{{base_url}}", "home": "{{home}}"}}'
"""
RULES = """
[[rule]]
match = { last_user = "say hello", system_contains = "You are tiny" }
text = "hello from the stub"
"""


def _scenario(root: Path, *, extra: str = "", env: str = "") -> Path:
    directory = root / "fixtures" / "tiny"
    directory.mkdir(parents=True)
    (directory / "scenario.toml").write_text(SCENARIO.format(extra=extra, env=env))
    (directory / "stub-rules.toml").write_text(RULES)
    shutil.copy(AGENT, directory / "agent.py")
    return directory


def test_a_proxied_agent_records_and_replays_with_goldens(tmp_path: Path) -> None:
    directory = _scenario(tmp_path)
    recorded = check_scenario(load_scenario(directory), "record")
    assert recorded.sessions == 1
    assert (directory / "session.jsonl").is_file()
    # The goldens hold the proxy's log of what replay served (the agent writes none).
    golden = (directory / "golden" / "session.jsonl").read_text()
    assert '"text":"hello fr"' in golden
    assert '"id":"{{session:main}}"' in golden
    transcript = (directory / "golden" / "transcript.jsonl").read_text()
    assert "hello fr" in transcript
    # The recording holds the request the agent sent through the proxy, masked.
    recording = (directory / "session.jsonl").read_text()
    assert "You are tiny." in recording
    assert "agentreel-proxy-not-a-secret" not in recording
    replayed = check_scenario(load_scenario(directory), "replay")
    assert replayed.sessions == 1


def test_an_agent_serving_past_eof_needs_shutdown_sigterm(tmp_path: Path) -> None:
    directory = _scenario(tmp_path, extra='shutdown = "sigterm"', env='TINY_IGNORE_EOF = "1"')
    assert check_scenario(load_scenario(directory), "record").sessions == 1
    assert check_scenario(load_scenario(directory), "replay").sessions == 1


def test_a_drifted_system_prompt_fails_with_the_readable_masked_diff(tmp_path: Path) -> None:
    directory = _scenario(tmp_path)
    check_scenario(load_scenario(directory), "record")
    toml = directory / "scenario.toml"
    toml.write_text(toml.read_text().replace("[env]\n", '[env]\nTINY_SYSTEM = "You are big."\n'))
    with pytest.raises(ReplayConsumptionError) as caught:
        check_scenario(load_scenario(directory), "replay")
    message = str(caught.value)
    assert "RequestDriftError" in message
    assert "system prompt differs" in message
    assert "You are tiny." in message
    assert "You are big." in message
    assert "nox -s record -- tiny" in message
