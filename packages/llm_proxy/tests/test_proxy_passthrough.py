"""Record mode is pass-through from the very first call: the client holds the first chunk
while the upstream is still streaming (SPEC 11: every SSE event forwarded as it arrives);
and it listens without waiting for the provider SDKs its decoders import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SLOW_RULES = """
[[rule]]
name = "slow"
text = "one two three four five six seven eight"
chunk_size = 4
delay_ms = 150
"""


def test_first_recorded_call_streams_while_upstream_is_still_sending(tmp_path: Path) -> None:
    # A fresh interpreter, so the provider SDKs are not already imported by other tests:
    # the first call of a new proxy is the one that used to arrive all at once.
    script = tmp_path / "first_call.py"
    script.write_text(
        f"""
import asyncio, sys
from pathlib import Path
import openai
from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy

async def main() -> None:
    with StubServer.from_toml({SLOW_RULES!r}) as stub:
        async with start_proxy("record", upstream=stub.base_url,
                               sessions_root=Path({str(tmp_path / "logs")!r})) as proxy:
            client = openai.AsyncOpenAI(base_url=proxy.openai_base_url, api_key="sk-x-123456")
            stream = await client.chat.completions.create(
                model="m", messages=[{{"role": "user", "content": "hi"}}], stream=True)
            outcomes = []
            async for _ in stream:
                outcomes.append(stub.requests[0].outcome)
            print(" ".join(outcomes))

asyncio.run(main())
"""
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    outcomes = done.stdout.split()
    assert len(outcomes) > 3
    # While the stub was still streaming ("pending"), the client already had chunks.
    assert outcomes[0] == "pending", (
        f"the first chunk arrived only after the upstream ended: {outcomes}"
    )


def test_record_mode_listens_before_the_provider_sdks_are_imported(tmp_path: Path) -> None:
    # The decoders' import (agentreel.llm.wire.mappers; it was both SDKs') is held until the proxy
    # listens; awaited before listening, as it was, it took most of a start (8-14 s of
    # 12-18 s to listen on the loaded 2-core machine) and here would hold the start for 20 s.
    script = tmp_path / "held_import.py"
    script.write_text(
        f"""
import asyncio, sys, threading
from pathlib import Path
import aiohttp
from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy

listening = threading.Event()

class HoldTheSdkImport:
    def find_spec(self, name, path=None, target=None):
        if name == "agentreel.llm.wire.mappers":
            listening.wait(20)
        return None

sys.meta_path.insert(0, HoldTheSdkImport())

async def main() -> None:
    with StubServer.from_toml('[[rule]]\\ntext = "recorded"\\n') as stub:
        async with start_proxy("record", upstream=stub.base_url,
                               sessions_root=Path({str(tmp_path / "logs")!r})) as proxy:
            print("wire imported when listening:", "agentreel.llm.wire.mappers" in sys.modules)
            listening.set()
            body = {{"model": "m", "messages": [{{"role": "user", "content": "hi"}}]}}
            async with aiohttp.ClientSession() as http:
                async with http.post(proxy.openai_base_url + "/chat/completions",
                                     json=body) as response:
                    reply = await response.json()
            print(reply["choices"][0]["message"]["content"])

asyncio.run(main())
"""
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["wire imported when listening: False", "recorded"]
