"""What the HTML report shows, read from a scenario directory and a run's outcome (SPEC 12).

Per scenario: its status (and, for a failure, the message and the per-file diffs), the
session tree from the recordings' headers (main, spawned, forked and process children,
proxy side lanes), each session's model calls with the recorded times (start at the
``request/header``, end at the ``finish`` chunk) for one shared timeline, what each session
did (user messages, model calls, tool calls and results, subagents) and the transcript
from ``golden/transcript.jsonl``.

A report is a viewer: it reads the logs line by line as plain JSON and keeps what it does
not know (a header field a newer writer added, an unknown event type) instead of refusing
the file the way the strict loader must; a line it cannot parse becomes a named problem
on the page.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec

from agentreel.mcp_replay import MCP_RECORDING_PATTERN, MCP_RECORDINGS_DIR
from agentreel.session import recording_names
from agentreel.snapshot_harness._layout import GOLDEN_DIR, TRANSCRIPT_FILE
from agentreel.snapshot_harness._scenario import SCENARIO_FILE
from agentreel.snapshot_harness.exceptions import GoldenMismatchError

Status = Literal["passed", "failed"]
_decode = msgspec.json.Decoder().decode  # any JSON value: a viewer keeps what it finds
TEXT_LIMIT = 4000  # characters of one prompt, tool result or frame kept in the page
_KNOWN_HEADER = {"type", "version", "id", "created_at", "cwd", "parent_session"}
_KNOWN_HEADER |= {"spawn_index", "origin", "seed_length"}


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    """How one scenario's run ended, as the report shows it (picklable for xdist)."""

    directory: Path
    status: Status
    duration: float
    message: str = ""
    diffs: Mapping[str, str] = field(default_factory=dict)
    drifted: str = ""
    """``record --drifted`` (SPEC 20): per session kept / re-recorded / new / dropped and the
    totals, as printed."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "directory": str(self.directory),
            "status": self.status,
            "duration": self.duration,
            "message": self.message,
            "diffs": dict(self.diffs),
            "drifted": self.drifted,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScenarioResult:
        return cls(
            directory=Path(data["directory"]),
            status=data["status"],
            duration=float(data["duration"]),
            message=str(data.get("message", "")),
            diffs=dict(data.get("diffs", {})),
            drifted=str(data.get("drifted", "")),
        )


def scenario_result(
    directory: Path, duration: float, error: BaseException | None
) -> ScenarioResult:
    """The report's view of a run of ``directory`` that ended with ``error`` (None: passed)."""
    if error is None:
        return ScenarioResult(directory, "passed", duration)
    diffs = error.diffs if isinstance(error, GoldenMismatchError) else {}
    return ScenarioResult(directory, "failed", duration, str(error), diffs)


def report_data(results: Iterable[ScenarioResult], *, title: str = "agentreel") -> dict[str, Any]:
    """The JSON document the page renders: a summary and one entry per scenario."""
    scenarios = [_scenario(result) for result in results]
    failed = sum(1 for s in scenarios if s["status"] == "failed")
    return {
        "title": title,
        "generated": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "passed": len(scenarios) - failed,
        "failed": failed,
        "scenarios": scenarios,
    }


