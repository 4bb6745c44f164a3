"""Machine facts (SPEC 13): what agents write about the machine into their prompts — OS and
kernel version, platform, architecture, shell, hostname, user name, home directory, time
zone, runtime versions, their own install path — is masked, so a recording replays on any
machine.

The committed interop recordings are the evidence of the shapes real agents use: every
one of them (``interop/fixtures/*``, whatever scenarios are added later) has each machine
fact in its request text rewritten to another machine's, and the masked requests must still
compare equal. A Python client through the proxy, recorded with one machine's facts and
replayed with another's, must replay.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import openai
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import Masks, start_proxy
from agentreel.llm_replay import ReplayProvider, read_report
from agentreel.session import RequestHeaderData, diff_request_headers

ROOT = Path(__file__).resolve().parents[3]
INTEROP = sorted(path.parent for path in (ROOT / "interop" / "fixtures").glob("*/scenario.toml"))

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


MASKED_FACT = re.compile(
    r"\{\{(?:os-version|platform|arch|shell|hostname|user|home|timezone|runtime-version"
    r"|node-modules|site-packages)\}\}"
)


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


def _texts(header: RequestHeaderData) -> list[str]:
    return [header.system or "", *(message.preview for message in header.messages)]


def test_the_interop_recordings_exist() -> None:
    # The test below is generic over interop/fixtures/*: it must have something to read.
    assert {path.name for path in INTEROP} >= {"claude-code-read", "codex-read"}


@pytest.mark.parametrize("fixture", INTEROP, ids=lambda p: p.name)
def test_every_machine_fact_of_an_interop_recording_is_masked(fixture: Path) -> None:
    masks = Masks(cwd="/work/somewhere/else")
    rewritten = 0
    for path in sorted(fixture.glob("session*.jsonl")):
        for header in _headers(path):
            for text in _texts(header):
                other, count = _other_machine(text)
                rewritten += count
                # A recording made with the masks holds the fact as its token already.
                rewritten += len(MASKED_FACT.findall(text))
                if count:
                    assert masks.text(other) == masks.text(text), (
                        f"{path}: a machine fact survives the masks"
                    )
                    assert masks.text(other) != other  # the facts are hidden, not just equal
    # The agents recorded first each write facts about their machine (Claude Code its OS
    # Version, Platform and Shell; Codex its <shell>; opencode its Platform; Gemini CLI its
    # operating system): the rewrite must find them. A scenario added later is checked for
    # whatever facts it holds.
    if fixture.name in {"claude-code-read", "codex-read", "opencode-read", "gemini-cli-read"}:
        assert rewritten > 0, f"{fixture}: no machine fact found in a real agent's requests"


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
    "You are a coding agent.\n - Platform: linux\n - Shell: /bin/bash\n"
    " - OS Version: Linux 6.18.44-fc-v1045\n - Home: /home/ada\n"
    "My operating system is: linux\n"
    "Installed at /usr/lib/node_modules/@qwen-code/qwen-code. Node.js v22.3.0, time zone "
    "Europe/Berlin."
)
MACHINE_B = (
    "You are a coding agent.\n - Platform: darwin\n - Shell: /bin/zsh\n"
    " - OS Version: Darwin 24.1.0\n - Home: /Users/grace\n"
    "My operating system is: darwin\n"
    "Installed at /Users/grace/.npm-global/lib/node_modules/@qwen-code/qwen-code. Node.js "
    "v18.19.1, time zone America/New_York."
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
    for fact in ("6.18.44", "/home/ada", "Europe/Berlin", "v22.3.0", "/usr/lib/node_modules"):
        assert fact not in recording, fact
    header = json.loads(next(line for line in recording.splitlines() if "request/header" in line))
    assert "OS Version: {{os-version}}" in header["data"]["system"]
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        assert await _ask(proxy.base_url, MACHINE_B) == "on a machine"
    outcome = read_report(report)
    assert outcome.ok, outcome.errors
