"""Record and replay through ``agentreel-llm-proxy`` installed alone, as a user would.

``nox -s build`` runs this in a fresh venv outside the repository holding only the
``agentreel-llm-proxy`` wheel and what its metadata pulls in, which is no provider SDK
(the proxy speaks HTTP; which SDK major an agent uses is the agent's business): none is
installed there. The stub model server (from ``agentreel-llm``) answers a plain streaming
Chat Completions request through the proxy in record mode; the stub is stopped; the same
request through the proxy in replay mode must get the same text, with a report that every
recorded call was consumed. Usage: ``python llm_proxy_alone.py``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

import aiohttp

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import read_report

RULES = '[[rule]]\nmatch.last_user = "hello"\ntext = "hello from the recording"\n'


SDKS = ("openai", "anthropic", "google.genai")


async def ask(base_url: str) -> str:
    body = {
        "model": "stub-model",
        "messages": [{"role": "user", "content": "hello"}],
        "stream": True,
    }
    text = ""
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{base_url}/chat/completions", json=body) as response,
    ):
        async for line in response.content:
            data = line.decode().strip().removeprefix("data:").strip()
            if not data or data == "[DONE]":
                continue
            for choice in json.loads(data).get("choices") or []:
                text += (choice.get("delta") or {}).get("content") or ""
    return text


def installed_sdks() -> list[str]:
    found = []
    for name in SDKS:
        try:
            if importlib.util.find_spec(name) is not None:
                found.append(name)
        except ModuleNotFoundError:  # google.genai without google
            pass
    return found


async def main() -> int:
    sdks = installed_sdks()
    if sdks:
        print(f"FAIL: agentreel-llm-proxy pulled in provider SDKs {sdks}", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="agentreel-proxy-alone-"))
    fixture, report = work / "fixture", work / "report.json"
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            recorded = await ask(proxy.openai_base_url)
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        replayed = await ask(proxy.openai_base_url)
    scripts = read_report(report).scripts
    if recorded != "hello from the recording" or replayed != recorded:
        print(f"FAIL: recorded {recorded!r}, replayed {replayed!r}", file=sys.stderr)
        return 1
    if [(s.calls, s.consumed) for s in scripts] != [(1, 1)]:
        print(f"FAIL: report {scripts}", file=sys.stderr)
        return 1
    print(f"agentreel-llm-proxy alone, no provider SDK: recorded and replayed {replayed!r}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