def _mapping(value: object) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one: a viewer reads what is there."""
    return value if isinstance(value, dict) else {}


def _short(text: str, limit: int = TEXT_LIMIT) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}[... {len(text) - limit} more characters]"


def _description(directory: Path) -> str:
    import tomllib

    try:
        with (directory / SCENARIO_FILE).open("rb") as file:
            value = tomllib.load(file).get("description", "")
    except (OSError, tomllib.TOMLDecodeError):
        return ""
    return value if isinstance(value, str) else ""


def _scenario(result: ScenarioResult) -> dict[str, Any]:
    directory = result.directory
    problems: list[str] = []
    sessions: list[dict[str, Any]] = []
    try:
        names = recording_names(directory)
    except OSError as exc:
        names = []
        problems.append(f"{directory}: cannot list the recordings: {exc}")
    for name in names:
        session = _read_session(directory / name, problems)
        if session is not None:
            sessions.append(session)
    _link(sessions)
    unplaced = _place_mcp_calls(sessions, _mcp_calls(directory, problems))
    starts = [s["start"] for s in sessions if s["start"] is not None]
    ends = [s["end"] for s in sessions if s["end"] is not None]
    return {
        "name": directory.name,
        "description": _description(directory),
        "status": result.status,
        "duration": round(result.duration, 3),
        "message": _short(result.message, 20 * TEXT_LIMIT),
        "diffs": [{"file": name, "text": text} for name, text in result.diffs.items()],
        "drifted": result.drifted,
        "t0": min(starts) if starts else 0,
        "t1": max(ends) if ends else 0,
        "sessions": sessions,
        "transcript": _transcript(directory / GOLDEN_DIR / TRANSCRIPT_FILE, problems),
        "mcp": unplaced,
        "problems": problems,
    }


def _read_session(path: Path, problems: list[str]) -> dict[str, Any] | None:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        problems.append(f"{path}: cannot be read: {exc}")
        return None
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = _decode(line)
        except msgspec.DecodeError as exc:
            problems.append(f"{path}:{number}: not JSON ({exc}); shown up to there")
            break
        if isinstance(record, dict):
            records.append(record)
    if not records or records[0].get("type") != "session":
        problems.append(f"{path}:1: no session header; the file is not shown")
        return None
    header = records[0]
    seed = header.get("seed_length") if isinstance(header.get("seed_length"), int) else 0
    own = [r for r in records[1:] if not (isinstance(r.get("seq"), int) and r["seq"] < seed)]
    calls, story = _calls_and_story(own)
    times = [r["time"] for r in own if isinstance(r.get("time"), int | float)]
    return {
        "file": path.name,
        "id": str(header.get("id", "")),
        "parent_id": header.get("parent_session"),
        "origin": str(header.get("origin", "main")),
        "spawn_index": header.get("spawn_index"),
        "seed_length": seed,
        "created_at": header.get("created_at"),
        "extra": {k: v for k, v in header.items() if k not in _KNOWN_HEADER},
        "start": min(times) if times else header.get("created_at"),
        "end": max(times) if times else header.get("created_at"),
        "calls": calls,
        "story": story,
    }


class _Call:
    def __init__(self, start: float, turn: Any, step: Any, model: str) -> None:
        self.start = start
        self.end = start
        self.turn = turn
        self.step = step
        self.model = model
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.tools: dict[int, dict[str, str]] = {}
        self.finish = "unfinished"
        self.usage: dict[str, Any] = {}
        self.chunks = 0

    def add(self, chunk: Mapping[str, Any], at: float) -> None:
        self.chunks += 1
        self.end = max(self.end, at)
        kind = chunk.get("type")
        if kind == "text-delta":
            self.text.append(str(chunk.get("text", "")))
        elif kind == "reasoning-delta":
            self.reasoning.append(str(chunk.get("text", "")))
        elif kind == "tool-call-delta":
            tool = self.tools.setdefault(int(chunk.get("index", 0)), {"name": "", "arguments": ""})
            if chunk.get("name"):
                tool["name"] = str(chunk["name"])
            tool["arguments"] += str(chunk.get("arguments_delta", ""))
        elif kind == "usage":
            self.usage = {k: v for k, v in chunk.items() if k != "type" and v is not None}
        elif kind == "finish":
            self.finish = str(chunk.get("reason", "?"))
            if chunk.get("message"):
                self.finish += f": {chunk['message']}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "s": self.start,
            "e": self.end,
            "turn": self.turn,
            "step": self.step,
            "model": self.model,
            "finish": self.finish,
            "text": _short("".join(self.text)),
            "reasoning": _short("".join(self.reasoning)),
            "tools": [
                {"name": t["name"], "arguments": _short(t["arguments"])}
                for _, t in sorted(self.tools.items())
            ],
            "usage": self.usage,
            "chunks": self.chunks,
        }


def _calls_and_story(events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Any]]:
    """Model calls (a call opens at ``request/header`` or its first chunk, closes at
    ``finish``) and the session's story: its other events in order, calls by index."""
    calls: list[_Call] = []
    story: list[Any] = []
    current: _Call | None = None
    for event in events:
        kind = event.get("type")
        data = _mapping(event.get("data"))
        at: float = event["time"] if isinstance(event.get("time"), int | float) else 0
        if kind == "request/header":
            current = _Call(at, data.get("turn"), data.get("step"), str(data.get("model", "")))
            calls.append(current)
            story.append({"k": "call", "i": len(calls) - 1})
        elif kind == "assistant/chunk":
            chunk = _mapping(data.get("chunk"))
            if current is None:
                current = _Call(at, data.get("turn"), data.get("step"), "")
                calls.append(current)
                story.append({"k": "call", "i": len(calls) - 1})
            current.add(chunk, at)
            if chunk.get("type") == "finish":
                current = None
        elif kind == "user/message":
            story.append({"k": "user", "t": at, "text": _short(str(data.get("text", "")))})
        elif kind == "tool/call":
            story.append(
                {
                    "k": "tool",
                    "t": at,
                    "text": f"{data.get('name', '?')}({_short(str(data.get('arguments', '')))})",
                }
            )
        elif kind == "tool/result":
            label = "tool error" if data.get("is_error") else "result"
            story.append({"k": label, "t": at, "text": _short(str(data.get("content", "")))})
        elif kind == "subagent/start":
            story.append(
                {
                    "k": "subagent",
                    "t": at,
                    "text": f"starts {data.get('mode', '?')} child #{data.get('spawn_index')}",
                    "child": data.get("child_session"),
                    "mode": data.get("mode"),
                }
            )
        elif kind == "subagent/end":
            story.append(
                {"k": "subagent", "t": at, "text": f"child ended: {data.get('outcome', '?')}"}
            )
        elif kind == "session/end-seed":
            story.append(
                {
                    "k": "seed",
                    "t": at,
                    "text": "forked: the parent's earlier turns were copied in (not shown)",
                }
            )
        elif kind == "turn/end":
            story.append({"k": "turn", "t": at, "text": f"turn ends: {data.get('reason', '?')}"})
        elif kind not in {"turn/start", "step/start", "step/end", "assistant/message"}:
            story.append({"k": str(kind), "t": at, "text": _short(json.dumps(data))})
    return [call.as_dict() for call in calls], story


