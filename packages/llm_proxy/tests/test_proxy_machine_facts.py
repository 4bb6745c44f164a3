"""Machine facts (SPEC 13): what agents write about the machine into their prompts — OS and
kernel version, platform, architecture, shell, hostname, user name, home directory, time
zone, runtime versions, their own install path — is masked, so a recording replays on any
machine.

The committed interop recordings are the evidence of the shapes real agents use: every
one of them (``interop/fixtures/*``, whatever scenarios are added later) has each machine
fact in the full request text of every call (system prompt and every message whole, not
just the previews: Qwen Code's operating system line lies beyond its message's preview)
rewritten to other machines' — a raw fact the masks missed at record, and each fact the
recording holds as its token — and the masked requests must give the recorded text back.
A Python client through the proxy, recorded with one machine's facts and replayed with
another's, must replay.

Time is a machine fact too (SPEC 13, 15), in every spelling agents and libraries use. Every
committed recording (``fixtures/*`` and ``interop/fixtures/*``: logs and their goldens, the
tools' texts a log keeps included) is travelled in time: each date, time, weekday, month,
year and zone it holds as a token is written as it would have been on each day of a week,
on 29 February, at 23:59:59 on 31 December and just after midnight on 1 January, in UTC,
UTC-12 and UTC+14 — and must mask back to the recorded text.
"""

from __future__ import annotations

import email.utils
import json
import re
import shutil
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import openai
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import Masks, start_proxy
from agentreel.llm_replay import ReplayProvider, read_report
from agentreel.session import RequestHeaderData, diff_request_headers, json_message_text

ROOT = Path(__file__).resolve().parents[3]
INTEROP = sorted(path.parent for path in (ROOT / "interop" / "fixtures").glob("*/scenario.toml"))
COMMITTED = sorted(
    path.parent
    for folder in (ROOT / "fixtures", ROOT / "interop" / "fixtures")
    for path in folder.glob("*/scenario.toml")
)

# Another machine's spelling of each fact, by the shapes found in real agents' prompts.
# Each entry: a pattern finding the fact as this machine wrote it, and what another
# machine writes there. Written apart from the masks, from REAL-AGENTS.md and the recordings.
OTHER_MACHINE: tuple[tuple[str, str | Callable[[re.Match[str]], str]], ...] = (
    (r"(OS Version: )[^\n\"<]*[^\s\"<]", r"\g<1>Darwin 24.1.0"),
    (r"\b(?:Linux|Darwin) \d+\.\d+\.\d+[-\w.]*", "Darwin 23.6.0"),
    (r"(Platform: )(?:linux|darwin|win32)", r"\g<1>darwin"),
    (r"(Shell: )\S+", r"\g<1>/bin/zsh"),
    (r"(My operating system is: )\w+", r"\g<1>darwin"),
    (r"<shell>[^<]*</shell>", "<shell>zsh</shell>"),
    (r"<timezone>[^<]*</timezone>", "<timezone>America/Los_Angeles</timezone>"),
    (r"\b(?:Etc|Europe|America|Asia)/[A-Z][A-Za-z_]+\b", "Asia/Tokyo"),
    (r"(?<![\w.-])/root(?=[/\s\"']|$)", "/Users/grace"),
    (r"(?<![\w.-])/home/[^/\s\"']+", "/Users/grace"),
    (r"(Node\.js |node )v?\d+\.\d+\.\d+", r"\g<1>v18.19.1"),
    (r"(Python )\d+\.\d+\.\d+", r"\g<1>3.13.1"),
)


