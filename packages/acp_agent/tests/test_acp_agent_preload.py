"""The preload hook a fork server calls: what a replay imports, and nothing it must not."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys, threading
from agentreel.acp_agent import preload
preload()
print(json.dumps({
    "modules": sorted(sys.modules),
    "threads": [thread.name for thread in threading.enumerate()],
}))
"""


def test_preload_imports_the_acp_sdk_server_and_replay_provider_but_no_sdk_or_thread() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    seen = json.loads(completed.stdout)
    modules = set(seen["modules"])
    assert {"acp", "agentreel.acp_agent._server", "agentreel.llm_replay._provider"} <= modules
    top_level = {name.split(".")[0] for name in modules}
    assert not top_level & {"openai", "anthropic", "httpx", "httpx2", "httpcore"}
    assert seen["threads"] == ["MainThread"]  # a fork would copy no other thread
