"""``start_drifted_proxy`` / ``agentreel proxy replay --record-drifted``: through the proxy,
only the sessions that drift are re-recorded (SPEC 20).

The agent is ``programs/drifted_tree.py`` (the tree every drifted test shares): main →
route and hotel at once, route → weather, plain ``openai`` SDK calls, recorded through the
stub. Changing the weather agent's system prompt (the grandchild's prompt, in the agent's
code) and running it again through a drifted proxy re-records the weather session, then
route from the call carrying its new answer, then main from the call carrying that; the
hotel session and its answers stay byte for byte, the merged recording replays, and the
upstream is called exactly three times: in this process (``start_drifted_proxy``, the
agent in a thread, with identity headers) and as programs (the command line, the agent a
process of its own sending no identity header at all, through a provider that demands its
key: the record run's binding by content and lineage tells the headerless conversations
apart, so only the drifted ones go live). Deleting a child's recording (the last file, or
one leaving a gap) records just that child; a child whose prompt changed drops the
children it no longer asks and records new ones with their lineage; a credential in what
is re-recorded is refused.
"""

from __future__ import annotations

import asyncio
import http.server
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import openai
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import DriftedProxy, start_drifted_proxy, start_proxy
from agentreel.llm_proxy._cli import main as proxy_main
from agentreel.llm_replay import DEFAULT_PRICES_FILE, read_report
from agentreel.session import VERBATIM_FILE, load_session_log, secret_sha256
from agentreel.session.testing import fake_credentials

PROGRAM = Path(__file__).with_name("programs") / "drifted_tree.py"
KEY = "sk-proj-drifted0key0from0the0environment0x9Q2"
PRICES = """
currency = "EUR"
[models."stub-model"]
prompt = 3.0
completion = 15.0
"""
CHAIN = {
    "session.jsonl": ("re-recorded", 2),  # main: from the call carrying route's answer
    "session.1.jsonl": ("re-recorded", 2),  # route: from the call carrying the weather
    "session.2.jsonl": ("re-recorded", 1),  # weather: its prompt changed
    "session.3.jsonl": ("kept", None),  # hotel
}


def load_tree() -> ModuleType:
    spec = importlib.util.spec_from_file_location("drifted_tree", PROGRAM)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tree = load_tree()


async def run_tree(base_url: str, weather: str, *, headers: bool, route: str = "plan") -> str:
    """The tree in a thread of this process (its children in threads of their own)."""
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="sk-drifted-0123456789")
    try:
        answer: str = await asyncio.to_thread(
            tree.run, client, weather, headers=headers, route=route
        )
    finally:
        client.close()
    return answer


def run_program(base_url: str, weather: str, *, headers: bool, key: str) -> str:
    """The tree as a program of its own, its key in its environment."""
    env = {**os.environ, "OPENAI_BASE_URL": f"{base_url}/v1", "OPENAI_API_KEY": key}
    argv = [sys.executable, str(PROGRAM), weather, *(["--headers"] if headers else [])]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def stub() -> Iterator[StubServer]:
    with StubServer(tree.RULES) as server:
        yield server


def record(stub: StubServer, fixture: Path, *, headers: bool) -> Path:
    async def run() -> None:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            assert await run_tree(proxy.base_url, "coast", headers=headers) == tree.ANSWER["coast"]

    asyncio.run(run())
    return fixture