# Each machine-fact token a recording holds, as other machines write the fact there: a
# recording made with the masks has its facts as tokens, so replaying it on another machine
# means these spellings in the live requests, in every context the real agents put them.
ANOTHER_MACHINES_FACTS: dict[str, dict[str, str]] = {
    "macos": {
        "{{os-version}}": "Darwin 24.1.0",
        "{{platform}}": "darwin",
        "{{arch}}": "arm64",
        "{{shell}}": "zsh",
        "{{hostname}}": "grace-mbp.local",
        "{{user}}": "grace",
        "{{home}}": "/Users/grace",
        "{{timezone}}": "America/Los_Angeles",
        "{{runtime-version}}": "Python 3.13.1",
        "{{node-modules}}": "/opt/homebrew/lib/node_modules",
        "{{site-packages}}": "/Users/grace/.venv/lib/python3.13/site-packages",
        "{{venv}}": "/Users/grace/.local/pipx/venvs/agent",
    },
    "another-linux": {
        "{{os-version}}": "Linux 5.15.0-91-generic",
        "{{platform}}": "linux",
        "{{arch}}": "x86_64",
        "{{shell}}": "/usr/bin/fish",
        "{{hostname}}": "build-07",
        "{{user}}": "ada",
        "{{home}}": "/home/ada",
        "{{timezone}}": "Asia/Tokyo",
        "{{runtime-version}}": "Python 3.11.7",
        "{{node-modules}}": "/home/ada/.nvm/versions/node/v22.3.0/lib/node_modules",
        "{{site-packages}}": "/usr/lib/python3/dist-packages",
        "{{venv}}": "/work/wt-other/.nox/interop-py/agent",
    },
    "windows": {
        "{{os-version}}": "Windows_NT 10.0.22631",
        "{{platform}}": "win32",
        "{{arch}}": "x64",
        "{{shell}}": "powershell",
        "{{hostname}}": "GRACE-PC",
        "{{user}}": "grace",
        "{{home}}": "C:\\Users\\grace",
        "{{timezone}}": "Europe/Berlin",
        "{{runtime-version}}": "Node.js v22.3.0",
        "{{node-modules}}": "C:\\Users\\grace\\AppData\\Roaming\\npm\\node_modules",
        "{{site-packages}}": "C:\\Python313\\Lib\\site-packages",
        "{{venv}}": "C:\\Users\\grace\\agent\\.venv",
    },
}
MASKED_FACT = re.compile("|".join(re.escape(token) for token in ANOTHER_MACHINES_FACTS["macos"]))

# Recorded before the proxy kept whole message texts: these messages exist as their
# 80-character previews only (tool results, a skills reminder, a delegation), so only the
# previews can be checked. A new recording keeps every text whole.
PREVIEW_ONLY = {
    "fast-agent-tools": 1,
    "opencode-read": 1,
    "opencode-run": 1,
    "opencode-subagents": 8,
}


def _other_machine(text: str) -> tuple[str, int]:
    """``text`` as another machine writes it, and how many facts were rewritten."""
    count = 0
    for pattern, replacement in OTHER_MACHINE:
        text, found = re.subn(pattern, replacement, text)
        count += found
    return text, count


def _headers(path: Path) -> list[RequestHeaderData]:
    from agentreel.session import load_session_log

    return [
        event.data
        for event in load_session_log(path).events
        if isinstance(event.data, RequestHeaderData)
    ]


def _calls(path: Path) -> tuple[list[list[str]], int]:
    """Every call's request text — its system prompt and each message whole (a log keeps a
    message's text once, at the first call holding it) — and how many messages had only
    their preview."""
    known: dict[str, str] = {}
    calls: list[list[str]] = []
    preview_only = 0
    for header in _headers(path):
        texts = [header.system or ""]
        for message in header.messages:
            if message.text is not None:
                known.setdefault(message.digest, message.text)
            elif message.json is not None:
                known.setdefault(message.digest, json_message_text(message.json))
            whole = message.text or known.get(message.digest)
            if whole is None and message.preview.endswith("…"):
                preview_only += 1
            texts.append(whole if whole is not None else message.preview)
        calls.append(texts)
    return calls, preview_only


def _written_as(text: str, facts: dict[str, str]) -> str:
    """``text`` with each fact token as ``facts`` spell it."""

    def fact(found: re.Match[str]) -> str:
        return facts[found[0]]

    return MASKED_FACT.sub(fact, text)


def test_the_interop_recordings_exist() -> None:
    # The test below is generic over interop/fixtures/*: it must have something to read.
    assert {path.name for path in INTEROP} >= {"claude-code-read", "codex-read"}


