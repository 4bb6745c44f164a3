"""``--agentreel-record=drifted``: the pytest fixture re-records only what drifted (SPEC 20).

A test runs the drifted tests' tree (``drifted_tree``: main → route and hotel at once,
route → weather, plain ``openai`` SDK calls named by identity headers) two ways: in the
test's own process (threads) and as a program of its own pointed at the fixture by
``agentreel.env``. Both are recorded once; then the weather agent's system prompt (the
grandchild's prompt) changes and the test runs with ``--agentreel-record=drifted``: a
secret in a re-recorded call is refused and nothing written; without it, weather, route
from the call carrying its new answer and main from the call carrying that are
re-recorded, the hotel's files stay byte for byte, the run says so at its end, and the
recording replays. Deleting a child's recording — the hotel's, or the weather's, which
leaves a gap in the numbering — and running drifted again records just that child.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow

QUIET = ("-p", "no:cacheprovider", "-p", "no:asyncio", "-q")
TEST = """
import os
import subprocess
import sys

import openai
import pytest

sys.path.insert(0, {programs!r})
import drifted_tree


@pytest.mark.parametrize("way", ["thread", "process"])
def test_trip(agentreel, way):
    if way == "thread":
        client = openai.OpenAI(base_url=agentreel.base_url, api_key=agentreel.api_key)
        answer = drifted_tree.run(client, WEATHER, headers=True)
    else:
        argv = [sys.executable, drifted_tree.__file__, WEATHER, "--headers"]
        env = {{**os.environ, **agentreel.env}}
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        answer = done.stdout.strip()
    assert answer == drifted_tree.ANSWER[WEATHER]
"""
PRICES = """
currency = "EUR"
[models."stub-model"]
prompt = 3.0
completion = 15.0
"""
WAYS = ("test_trip[thread]", "test_trip[process]")


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every proxy variable at a port nothing listens on; loopback exempt."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{port}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CI", "AGENTREEL_RERECORD_COMMAND"):
        monkeypatch.delenv(name, raising=False)


def write(pytester: pytest.Pytester, tree: Path, weather: str) -> None:
    pytester.makefile(".toml", **{"stub-rules": tree.with_suffix(".toml").read_text()})
    test = TEST.format(programs=str(tree.parent))
    pytester.makepyfile(test_trip=f"WEATHER = {weather!r}\n{test}")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess(*QUIET, *args)


def header(log: bytes) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(log.split(b"\n", 1)[0])
    return loaded


def files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()}


@pytest.mark.usefixtures("offline")
def test_the_fixture_re_records_only_what_drifted(
    pytester: pytest.Pytester, drifted_tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(pytester, drifted_tree, "coast")
    run(pytester, "--agentreel-record=once").assert_outcomes(passed=2)
    folders = [pytester.path / "recordings" / "test_trip" / way for way in WAYS]
    before = {folder: files(folder) for folder in folders}
    for committed in before.values():
        assert {"session.jsonl", "session.3.jsonl", "wire.ndjson"} <= set(committed)

    write(pytester, drifted_tree, "inland")  # the grandchild's prompt changed in the code
    # A credential of this environment in what is re-recorded: refused, nothing written
    # (one way is enough: the refusal is the fixture's, whoever made the calls).
    monkeypatch.setenv("TRIP_API_TOKEN", "the inland road")
    refused = run(pytester, "--agentreel-record=drifted", "-k", "thread")
    refused.assert_outcomes(failed=1)
    refused.stdout.fnmatch_lines(
        [
            "*test_trip[[]thread[]]: refusing to write the recording*",
            "*the value of $TRIP_API_TOKEN*",
            "*Nothing was written*record again: "
            "pytest test_trip.py::test_trip[[]thread[]] --agentreel-record=drifted.*",
        ]
    )
    assert {folder: files(folder) for folder in folders} == before
    monkeypatch.delenv("TRIP_API_TOKEN")

    pytester.makefile(".toml", **{"agentreel-prices": PRICES})  # beside the test module
    drifted = run(pytester, "--agentreel-record=drifted")
    drifted.assert_outcomes(passed=2)
    report = [
        "*]: re-recorded only what drifted — 1 kept, 3 re-recorded, 0 new, 0 dropped",
        "*session.jsonl: re-recorded from call 2*",
        "*session.1.jsonl: re-recorded from call 2*",
        "*session.2.jsonl: re-recorded from call 1*",
        "*session.3.jsonl: kept*",
        "*calls: 3 replayed, 3 to the upstream*",
        "*money not spent: * EUR",
    ]
    drifted.stdout.fnmatch_lines([*report, *report])  # each way
    after = {folder: files(folder) for folder in folders}
    for folder in folders:
        assert after[folder]["session.3.jsonl"] == before[folder]["session.3.jsonl"]
        assert after[folder]["session.2.jsonl"] != before[folder]["session.2.jsonl"]
    run(pytester).assert_outcomes(passed=2)  # the merged recordings replay

    # One way loses its hotel (the last file), the other its weather (a gap in the
    # numbering): each is recorded alone, with its lineage.
    deleted = {folders[0]: ("session.3.jsonl", "session.jsonl", 1)}
    deleted[folders[1]] = ("session.2.jsonl", "session.1.jsonl", 0)
    for folder, (name, _, _) in deleted.items():
        (folder / name).unlink()
    again = run(pytester, "--agentreel-record=drifted")
    again.assert_outcomes(passed=2)
    alone = ["*3 kept, 0 re-recorded, 1 new, 0 dropped*", "*calls: 5 replayed, 1 to*"]
    again.stdout.fnmatch_lines([*alone, *alone])
    for folder, (name, parent, index) in deleted.items():
        now = files(folder)
        for kept in ("session.jsonl", "session.1.jsonl", "session.2.jsonl", "session.3.jsonl"):
            if kept != name:
                assert now[kept] == after[folder][kept], (folder.name, kept)
        child = header(now[name])
        assert (child["parent_session"], child["spawn_index"]) == (
            header(now[parent])["id"],
            index,
        )
