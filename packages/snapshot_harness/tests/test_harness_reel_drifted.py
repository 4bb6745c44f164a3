"""``--agentreel-record=drifted``: the pytest fixture re-records only what drifted (SPEC 20).

A test whose agent is a three-level tree of ``openai`` SDK calls, each session named by
``agentreel.headers`` — main → route and hotel in two threads at once, route → weather —
is recorded once. Its weather task (the grandchild's prompt) is then changed in the test's
code and the test run with ``--agentreel-record=drifted``: weather, route from the call
carrying its new answer and main from the call carrying that are re-recorded, the hotel's
files stay byte for byte, the run says so at its end, and the recording replays. Deleting
the hotel's recording and running drifted again records just the hotel.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow

QUIET = ("-p", "no:cacheprovider", "-p", "no:asyncio", "-q")
RULES = """
[[rule]]
match = { last_user = "Plan a trip." }
text = "A route and a hotel."
[[rule]]
match = { last_user = "the inland road" }
text = "Trip: the inland road to Hotel Miramar."
[[rule]]
match = { last_user = "Route:" }
text = "Trip: the coast road to Hotel Miramar."
[[rule]]
match = { last_user = "Plan the route." }
text = "First the weather."
[[rule]]
match = { last_user = "The weather: rainy" }
text = "the inland road"
[[rule]]
match = { last_user = "The weather:" }
text = "the coast road"
[[rule]]
match = { last_user = "Check the weather inland" }
text = "rainy"
[[rule]]
match = { last_user = "Check the weather" }
text = "sunny"
[[rule]]
match = { last_user = "Pick a hotel." }
text = "Hotel Miramar"
"""
TEST = """
import uuid
from concurrent.futures import ThreadPoolExecutor

import openai

LINEAGE = {"route": ("main", 0), "weather": ("route", 0), "hotel": ("main", 1)}


def test_trip(agentreel):
    ids = {name: str(uuid.uuid4()) for name in ("main", "route", "weather", "hotel")}
    client = openai.OpenAI(base_url=agentreel.base_url, api_key=agentreel.api_key)

    def ask(name, messages):
        parent, index = LINEAGE.get(name, (None, None))
        headers = agentreel.headers(ids[name], ids.get(parent), index)
        reply = client.chat.completions.create(
            model="stub-model", messages=messages, extra_headers=headers
        )
        return reply.choices[0].message.content

    def route():
        messages = [{"role": "user", "content": "Plan the route."}]
        first = ask("route", messages)
        weather = ask("weather", [{"role": "user", "content": WEATHER}])
        messages += [
            {"role": "assistant", "content": first},
            {"role": "user", "content": f"The weather: {weather}"},
        ]
        return ask("route", messages)

    main = [{"role": "user", "content": "Plan a trip."}]
    plan = ask("main", main)
    with ThreadPoolExecutor(2) as pool:
        routed = pool.submit(route)
        hotel = pool.submit(ask, "hotel", [{"role": "user", "content": "Pick a hotel."}])
        answers = routed.result(), hotel.result()
    main += [
        {"role": "assistant", "content": plan},
        {"role": "user", "content": f"Route: {answers[0]}. Hotel: {answers[1]}."},
    ]
    assert ask("main", main) == EXPECTED
"""
PRICES = """
currency = "EUR"
[models."stub-model"]
prompt = 3.0
completion = 15.0
"""
COAST = ("Check the weather on the coast.", "Trip: the coast road to Hotel Miramar.")
INLAND = ("Check the weather inland.", "Trip: the inland road to Hotel Miramar.")


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


def write(pytester: pytest.Pytester, weather: tuple[str, str]) -> None:
    pytester.makefile(".toml", **{"stub-rules": RULES})
    task, expected = weather
    pytester.makepyfile(test_trip=f"WEATHER = {task!r}\nEXPECTED = {expected!r}\n{TEST}")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess(*QUIET, *args)


def header(log: bytes) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(log.split(b"\n", 1)[0])
    return loaded


def files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()}


@pytest.mark.usefixtures("offline")
def test_the_fixture_re_records_only_what_drifted(pytester: pytest.Pytester) -> None:
    write(pytester, COAST)
    run(pytester, "--agentreel-record=once").assert_outcomes(passed=1)
    folder = pytester.path / "recordings" / "test_trip" / "test_trip"
    before = files(folder)
    assert {"session.jsonl", "session.3.jsonl", "wire.ndjson"} <= set(before)

    write(pytester, INLAND)  # the grandchild's prompt changed in the agent's code
    pytester.makefile(".toml", **{"agentreel-prices": PRICES})  # beside the test module
    drifted = run(pytester, "--agentreel-record=drifted")
    drifted.assert_outcomes(passed=1)
    drifted.stdout.fnmatch_lines(
        [
            "*re-recorded only what drifted*",
            "*1 kept, 3 re-recorded, 0 new, 0 dropped*",
            "*session.jsonl: re-recorded from call 2*",
            "*session.1.jsonl: re-recorded from call 2*",
            "*session.2.jsonl: re-recorded from call 1*",
            "*session.3.jsonl: kept*",
            "*calls: 3 replayed, 3 to the upstream*",
            "*money not spent: * EUR",
        ]
    )
    after = files(folder)
    assert after["session.3.jsonl"] == before["session.3.jsonl"]
    assert after["session.2.jsonl"] != before["session.2.jsonl"]
    run(pytester).assert_outcomes(passed=1)  # the merged recording replays

    (folder / "session.3.jsonl").unlink()
    again = run(pytester, "--agentreel-record=drifted")
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["*3 kept, 0 re-recorded, 1 new, 0 dropped*"])
    now = files(folder)
    for name in ("session.jsonl", "session.1.jsonl", "session.2.jsonl"):
        assert now[name] == after[name], name
    # The new hotel is recorded with its lineage: the kept main session's child 1.
    hotel = header(now["session.3.jsonl"])
    assert (hotel["parent_session"], hotel["spawn_index"]) == (
        header(now["session.jsonl"])["id"],
        1,
    )