@pytest.mark.parametrize("fixture", INTEROP, ids=lambda p: p.name)
def test_every_machine_fact_of_an_interop_recording_is_masked(fixture: Path) -> None:
    masks = Masks(cwd="/work/somewhere/else")
    rewritten = 0
    preview_only = 0
    for path in sorted(fixture.glob("session*.jsonl")):
        calls, previews = _calls(path)
        preview_only += previews
        for number, texts in enumerate(calls):
            for text in texts:
                where = f"{path}, call {number}"
                # The masks leave a recording made with them as it is.
                assert masks.text(text) == text, f"{where}: the masks change a recorded text"
                # A fact the masks missed at record, as another machine writes it.
                other, count = _other_machine(text)
                rewritten += count
                if count:
                    assert masks.text(other) == masks.text(text), (
                        f"{where}: a machine fact survives the masks"
                    )
                    assert masks.text(other) != other  # the facts are hidden, not just equal
                # Each fact recorded as its token, written back as another machine's.
                tokens = MASKED_FACT.findall(text)
                rewritten += len(tokens)
                for machine, facts in ANOTHER_MACHINES_FACTS.items() if tokens else ():
                    live = _written_as(text, facts)
                    assert masks.text(live) == text, (
                        f"{where}: {machine}'s {sorted(set(tokens))} read differently:\n"
                        + _first_difference(masks.text(live), text)
                    )
    assert preview_only == PREVIEW_ONLY.get(fixture.name, 0), (
        f"{fixture}: {preview_only} messages kept as previews only"
    )
    # The agents write facts about their machine (Claude Code its OS Version, Platform and
    # Shell; Codex its <shell> and <timezone>; opencode its Platform; Gemini CLI and Qwen
    # Code their operating system, Qwen beyond its message's preview; Gemini CLI its
    # skills' npm folder): the rewrite must find them. A scenario added later is checked
    # for whatever facts it holds.
    if fixture.name in {
        "claude-code-read",
        "codex-read",
        "opencode-read",
        "gemini-cli-read",
        "qwen-code-read",
    }:
        assert rewritten > 0, f"{fixture}: no machine fact found in a real agent's requests"


def _first_difference(live: str, recorded: str) -> str:
    at = next(
        (i for i, (a, b) in enumerate(zip(live, recorded, strict=False)) if a != b),
        min(len(live), len(recorded)),
    )
    start = max(0, at - 60)
    return f"live     …{live[start : at + 60]!r}\nrecorded …{recorded[start : at + 60]!r}"


def test_claude_code_read_replays_after_its_os_version_is_rewritten(tmp_path: Path) -> None:
    # A recording predating the machine-fact masks (its system prompt holds the raw
    # 'OS Version: Linux 6.18.44-fc-v1045'): replay masks recorded headers with the same
    # masks, so another machine's request compares equal. claude-code-read as committed
    # was recorded with the masks, so the raw fact is put back into a copy of it.
    fixture = tmp_path / "claude-code-read"
    shutil.copytree(ROOT / "interop" / "fixtures" / "claude-code-read", fixture)
    log = fixture / "session.jsonl"
    log.write_text(
        log.read_text().replace("OS Version: {{os-version}}", "OS Version: Linux 6.18.44-fc-v1045")
    )
    masks = Masks()
    raw = _headers(fixture / "session.jsonl")
    assert any("OS Version: Linux 6.18.44" in (header.system or "") for header in raw)
    provider = ReplayProvider(fixture, content_mask=masks.text, content_binding=True)
    recorded = [call.request for call in provider.recording.scripts[0].calls]
    for before, after in zip(raw, recorded, strict=True):
        assert after is not None
        system = (before.system or "").replace(
            "OS Version: Linux 6.18.44-fc-v1045", "OS Version: Darwin 24.1.0"
        )
        assert system != before.system
        import msgspec

        live = msgspec.structs.replace(before, system=masks.text(system))
        assert diff_request_headers(after, live) == []
        # Without the masks on the recorded side, the same request is drift.
        assert diff_request_headers(before, live) != []


