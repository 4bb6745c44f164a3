"""The preload hook a fork server calls: what a replay imports, and nothing it must not."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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


SERVE_AFTER_PRELOAD = """
import json, sys
from agentreel.acp_agent import preload
preload()
before = set(sys.modules)
from agentreel.acp_agent._main import main
code = main([])
with open(sys.argv[1], "w") as out:
    json.dump({"code": code, "imported": sorted(set(sys.modules) - before)}, out)
"""


def test_after_preload_the_agents_start_and_exit_import_nothing(tmp_path: Path) -> None:
    """A forked agent runs ``main`` from the preloaded state: whatever it still imports is
    paid (and, with bytecode not written, compiled from source) in every forked scenario."""
    result = tmp_path / "result.json"
    subprocess.run(
        [sys.executable, "-c", SERVE_AFTER_PRELOAD, str(result)],
        input=b"",  # stdin at end of file: the agent starts, serves nothing and exits
        capture_output=True,
        check=True,
        timeout=120,
    )
    seen = json.loads(result.read_text())
    assert seen == {"code": 0, "imported": []}
