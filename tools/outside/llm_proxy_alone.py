"""Record and replay through ``agentreel-llm-proxy`` installed alone, as a user would.

``nox -s build`` runs this in a fresh venv outside the repository holding only the
``agentreel-llm-proxy`` wheel and what its metadata pulls in: the stub model server (from
``agentreel-llm``) answers a plain ``openai`` SDK program through the proxy in record
mode; the stub is stopped; the same program through the proxy in replay mode must get the
same text, with a report that every recorded call was consumed. Usage:
``python llm_proxy_alone.py``.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

import openai

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import read_report

RULES = '[[rule]]\nmatch.last_user = "hello"\ntext = "hello from the recording"\n'


async def ask(base_url: str) -> str:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-outside-check", max_retries=0)
    stream = await client.chat.completions.create(
        model="stub-model", messages=[{"role": "user", "content": "hello"}], stream=True
    )
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    await client.close()
    return text


async def main() -> int:
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
    print(f"agentreel-llm-proxy alone: recorded and replayed {replayed!r}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