MACHINE_A = (
    "You are a coding agent.\n - Platform: linux\n - Arch: x64\n - Shell: /bin/bash\n"
    " - OS Version: Linux 6.18.44-fc-v1045\n - Home: /home/ada\n - Hostname: ada-laptop-01\n"
    " - Username: ada\nMy operating system is: linux\n"
    "Installed at /usr/lib/node_modules/@qwen-code/qwen-code. Node.js v22.3.0, Python "
    "3.12.1, time zone Europe/Berlin.\nToday's date is 2026-12-31 (Thursday); it is "
    "Thu, 31 Dec 2026 23:59:59 -1200.\n"
    "<location>/home/ada/.nvm/versions/node/v22.3.0/lib/node_modules/@google/gemini-cli/"
    "SKILL.md</location>\nScripts in /home/ada/.local/share/uv/tools/agent/bin/agent"
)
MACHINE_B = (
    "You are a coding agent.\n - Platform: darwin\n - Arch: arm64\n - Shell: /bin/zsh\n"
    " - OS Version: Darwin 24.1.0\n - Home: /Users/grace\n - Hostname: grace-mbp.local\n"
    " - Username: grace\nMy operating system is: darwin\n"
    "Installed at /Users/grace/.npm-global/lib/node_modules/@qwen-code/qwen-code. Node.js "
    "v18.19.1, Python 3.13.1, time zone America/New_York.\nToday's date is 2027-01-01 "
    "(Friday); it is Fri, 01 Jan 2027 00:00:01 +1400.\n"
    "<location>/opt/homebrew/lib/node_modules/.pnpm/@google+gemini-cli@0.61.0/node_modules/"
    "@google/gemini-cli/SKILL.md</location>\nScripts in /Users/grace/.local/pipx/venvs/agent/"
    "bin/agent"
)


async def _ask(base_url: str, system: str) -> str:
    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="sk-machine-0123456789")
    try:
        reply = await client.chat.completions.create(
            model="tiny-model",
            messages=[
                {"role": "system", "content": system},
                {"role": "user", "content": f"Where am I? <env>{system}</env>"},
            ],
        )
        return reply.choices[0].message.content or ""
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_a_recording_replays_on_another_machine(fixture_dir: Path, tmp_path: Path) -> None:
    with StubServer.from_toml('[[rule]]\ntext = "on a machine"\n') as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            assert await _ask(proxy.base_url, MACHINE_A) == "on a machine"
    recording = (fixture_dir / "session.jsonl").read_text()
    for fact in (
        "6.18.44",
        "/home/ada",
        "ada-laptop-01",
        "Username: ada",
        "x64",
        "Europe/Berlin",
        "v22.3.0",
        "3.12.1",
        "/usr/lib/node_modules",
        "uv/tools",
        "Thursday",
        "23:59:59",
    ):
        assert fact not in recording, fact
    header = json.loads(next(line for line in recording.splitlines() if "request/header" in line))
    assert "OS Version: {{os-version}}" in header["data"]["system"]
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        assert await _ask(proxy.base_url, MACHINE_B) == "on a machine"
    outcome = read_report(report)
    assert outcome.ok, outcome.errors


# -- time travel -----------------------------------------------------------------------

MINUS_12 = timezone(timedelta(hours=-12))
PLUS_14 = timezone(timedelta(hours=14))
# Each day of a week (Monday 7 to Sunday 13 December 2026), 29 February, and the turn of a
# year in the zones furthest apart: recorded at 23:59:59 on 31 December, replayed just
# after midnight on 1 January.
MOMENTS = (
    *(datetime(2026, 12, day, 9, 5, 7, tzinfo=UTC) for day in range(7, 14)),
    datetime(2028, 2, 29, 12, 0, 0, tzinfo=UTC),
    *(datetime(2026, 12, 31, 23, 59, 59, tzinfo=zone) for zone in (UTC, MINUS_12, PLUS_14)),
    *(datetime(2027, 1, 1, 0, 0, 1, tzinfo=zone) for zone in (UTC, MINUS_12, PLUS_14)),
)


