"""``start_drifted_proxy`` / ``agentreel proxy replay --record-drifted``: through the proxy,
only the sessions that drift are re-recorded (SPEC 20).

A three-level tree of plain ``openai`` SDK calls named by identity headers — main → route
and hotel at once, route → weather — is recorded through the stub. Changing the weather
task (the grandchild's prompt, in the agent's code) and running it again through a drifted
proxy re-records the weather session, then route from the call carrying its new answer,
then main from the call carrying that; the hotel session and its answers stay byte for
byte, the merged recording replays, and the upstream is called exactly three times.
Deleting the hotel's recording records just the hotel.
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from pathlib import Path
from typing import Any

import openai
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import (
    PARENT_HEADER,
    SESSION_HEADER,
    SPAWN_INDEX_HEADER,
    DriftedProxy,
    start_drifted_proxy,
    start_proxy,
)
from agentreel.llm_replay import read_report
from agentreel.session import VERBATIM_FILE, load_session_log

COAST = "Check the weather on the coast."
INLAND = "Check the weather inland."
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


async def tree(base_url: str, weather_task: str) -> str:
    """The agent: each session named by its headers, route and hotel run at once."""
    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="sk-drifted-0123456789")
    ids = {name: str(uuid.uuid4()) for name in ("main", "route", "weather", "hotel")}
    lineage = {"route": ("main", 0), "weather": ("route", 0), "hotel": ("main", 1)}

    async def ask(name: str, messages: list[Any]) -> str:
        headers = {SESSION_HEADER: ids[name]}
        if name in lineage:
            parent, index = lineage[name]
            headers |= {PARENT_HEADER: ids[parent], SPAWN_INDEX_HEADER: str(index)}
        stream = await client.chat.completions.create(
            model="stub-model", messages=messages, stream=True, extra_headers=headers
        )
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    async def route() -> str:
        messages: list[Any] = [{"role": "user", "content": "Plan the route."}]
        first = await ask("route", messages)
        weather = await ask("weather", [{"role": "user", "content": weather_task}])
        messages += [
            {"role": "assistant", "content": first},
            {"role": "user", "content": f"The weather: {weather}"},
        ]
        return await ask("route", messages)

    async def hotel() -> str:
        return await ask("hotel", [{"role": "user", "content": "Pick a hotel."}])

    main: list[Any] = [{"role": "user", "content": "Plan a trip."}]
    plan = await ask("main", main)
    route_answer, hotel_answer = await asyncio.gather(route(), hotel())
    main += [
        {"role": "assistant", "content": plan},
        {"role": "user", "content": f"Route: {route_answer}. Hotel: {hotel_answer}."},
    ]
    answer = await ask("main", main)
    await client.close()
    return answer


@pytest.fixture(scope="module")
def stub(tmp_path_factory: pytest.TempPathFactory) -> Any:
    rules = tmp_path_factory.mktemp("rules") / "stub-rules.toml"
    rules.write_text(RULES)
    with StubServer(rules) as server:
        yield server


@pytest.fixture(scope="module")
def recorded(stub: StubServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    fixture = tmp_path_factory.mktemp("recorded") / "tree"

    async def record() -> None:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            assert await tree(proxy.base_url, COAST) == "Trip: the coast road to Hotel Miramar."

    asyncio.run(record())
    return fixture


def drifted_run(fixture: Path, stub: StubServer, task: str) -> tuple[DriftedProxy, str, int]:
    before = len(stub.requests)

    async def run() -> tuple[DriftedProxy, str]:
        async with start_drifted_proxy(fixture=fixture, upstream=stub.base_url) as drifted:
            answer = await tree(drifted.run.base_url, task)
        return drifted, answer

    drifted, answer = asyncio.run(run())
    return drifted, answer, len(stub.requests) - before


def replays(fixture: Path, task: str, tmp_path: Path) -> None:
    report = tmp_path / "report.json"

    async def run() -> None:
        async with start_proxy("replay", fixture=fixture, report=report) as proxy:
            await tree(proxy.base_url, task)

    asyncio.run(run())
    loaded = read_report(report)
    assert loaded.ok, (loaded.errors, loaded.unconsumed())


def fates(drifted: DriftedProxy) -> dict[str, tuple[str, int | None]]:
    assert drifted.merged is not None, drifted.errors
    return {f.file or f"({f.recorded_file})": (f.status, f.from_call) for f in drifted.merged.fates}


def test_a_changed_grandchild_re_records_up_the_chain_through_the_proxy(
    recorded: Path, stub: StubServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "tree"
    shutil.copytree(recorded, fixture)
    drifted, answer, upstream = drifted_run(fixture, stub, INLAND)
    assert answer == "Trip: the inland road to Hotel Miramar."
    assert fates(drifted) == {
        "session.jsonl": ("re-recorded", 2),
        "session.1.jsonl": ("re-recorded", 2),  # route, from the call with the weather
        "session.2.jsonl": ("re-recorded", 1),  # weather: its task changed
        "session.3.jsonl": ("kept", None),  # hotel
    }
    assert upstream == drifted.upstream_calls == 3
    assert (fixture / "session.3.jsonl").read_bytes() == (recorded / "session.3.jsonl").read_bytes()
    hotel = load_session_log(recorded / "session.3.jsonl").header.id
    old = [line for line in (recorded / VERBATIM_FILE).read_text().splitlines() if hotel in line]
    new = [line for line in (fixture / VERBATIM_FILE).read_text().splitlines() if hotel in line]
    assert old == new != [], "the kept session's answers stay byte for byte"
    for name in ("session.jsonl", "session.1.jsonl", "session.2.jsonl"):
        assert (
            load_session_log(fixture / name).header.id
            == load_session_log(recorded / name).header.id
        )
    assert "session.3.jsonl" not in drifted.written
    assert "1 kept, 3 re-recorded, 0 new, 0 dropped" in drifted.report()
    replays(fixture, INLAND, tmp_path)


def test_a_deleted_child_is_recorded_alone_through_the_proxy(
    recorded: Path, stub: StubServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "tree"
    shutil.copytree(recorded, fixture)
    (fixture / "session.3.jsonl").unlink()
    drifted, _, upstream = drifted_run(fixture, stub, COAST)
    assert fates(drifted) == {
        "session.jsonl": ("kept", None),
        "session.1.jsonl": ("kept", None),
        "session.2.jsonl": ("kept", None),
        "session.3.jsonl": ("new", 1),
    }
    assert upstream == drifted.upstream_calls == 1
    for name in ("session.jsonl", "session.1.jsonl", "session.2.jsonl"):
        assert (fixture / name).read_bytes() == (recorded / name).read_bytes()
    replays(fixture, COAST, tmp_path)


def test_the_command_line_records_what_drifted_and_reports_it(
    recorded: Path, stub: StubServer, tmp_path: Path, proxy_cli: Any
) -> None:
    fixture = tmp_path / "tree"
    shutil.copytree(recorded, fixture)
    args = ["replay", "--record-drifted", "--upstream", stub.base_url, "--fixture", str(fixture)]
    process, _ = proxy_cli(args)
    first = process.stdout.readline().decode()
    assert "recording what drifts" in first, first
    base_url = first.rsplit(" ", 1)[1].strip()
    assert asyncio.run(tree(base_url, INLAND)) == "Trip: the inland road to Hotel Miramar."
    out, err = process.communicate(timeout=60)  # stdin's end stops it
    assert process.returncode == 0, err.decode()
    printed = out.decode()
    assert "1 kept, 3 re-recorded, 0 new, 0 dropped" in printed
    assert "session.2.jsonl: re-recorded from call 1" in printed
    assert "calls: 3 replayed, 3 to the upstream" in printed
    assert (fixture / "session.3.jsonl").read_bytes() == (recorded / "session.3.jsonl").read_bytes()
    replays(fixture, INLAND, tmp_path)
