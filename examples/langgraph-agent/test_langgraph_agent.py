"""The LangGraph example tested as a plain pytest function with agentreel's fixture.

Record once through the stub model server (``stub-rules.toml`` beside this file) with
``pytest examples/langgraph-agent --agentreel-record=once``; every later run replays
``recordings/test_langgraph_agent/test_fan_out/`` keylessly.
"""

import asyncio
import importlib.util
import sys
from pathlib import Path

import openai

# The example is a folder, not a package: load graph.py beside this file by its path.
_spec = importlib.util.spec_from_file_location(
    "langgraph_example", Path(__file__).parent / "graph.py"
)
graph = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(graph)


async def compare(agentreel):
    async with openai.AsyncOpenAI(base_url=agentreel.base_url, api_key=agentreel.api_key) as client:
        return await graph.run("Compare Python and Rust.", client, "stub-model", agentreel.headers)


def test_fan_out(agentreel):
    assert asyncio.run(compare(agentreel)) == "Python is quick to write; Rust is quick to run."