def _zone_name(moment: datetime) -> str:
    """The zone as date(1) writes it: ``UTC``, ``-12``, ``+14``."""
    offset = moment.utcoffset() or timedelta()
    hours = int(offset.total_seconds() // 3600)
    return "UTC" if hours == 0 else f"{hours:+03d}"


def _js_string(moment: datetime) -> str:
    """JavaScript's Date.toString()."""
    zone = moment.strftime("%z")
    name = "Coordinated Universal Time" if zone == "+0000" else f"GMT{zone[:3]}:{zone[3:]}"
    return moment.strftime("%a %b %d %Y %H:%M:%S GMT") + f"{zone} ({name})"


def _day(moment: datetime) -> str:
    return str(moment.day)


# How a date is written, by agents (Codex, Mistral Vibe, Gemini CLI and Qwen Code, opencode,
# fast-agent) and by the usual libraries; written apart from the masks.
DATE_SPELLINGS: tuple[Callable[[datetime], str], ...] = (
    lambda m: m.strftime("%Y-%m-%d"),
    lambda m: m.strftime("%Y-%m-%d (%A)"),
    lambda m: m.strftime("%A, %B ") + _day(m) + m.strftime(", %Y"),
    lambda m: m.strftime("%a %b %d %Y"),
    lambda m: m.strftime("%d %B %Y"),
    lambda m: email.utils.format_datetime(m),
    lambda m: m.strftime("%a %b ") + f"{m.day:>2}" + m.strftime(" %H:%M:%S %Y"),
    lambda m: m.strftime("%a %b ") + _day(m) + m.strftime(" %H:%M:%S %Y"),
    lambda m: (
        m.strftime("%a %b ")
        + f"{m.day:>2}"
        + m.strftime(" %H:%M:%S ")
        + _zone_name(m)
        + m.strftime(" %Y")
    ),
    lambda m: m.strftime("%m/%d/%Y"),
    lambda m: m.strftime("%d.%m.%Y"),
    lambda m: m.isoformat(),
    lambda m: m.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
    _js_string,
    lambda m: m.strftime("%A, %B ") + _day(m) + m.strftime(", %Y at %I:%M:%S %p"),
)
TIME_SPELLINGS: dict[str, tuple[Callable[[datetime], str], ...]] = {
    "{{date}}": DATE_SPELLINGS,
    "{{time}}": (
        lambda m: m.strftime("%H:%M:%S"),
        lambda m: m.strftime("%I:%M %p"),
        lambda m: m.strftime("%H:%M:%S ") + _zone_name(m),
    ),
    "{{weekday}}": (lambda m: m.strftime("%A"),),
    # JavaScript's toLocaleString("en-US", {month: "long", year: "numeric"}): Claude Code's
    # WebSearch description, "The current month is December 2026".
    "{{month}}": (lambda m: m.strftime("%B %Y"),),
    "{{year}}": (lambda m: m.strftime("%Y"),),
    "{{timezone}}": (
        lambda m: "UTC" + _zone_name(m).replace("UTC", "+0"),
        lambda m: {"UTC": "Etc/UTC", "-12": "Etc/GMT+12", "+14": "Pacific/Kiritimati"}[
            _zone_name(m)
        ],
    ),
}
TIME_TOKEN = re.compile("|".join(re.escape(token) for token in TIME_SPELLINGS))


def _recorded_texts(fixture: Path) -> set[str]:
    """Every request text of a fixture's logs and goldens (system prompts, whole message
    texts — read from a message's JSON where a log keeps that — and previews, each tool's
    JSON where a log keeps it)."""
    texts: set[str] = set()
    for path in (*fixture.glob("session*.jsonl"), *fixture.glob("golden/session*.jsonl")):
        for header in _headers(path):
            texts.add(header.system or "")
            texts.update(tool.text for tool in header.tools if tool.text is not None)
            for message in header.messages:
                texts.add(message.preview)
                if message.text is not None:
                    texts.add(message.text)
                elif message.json is not None:
                    texts.add(json_message_text(message.json))
    return texts


def test_the_time_spellings_are_written_apart_from_the_masks() -> None:
    # The spellings the travel below writes are the real ones, read back by the standard
    # library where it reads them: the test cannot pass on spellings nobody writes.
    moment = datetime(2026, 12, 31, 23, 59, 59, tzinfo=MINUS_12)
    assert email.utils.parsedate_to_datetime(DATE_SPELLINGS[5](moment)) == moment
    assert datetime.fromisoformat(DATE_SPELLINGS[11](moment)) == moment
    assert DATE_SPELLINGS[1](moment) == "2026-12-31 (Thursday)"
    assert DATE_SPELLINGS[2](moment) == "Thursday, December 31, 2026"
    assert DATE_SPELLINGS[8](moment) == "Thu Dec 31 23:59:59 -12 2026"
    assert _js_string(moment) == "Thu Dec 31 2026 23:59:59 GMT-1200 (GMT-12:00)"


def test_the_masks_leave_prose_about_time_alone() -> None:
    # Only a date expression is masked: a bare year, month or weekday, a file:line:col, a
    # version number stay what they are.
    masks = Masks()
    for prose in (
        "Assistant knowledge cutoff is August 2025.",
        "May I help? In May we ship the 2026 roadmap.",
        'convert relative dates (e.g., "Thursday" to a date); freeze after Thursday',
        "src/app.py:12:30: E501 line too long; retry at 12:30",
        "build 10.0.22631, release 1.2.3",
    ):
        assert masks.text(prose) == prose
    # A date takes no word after it that is no part of it (GET ends in T like PST).
    assert masks.text("2026-12-02 GET /api") == "{{date}} GET /api"
    assert masks.text("Today is Friday, the 4th of December, 2026.") == "Today is {{date}}."
    assert masks.text("Today is Friday.") == "Today is {{weekday}}."


@pytest.mark.parametrize("fixture", COMMITTED, ids=lambda p: p.name)
def test_every_committed_recording_replays_on_any_day_in_any_zone(fixture: Path) -> None:
    masks = Masks(cwd="/work/somewhere/else")
    travelled = 0
    months = weekdays = 0
    for text in sorted(_recorded_texts(fixture)):
        assert masks.text(text) == text, f"{fixture.name}: the masks change a recorded text"
        if not TIME_TOKEN.search(text):
            continue
        # Every moment and every spelling at least once (the moments in turn, each token
        # in its spellings in turn): not every pair, which would take 15 times as long.
        for number in range(max(len(MOMENTS), *map(len, TIME_SPELLINGS.values()))):
            moment = MOMENTS[number % len(MOMENTS)]

            def spelled(found: re.Match[str], moment: datetime = moment, k: int = number) -> str:
                spellings = TIME_SPELLINGS[found[0]]
                return spellings[k % len(spellings)](moment)

            live = TIME_TOKEN.sub(spelled, text)
            months += "{{month}}" in text
            weekdays += "day_of_week" in text and "{{weekday}}" in text
            assert masks.text(live) == text, (
                f"{fixture.name} as written at {moment.isoformat()} reads differently:\n"
                + _first_difference(masks.text(live), text)
            )
            travelled += 1
    if fixture.name in {"mistral-vibe-subagent", "codex-read", "gemini-cli-read"}:
        assert travelled > 0, f"{fixture}: no date found in a real agent's requests"
    # Claude Code 0.23.1 says the current month in its WebSearch tool's description.
    if fixture.name in {"claude-code-read", "claude-code-task", "claude-code-mcp-task"}:
        assert months > 0, f"{fixture}: no month found in Claude Code's WebSearch tool"
    # mcp-server-time's convert_time answers with the weekday of the day it was called.
    if fixture.name in {"claude-code-mcp-task", "gemini-cli-mcp-subagent"}:
        assert weekdays > 0, f"{fixture}: no day_of_week found in the MCP time tool's result"


def test_a_labelled_fact_in_a_decoded_body_is_masked_as_its_text_is() -> None:
    """An agent's tool input holds ``{"timezone": "UTC"}`` (an MCP time server's argument, as
    Claude Code and Gemini CLI send it: a JSON object). Masked value by value, the label was
    out of sight, so the recorded text kept "UTC" where the text masks hide it."""
    masks = Masks(cwd="/work/somewhere/else")
    body = {"input": {"timezone": "UTC", "path": "notes.txt"}}
    masked = masks.value(body)
    assert masked == {"input": {"timezone": "{{timezone}}", "path": "notes.txt"}}
    text = json.dumps(masked["input"], separators=(",", ":"))
    assert masks.text(text) == text
    # A multi-line text keeps its lines: only a plain value is read as written out.
    prompt = {"text": "Platform: linux\n - Shell: bash\n - OS Version: Linux 6.1.0\n - next"}
    assert masks.value(prompt) == {"text": masks.text(prompt["text"])}
    assert masks.value(prompt)["text"].count("\n") == 3