@pytest.fixture(scope="module")
def recorded(stub: StubServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record(stub, tmp_path_factory.mktemp("recorded") / "tree", headers=True)


@pytest.fixture(scope="module")
def recorded_headerless(stub: StubServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record(stub, tmp_path_factory.mktemp("headerless") / "tree", headers=False)


def copy(recorded: Path, tmp_path: Path) -> Path:
    fixture = tmp_path / "fixtures" / "tree"
    shutil.copytree(recorded, fixture)
    return fixture


def drifted_run(
    fixture: Path,
    stub: StubServer,
    weather: str,
    route: str = "plan",
    allow: tuple[str, ...] = (),
) -> tuple[DriftedProxy, str, int]:
    before = len(stub.requests)

    async def run() -> tuple[DriftedProxy, str]:
        async with start_drifted_proxy(
            fixture=fixture, upstream=stub.base_url, allow_secrets=allow
        ) as drifted:
            answer = await run_tree(drifted.run.base_url, weather, headers=True, route=route)
        return drifted, answer

    drifted, answer = asyncio.run(run())
    return drifted, answer, len(stub.requests) - before


def replays(
    fixture: Path, weather: str, tmp_path: Path, *, headers: bool = True, route: str = "plan"
) -> None:
    report = tmp_path / "report.json"

    async def run() -> None:
        async with start_proxy("replay", fixture=fixture, report=report) as proxy:
            answer = await run_tree(proxy.base_url, weather, headers=headers, route=route)
            assert answer == tree.ANSWER[weather]

    asyncio.run(run())
    loaded = read_report(report)
    assert loaded.ok, (loaded.errors, loaded.unconsumed())


def fates(drifted: DriftedProxy) -> dict[str, tuple[str, int | None]]:
    assert drifted.merged is not None, drifted.errors
    return {f.file or f"({f.recorded_file})": (f.status, f.from_call) for f in drifted.merged.fates}


def printed_fates(printed: str) -> dict[str, tuple[str, int | None]]:
    """The report's per-session lines, as ``fates`` gives them."""
    found: dict[str, tuple[str, int | None]] = {}
    for line in printed.splitlines():
        name, _, what = line.strip().partition(": ")
        if not name.startswith("session") or not what:
            continue
        status = what.split(" (")[0].split(" from call ")[0]
        call = int(what.split("from call ")[1].split(" ")[0]) if "from call" in what else None
        found[name] = (status, 1 if status == "new" else call)
    return found


def assert_hotel_kept(fixture: Path, recorded: Path) -> None:
    """The hotel's log and its answers in ``wire.ndjson``, byte for byte."""
    assert (fixture / "session.3.jsonl").read_bytes() == (recorded / "session.3.jsonl").read_bytes()
    hotel = load_session_log(recorded / "session.3.jsonl").header.id
    old = [line for line in (recorded / VERBATIM_FILE).read_text().splitlines() if hotel in line]
    new = [line for line in (fixture / VERBATIM_FILE).read_text().splitlines() if hotel in line]
    assert old == new != [], "the kept session's answers stay byte for byte"


def test_a_changed_grandchild_re_records_up_the_chain_through_the_proxy(
    recorded: Path, stub: StubServer, tmp_path: Path
) -> None:
    fixture = copy(recorded, tmp_path)
    drifted, answer, upstream = drifted_run(fixture, stub, "inland")
    assert answer == tree.ANSWER["inland"]
    assert fates(drifted) == CHAIN
    assert upstream == drifted.upstream_calls == 3
    assert_hotel_kept(fixture, recorded)
    for name in ("session.jsonl", "session.1.jsonl", "session.2.jsonl"):
        assert (
            load_session_log(fixture / name).header.id
            == load_session_log(recorded / name).header.id
        )
    assert "session.3.jsonl" not in drifted.written
    assert "1 kept, 3 re-recorded, 0 new, 0 dropped" in drifted.report()
    replays(fixture, "inland", tmp_path)


@pytest.mark.parametrize(
    ("route", "expected", "calls"),
    [
        # The route agent asks no weather agent any more: weather is dropped, and main,
        # handed the same route answer, is kept (the hotel's file moves up one).
        (
            "direct",
            {
                "session.jsonl": ("kept", None),
                "session.1.jsonl": ("re-recorded", 1),
                "session.2.jsonl": ("kept", None),  # the hotel, was session.3.jsonl
                "(session.2.jsonl)": ("dropped", None),  # the weather
            },
            1,
        ),
        # It asks two: the first asks what it asked before and is replayed, the second is
        # a new child of the live route call, recorded with its lineage.
        (
            "twice",
            {
                "session.jsonl": ("kept", None),
                "session.1.jsonl": ("re-recorded", 1),
                "session.2.jsonl": ("kept", None),
                "session.3.jsonl": ("new", 1),
                "session.4.jsonl": ("kept", None),  # the hotel, was session.3.jsonl
            },
            3,
        ),
    ],
)
def test_a_changed_child_drops_the_children_it_no_longer_asks_and_records_new_ones(
    recorded: Path,
    stub: StubServer,
    tmp_path: Path,
    route: str,
    expected: dict[str, tuple[str, int | None]],
    calls: int,
) -> None:
    fixture = copy(recorded, tmp_path)
    drifted, answer, upstream = drifted_run(fixture, stub, "coast", route)
    assert answer == tree.ANSWER["coast"]
    assert fates(drifted) == expected
    assert upstream == drifted.upstream_calls == calls
    hotel = fixture / ("session.4.jsonl" if route == "twice" else "session.2.jsonl")
    assert hotel.read_bytes() == (recorded / "session.3.jsonl").read_bytes()
    assert (fixture / "session.jsonl").read_bytes() == (recorded / "session.jsonl").read_bytes()
    route_id = load_session_log(recorded / "session.1.jsonl").header.id
    if route == "direct":
        assert "session.2.jsonl: dropped: no live session made its calls" in drifted.report()
        assert route_id in (fixture / "session.1.jsonl").read_text()
    else:
        weather = recorded / "session.2.jsonl"
        assert (fixture / "session.2.jsonl").read_bytes() == weather.read_bytes()
        new = load_session_log(fixture / "session.3.jsonl").header
        assert (new.parent_session, new.spawn_index) == (route_id, 1)
    replays(fixture, "coast", tmp_path, route=route)


@pytest.mark.parametrize(
    "deleted",
    [
        "session.3.jsonl",  # the hotel, the last file
        "session.2.jsonl",  # the weather: its file leaves a gap in the numbering
    ],
)
def test_a_deleted_child_is_recorded_alone_through_the_proxy(
    recorded: Path, stub: StubServer, tmp_path: Path, deleted: str
) -> None:
    fixture = copy(recorded, tmp_path)
    (fixture / deleted).unlink()
    drifted, _, upstream = drifted_run(fixture, stub, "coast")
    expected = dict.fromkeys(CHAIN, ("kept", None)) | {deleted: ("new", 1)}
    assert fates(drifted) == expected
    assert drifted.merged is not None
    kept = [fate.recorded_file for fate in drifted.merged.fates if fate.status == "kept"]
    assert kept == [name for name in CHAIN if name != deleted]  # named as the fixture has them
    assert upstream == drifted.upstream_calls == 1
    assert drifted.written == [deleted, VERBATIM_FILE]
    for name in CHAIN:
        if name != deleted:
            assert (fixture / name).read_bytes() == (recorded / name).read_bytes()
    new = load_session_log(fixture / deleted).header
    old = load_session_log(recorded / deleted).header
    assert (new.parent_session, new.spawn_index) == (old.parent_session, old.spawn_index)
    replays(fixture, "coast", tmp_path)


def test_a_credential_in_what_is_re_recorded_is_refused_and_nothing_written(
    recorded: Path, tmp_path: Path
) -> None:
    # The changed weather agent's live answer holds a key of a known shape: the record
    # run's scan over what is new refuses its lane, so the merge writes nothing.
    leaked = fake_credentials()["anthropic"]
    rules = tmp_path / "leaky.toml"
    rules.write_text(tree.RULES.read_text().replace('text = "rainy"', f'text = "rainy {leaked}"'))
    fixture = copy(recorded, tmp_path)
    before = {path.name: path.read_bytes() for path in fixture.iterdir()}
    with StubServer(rules) as leaky:
        drifted, _, upstream = drifted_run(fixture, leaky, "inland")
        # A deliberate fake key of a test, allowed by the digests a refusal prints (a
        # message's preview holds the key's start): written.
        digests = set(re.findall(r"sha256 ([0-9a-f]{64})", "".join(drifted.errors)))
        allow = (secret_sha256(leaked), *sorted(digests))
        allowed = copy(recorded, tmp_path / "allowed")
        kept, _, _ = drifted_run(allowed, leaky, "inland", allow=allow)
    assert fates(kept) == CHAIN
    assert leaked in (allowed / "session.2.jsonl").read_text()
    assert upstream == 3
    assert drifted.merged is None
    assert drifted.written == []
    refusals = [error for error in drifted.errors if "refused to record a credential" in error]
    assert refusals, drifted.errors
    assert leaked not in "".join(drifted.errors)
    assert {path.name: path.read_bytes() for path in fixture.iterdir()} == before


class KeyedUpstream(http.server.ThreadingHTTPServer):
    """A provider on 127.0.0.1 that demands its key as OpenAI does (``Authorization:
    Bearer``; else 401 with OpenAI's error body) and answers from the stub behind it."""

    def __init__(self, stub: StubServer) -> None:
        self.stub = stub
        self.authorized = 0
        self.refused = 0
        super().__init__(("127.0.0.1", 0), _KeyedHandler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _KeyedHandler(http.server.BaseHTTPRequestHandler):
    server: KeyedUpstream
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        if self.headers.get("authorization") != f"Bearer {KEY}":
            self.server.refused += 1
            error = {
                "error": {
                    "message": "Incorrect API key provided.",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            }
            self._send(401, json.dumps(error).encode(), "application/json")
            return
        self.server.authorized += 1
        forward = urllib.request.Request(
            self.server.stub.base_url + self.path,
            data=body,
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(forward, timeout=30) as answer:
            self._send(answer.status, answer.read(), answer.headers["content-type"])

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def keyed_upstream(stub: StubServer) -> Iterator[KeyedUpstream]:
    server = KeyedUpstream(stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_headerless_programs_through_a_provider_demanding_its_key(
    recorded_headerless: Path, keyed_upstream: KeyedUpstream, tmp_path: Path, proxy_cli: Any
) -> None:
    # The command line, the agent a program of its own whose requests name no session:
    # the record run in front binds each by content and lineage, so only the weather's
    # conversation and what carries its answer go live — the hotel, running at the same
    # time as route, stays replayed. The upstream is a provider demanding its key, which
    # lives only in the agent's environment: its SDK sends it, the proxy passes it on for
    # the calls that go live, and no file, log line or printed line holds it.
    fixture = copy(recorded_headerless, tmp_path)
    (fixture.parent / DEFAULT_PRICES_FILE).write_text(PRICES)  # the default price table
    args = ["replay", "--record-drifted", "--upstream", keyed_upstream.url]
    args += ["--fixture", str(fixture), "--verbose"]
    process, _ = proxy_cli(args)
    first = process.stdout.readline().decode()
    assert "recording what drifts" in first, first
    base_url = first.rsplit(" ", 1)[1].strip()
    output = run_program(base_url, "inland", headers=False, key=KEY)
    assert tree.ANSWER["inland"] in output
    out, err = process.communicate(timeout=60)  # stdin's end stops it
    printed = first + out.decode() + err.decode()
    assert process.returncode == 0, printed
    assert printed_fates(printed) == CHAIN, printed
    assert (keyed_upstream.authorized, keyed_upstream.refused) == (3, 0)
    assert "calls: 3 replayed, 3 to the upstream" in printed
    # The money not spent, from the recorded usage of main's, route's and the hotel's
    # first calls at the default table's prices.
    saved = ((30 + 12 + 10) * 3.0 + (5 + 4 + 2) * 15.0) / 1e6
    assert f"money not spent: {saved:.4f} EUR" in printed
    assert "agentreel proxy: " in err.decode()  # --verbose logged the requests
    assert KEY not in printed + output
    for path in fixture.parent.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    assert_hotel_kept(fixture, recorded_headerless)
    replays(fixture, "inland", tmp_path, headers=False)


def test_the_price_table_is_the_drifted_run_s_alone_and_a_bad_one_stops_it_at_once(
    recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = copy(recorded, tmp_path)
    bad = tmp_path / "prices.toml"
    bad.write_text('[models."stub-model"]\nprompt = 3.0\n')
    drifted = ["replay", "--record-drifted", "--upstream", "http://127.0.0.1:9/v1"]
    assert proxy_main([*drifted, "--fixture", str(fixture), "--prices", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err
    assert "'prompt' and 'completion'" in err
    assert proxy_main(["replay", "--fixture", str(fixture), "--prices", str(bad)]) == 2
    assert "--prices in replay needs --record-drifted" in capsys.readouterr().err
    assert proxy_main(["replay", "--fixture", str(fixture), "--allow-secret", "0" * 64]) == 2
    assert "--allow-secret in replay needs --record-drifted" in capsys.readouterr().err