def _link(sessions: list[dict[str, Any]]) -> None:
    """Parent indexes, depths and labels: what kind of child each session is."""
    index = {s["id"]: i for i, s in enumerate(sessions)}
    modes: dict[str, str] = {}
    for session in sessions:
        for item in session["story"]:
            if item.get("k") == "subagent" and item.get("child"):
                modes[str(item["child"])] = str(item.get("mode") or "")
    for i, session in enumerate(sessions):
        parent = index.get(session["parent_id"]) if session["parent_id"] else None
        session["parent"] = parent if parent != i else None
        depth, seen, cursor = 0, {i}, session["parent"]
        while cursor is not None and cursor not in seen:
            seen.add(cursor)
            depth += 1
            cursor = sessions[cursor].get("parent")
        session["depth"] = depth
        if session["parent_id"] is None:
            kind = session["origin"]
        elif session["id"] in modes and modes[session["id"]]:
            kind = modes[session["id"]]
        elif session["spawn_index"] is None:
            kind = "lane"  # a side call of its parent (title, classifier): no spawn index
        else:
            kind = session["origin"]
        number = "" if session["spawn_index"] is None else f" #{session['spawn_index']}"
        session["kind"] = kind
        session["label"] = f"{kind}{number}"


@dataclass(slots=True)
class _McpCall:
    """One ``tools/call`` of a recorded MCP connection and its answer."""

    server: str
    session: str | None  # the connection's identity (lineage: main, main/0), if it gave one
    tool: str
    arguments: Any
    answer: str = "(no answer recorded)"

    def item(self, t: float | None) -> dict[str, Any]:
        arguments = json.dumps(self.arguments, ensure_ascii=False)
        text = f"{self.server}: {self.tool}({_short(arguments)}) \u2192 {_short(self.answer)}"
        return {"k": "mcp", "t": t, "text": text}


