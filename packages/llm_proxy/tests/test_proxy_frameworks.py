"""Framework programs through the proxy: an OpenAI Agents SDK program (agents as tools,
called concurrently, then a handoff), a pydantic-ai program (a lead delegating to a
helper agent twice, concurrently) and a google-genai program (the same on the Gemini API),
each run as a user runs it — a subprocess pointed at the proxy by ``OPENAI_BASE_URL`` /
``GOOGLE_GEMINI_BASE_URL`` — recorded through the stub server, then replayed with the
stub stopped, a dummy key and every proxy variable aimed at a closed port.

Both with identity headers (set through each framework's own per-agent header setting)
and without (the proxy tells the sessions apart by content and pending tool calls). Every
replay must print the recorded final output, consume each recorded session's script
exactly, and serve each session (and the handoff's lane) the chunks it was recorded with,
under the same parent. A network guard loaded into the programs fails any connection but
the proxy's, so nothing here reaches the internet (the Agents SDK's tracing exporter would).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import DUMMY_KEY, start_proxy
from agentreel.llm_replay import read_report
from agentreel.session import (
    AssistantChunk,
    RequestHeader,
    SessionLog,
    harvest_session_logs,
    load_session_log,
    recording_names,
)

PROGRAMS = Path(__file__).parent / "programs"
RECORD_KEY = "sk-framework-record-key-0123"

# The Agents SDK's documented switch for its trace exporter (which posts to the internet).
TRACING_OFF = {"OPENAI_AGENTS_DISABLE_TRACING": "1"}
REPLAYS = 1


@dataclass(frozen=True)
class Program:
    script: str
    output: dict[str, Any]
    # Per recorded session, in session order: (calls, parent's position, spawn index).
    sessions: list[tuple[int, int | None, int | None]]
    # The same recorded without identity headers, where that differs.
    headerless: list[tuple[int, int | None, int | None]] | None = None

    def tree(self, identity: bool) -> list[tuple[int, int | None, int | None]]:
        return self.sessions if identity or self.headerless is None else self.headerless

    @property
    def rules(self) -> str:
        return (PROGRAMS / self.script).with_suffix(".toml").read_text()


AGENTS_SDK = Program(
    "agents_sdk_counting.py",
    {"final": "7 apples and 3 pears.", "last_agent": "Reporter"},
    # Coordinator (plan, handoff), the two counters as its children, the reporter's lane
    # (sharing the coordinator's identity header) ...
    [(2, None, None), (1, 0, 0), (1, 0, 1), (1, 0, None)],
    # ... or, headerless, the coordinator's child handed the conversation by its third
    # delegating call, transfer_to_reporter (SPEC 17).
    headerless=[(2, None, None), (1, 0, 0), (1, 0, 1), (1, 0, 2)],
)
PYDANTIC_AI = Program(
    "pydantic_ai_counting.py",
    {"final": "7 apples and 3 pears.", "helpers": 2},
    [(2, None, None), (1, 0, 0), (1, 0, 1)],
)
GOOGLE_GENAI = Program(
    "google_genai_counting.py",
    {"final": "7 apples and 3 pears.", "helpers": 2},
    [(2, None, None), (1, 0, 0), (1, 0, 1)],
)


async def _run(
    program: Program,
    proxy_port: int,
    tmp_path: Path,
    *,
    identity: bool,
    key: str,
    proxies: dict[str, str],
    extra_env: dict[str, str] = TRACING_OFF,
    must_succeed: bool = True,
) -> tuple[dict[str, Any], list[str]]:
    """Run the program against the proxy (``proxies``: the ``offline_proxies`` variables):
    (its printed output, network refusals)."""
    network_log = tmp_path / "network.log"
    network_log.unlink(missing_ok=True)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(home),
        "PYTHONPATH": str(PROGRAMS / "offline"),
        "OPENAI_BASE_URL": f"http://127.0.0.1:{proxy_port}/v1",
        "OPENAI_API_KEY": key,
        "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{proxy_port}",
        "GEMINI_API_KEY": key,
        "AGENTREEL_TEST_NETWORK_LOG": str(network_log),
        "AGENTREEL_TEST_ALLOWED_PORTS": str(proxy_port),
        **proxies,
        **extra_env,
    }
    flags = ["--identity-headers"] if identity else []
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(PROGRAMS / program.script),
        *flags,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=180)
    refusals = network_log.read_text().splitlines() if network_log.exists() else []
    if not must_succeed:
        return {"returncode": process.returncode, "stderr": err.decode()}, refusals
    assert process.returncode == 0, f"{program.script} failed:\n{err.decode()[-3000:]}"
    return json.loads(out.decode().strip().splitlines()[-1]), refusals


def _chunks(log: SessionLog) -> bytes:
    return msgspec.json.encode([e.data.chunk for e in log.events if isinstance(e, AssistantChunk)])


def _routing(logs: list[SessionLog]) -> list[tuple[bytes, bytes | None, int | None]]:
    """Each session as (the chunks it was given, its parent's chunks, spawn index), sorted:
    the same for two runs exactly when every session got the same script under the same
    parent, whatever the ids and the order the sessions were created in."""
    by_id = {log.header.id: log for log in logs}
    shape = []
    for log in logs:
        parent = by_id.get(log.header.parent_session) if log.header.parent_session else None
        shape.append((_chunks(log), _chunks(parent) if parent else None, log.header.spawn_index))
    return sorted(shape, key=repr)


def _recorded(fixture: Path) -> list[SessionLog]:
    return [load_session_log(fixture / name) for name in recording_names(fixture)]


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize(
    "program",
    [AGENTS_SDK, PYDANTIC_AI, GOOGLE_GENAI],
    ids=["openai-agents", "pydantic-ai", "google-genai"],
)
@pytest.mark.parametrize("identity", [True, False], ids=["identity-headers", "no-headers"])
async def test_framework_program_records_and_replays_through_the_proxy(
    program: Program, identity: bool, tmp_path: Path, offline_proxies: dict[str, str]
) -> None:
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(program.rules) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            output, refusals = await _run(
                program, proxy.port, tmp_path, identity=identity, key=RECORD_KEY, proxies={}
            )
    assert output == program.output
    assert refusals == []
    recorded = _recorded(fixture)
    ids = [log.header.id for log in recorded]
    lineage = [
        (
            sum(isinstance(event, RequestHeader) for event in log.events),
            ids.index(log.header.parent_session) if log.header.parent_session else None,
            log.header.spawn_index,
        )
        for log in recorded
    ]
    assert lineage == program.tree(identity)
    for name in recording_names(fixture):
        assert RECORD_KEY not in (fixture / name).read_text()

    for run in range(REPLAYS):
        report = tmp_path / f"report-{run}.json"
        served = tmp_path / f"served-{run}"
        async with start_proxy(
            "replay", fixture=fixture, report=report, sessions_root=served
        ) as proxy:
            output, refusals = await _run(
                program, proxy.port, tmp_path, identity=identity, key=DUMMY_KEY,
                proxies=offline_proxies,
            )  # fmt: skip
        assert output == program.output, f"replay {run}"
        assert refusals == [], f"replay {run} reached for the network: {refusals}"
        consumption = read_report(report)
        assert consumption.errors == [], f"replay {run}"
        assert [(s.calls, s.consumed) for s in consumption.scripts] == [
            (calls, calls) for calls, _, _ in program.sessions
        ], f"replay {run}"
        if identity:  # every session's script bound to that live session
            bound = [s.bound_to for s in consumption.scripts]
            lanes = sum(
                parent is not None and index is None for _, parent, index in program.sessions
            )
            assert None not in bound
            assert len(set(bound)) == len(bound) - lanes  # a side lane shares its session's id
        assert _routing(harvest_session_logs(served)) == _routing(recorded), f"replay {run}"


@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_network_guard_catches_the_agents_sdk_tracing_export(tmp_path: Path) -> None:
    """Without ``OPENAI_AGENTS_DISABLE_TRACING`` the SDK exports traces to the internet:
    the guard the framework tests rely on refuses and names that, so those tests would fail
    if tracing were left on (or another framework phoned home)."""
    with StubServer.from_toml(AGENTS_SDK.rules) as stub:
        async with start_proxy(
            "record", upstream=stub.base_url, sessions_root=tmp_path / "logs"
        ) as proxy:
            output, refusals = await _run(
                AGENTS_SDK, proxy.port, tmp_path, identity=False, key=RECORD_KEY, proxies={},
                extra_env={},
            )  # fmt: skip
    assert output == AGENTS_SDK.output
    assert any("api.openai.com" in refusal for refusal in refusals), refusals


@pytest.mark.slow
@pytest.mark.asyncio
async def test_deleting_a_childs_recording_names_that_child(
    tmp_path: Path, offline_proxies: dict[str, str]
) -> None:
    """The google-genai program (identity headers) recorded, one helper's recording
    deleted: replay refuses exactly that helper, naming it by its parent and spawn index,
    and serves the rest. (Without headers the same deletion is reported as a drift of the
    lead's next call, which SPEC 13's headerless naming is to turn into this error.)"""
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(GOOGLE_GENAI.rules) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            await _run(
                GOOGLE_GENAI, proxy.port, tmp_path, identity=False, key=RECORD_KEY, proxies={}
            )
    recorded = _recorded(fixture)
    (pears,) = [
        name
        for name, log in zip(recording_names(fixture), recorded, strict=True)
        if log.header.parent_session is not None and "count the pears" in log.path.read_text()
    ]
    assert pears != "session.jsonl"
    # Deleted as a user would: the files after it move up one, keeping session order.
    names = recording_names(fixture)
    (fixture / pears).unlink()
    for before, after in itertools.pairwise(names[names.index(pears) :]):
        (fixture / after).rename(fixture / before)
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        outcome, refusals = await _run(
            GOOGLE_GENAI, proxy.port, tmp_path, identity=True, key=DUMMY_KEY,
            proxies=offline_proxies, must_succeed=False,
        )  # fmt: skip
    assert outcome["returncode"] != 0
    assert refusals == []
    errors = read_report(report).errors
    assert [error.type for error in errors] == ["UnrecordedSessionError"], errors
    # The pears helper is the lead's second delegation: spawn index 1 under the lead.
    assert "spawn index 1" in errors[0].message
    assert "spawn index 0" not in errors[0].message
    assert "spawn index 1" in outcome["stderr"]  # the program's ClientError says the same