def _mcp_calls(directory: Path, problems: list[str]) -> list[_McpCall]:
    """The tool calls of every ``mcp/<server>.<n>.jsonl``, in file and call order."""
    calls: list[_McpCall] = []
    folder = directory / MCP_RECORDINGS_DIR
    paths = sorted(folder.iterdir()) if folder.is_dir() else []
    for path in paths:
        if not MCP_RECORDING_PATTERN.fullmatch(path.name):
            continue
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            records = [_mapping(_decode(line)) for line in lines if line.strip()]
        except (OSError, msgspec.DecodeError) as exc:
            problems.append(f"{path}: cannot be read as an MCP recording: {exc}")
            continue
        header = records[0] if records else {}
        server = str(header.get("server", path.name.split(".")[0]))
        session = header.get("session") if isinstance(header.get("session"), str) else None
        pending: dict[Any, _McpCall] = {}
        for record in records[1:]:
            message = _mapping(record.get("message"))
            if record.get("from") == "client" and message.get("method") == "tools/call":
                params = _mapping(message.get("params"))
                call = _McpCall(
                    server, session, str(params.get("name", "?")), params.get("arguments")
                )
                calls.append(call)
                pending[message.get("id")] = call
            elif record.get("from") == "server" and message.get("id") in pending:
                pending.pop(message.get("id")).answer = _mcp_answer(message)
    return calls


def _mcp_answer(message: Mapping[str, Any]) -> str:
    if "error" in message:
        return f"error: {_mapping(message['error']).get('message', '?')}"
    result = _mapping(message.get("result"))
    content = result.get("content")
    texts = [str(_mapping(b).get("text", "")) for b in content] if isinstance(content, list) else []
    return ("error: " if result.get("isError") else "") + "\n".join(texts)


def mcp_timelines(directory: Path) -> list[tuple[str, list[str]]]:
    """Each session's recorded MCP calls in the order of its story, as the report places
    them (``agentreel review`` prints them): ``(label, ["server: tool({...}) → answer"])``
    per session that made any, then ``("not asked for by any session", [...])``."""
    scenario = _scenario(ScenarioResult(directory, "passed", 0.0))
    found: list[tuple[str, list[str]]] = []
    for session in scenario["sessions"]:
        calls = [str(item["text"]) for item in session["story"] if item.get("k") == "mcp"]
        if calls:
            found.append((f"{session['label']} ({session['file']})", calls))
    if scenario["mcp"]:
        found.append(("not asked for by any session", [str(i["text"]) for i in scenario["mcp"]]))
    return found


def _lineage_session(sessions: list[dict[str, Any]], lineage: str) -> int | None:
    """The session a connection's identity names: ``main`` the first main session,
    ``main/0`` its child with spawn index 0, and so on."""
    head, *path = lineage.split("/")
    if head != "main":
        return None
    mains = [i for i, s in enumerate(sessions) if s["parent_id"] is None]
    cursor = mains[0] if mains else None
    for part in path:
        children = [
            i
            for i, s in enumerate(sessions)
            if s.get("parent") == cursor
            and str(s.get("spawn_index")) == part
            and s["kind"] != "lane"
        ]
        cursor = children[0] if children else None
    return cursor


def _place_mcp_calls(sessions: list[dict[str, Any]], calls: list[_McpCall]) -> list[dict[str, Any]]:
    """Each MCP call into its session's story, right after the tool call the agent made for
    it (a ``tool/call`` event, or a model call that asked for it: a tool whose name ends with
    the MCP tool's and whose arguments are the same), at that time on the timeline. A call
    whose connection names its session goes to that session; one without identity to the
    first session with such a tool call. What cannot be placed is returned."""
    used: set[tuple[int, int, int]] = set()  # (session, story position, tool in that call)
    unplaced: list[dict[str, Any]] = []
    after: dict[tuple[int, int], list[dict[str, Any]]] = {}  # (session, story position)
    for call in calls:
        owner = _lineage_session(sessions, call.session) if call.session else None
        candidates = [owner] if owner is not None else range(len(sessions))
        spot = next(
            (
                (i, position, t, tool)
                for i in candidates
                for position, t, tool in _asked_for(sessions[i], call)
                if (i, position, tool) not in used
            ),
            None,
        )
        if spot is not None:
            i, position, t, tool = spot
            used.add((i, position, tool))
            after.setdefault((i, position), []).append(call.item(t))
        elif owner is not None:
            last = len(sessions[owner]["story"]) - 1
            after.setdefault((owner, last), []).append(call.item(sessions[owner]["end"]))
        else:
            unplaced.append(call.item(None))
    for i, session in enumerate(sessions):
        story: list[Any] = list(after.get((i, -1), []))  # a session with an empty story
        for position, item in enumerate(session["story"]):
            story.append(item)
            story += after.get((i, position), [])
        session["story"] = story
        session["mcp"] = [item["t"] for item in story if item.get("k") == "mcp"]
    return unplaced


def _asked_for(session: dict[str, Any], call: _McpCall) -> Iterable[tuple[int, float, int]]:
    """``(story position, time, which tool of a model call)`` of each request in ``session``
    for ``call``'s tool: its ``tool/call`` events first (what the agent ran), then the model
    calls that asked for it (all a proxy-written log holds)."""
    story = session["story"]
    for position, item in enumerate(story):
        if item.get("k") == "tool":
            name, _, rest = str(item["text"]).partition("(")
            if _same_tool(name, rest[:-1], call):
                yield position, item["t"], -1
    for position, item in enumerate(story):
        if item.get("k") == "call":
            model_call = session["calls"][item["i"]]
            for number, tool in enumerate(model_call["tools"]):
                if _same_tool(tool["name"], tool["arguments"], call):
                    yield position, model_call["e"], number


def _same_tool(name: str, arguments: str, call: _McpCall) -> bool:
    if not name.endswith(call.tool):
        return False
    try:
        return bool(json.loads(arguments or "{}") == (call.arguments or {}))
    except ValueError:
        return False


def _transcript(path: Path, problems: list[str]) -> list[dict[str, str]]:
    """The editor's view of the run: agent text merged, tool calls and requests in order."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return []
    except OSError as exc:
        problems.append(f"{path}: cannot be read: {exc}")
        return []
    entries: list[dict[str, str]] = []
    for number, line in enumerate(lines, 1):
        try:
            frame = json.loads(line)
        except ValueError:
            problems.append(f"{path}:{number}: not JSON")
            continue
        if not isinstance(frame, dict):
            continue
        kind, text = _frame(frame)
        if kind == "agent" and entries and entries[-1]["k"] == "agent":
            entries[-1]["text"] = _short(entries[-1]["text"] + text)
        else:
            entries.append({"k": kind, "text": _short(text)})
    return entries


def _frame(frame: Mapping[str, Any]) -> tuple[str, str]:
    method = frame.get("method")
    params = _mapping(frame.get("params"))
    if method == "session/update":
        update = _mapping(params.get("update"))
        kind = update.get("sessionUpdate")
        content = _mapping(update.get("content"))
        if kind == "agent_message_chunk":
            return "agent", str(content.get("text", ""))
        if kind in {"tool_call", "tool_call_update"}:
            title = update.get("title") or update.get("toolCallId", "")
            return "tool", f"{kind}: {title} {update.get('status', '')}".rstrip()
        return str(kind or "update"), json.dumps(update)
    if method is not None:
        return "request", f"{method} {json.dumps(params)}"
    if "error" in frame:
        return "error", f"#{frame.get('id')} {json.dumps(frame['error'])}"
    return "response", f"#{frame.get('id')} {json.dumps(frame.get('result'))}"
