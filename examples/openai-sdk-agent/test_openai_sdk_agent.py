"""The openai-sdk example tested as a plain pytest function with agentreel's fixture.

The ACP scenario (fixtures/example-openai-sdk) drives the agent over ACP; here the test
calls the parent in process, and its two ``delegate`` children are processes that find the
proxy in the environment the test hands them (``agentreel.env``). Record once through the
stub model server (``stub-rules.toml`` beside this file):
``pytest examples/openai-sdk-agent --agentreel-record=once``.
"""

import asyncio
import importlib.util
import sys
from pathlib import Path

from acp import text_block

# The example is a folder, not a package: load agent.py beside this file by its path.
_spec = importlib.util.spec_from_file_location(
    "openai_sdk_example", Path(__file__).parent / "agent.py"
)
example = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)


async def summarize(cwd):
    agent = example.ExampleAgent()
    answer = example._ChildOutput()  # what the editor would show: the streamed text
    agent.on_connect(answer)
    session = await agent.new_session(cwd=str(cwd))
    prompt = "Summarize both files, alpha.txt and beta.txt, with one helper each."
    await agent.prompt([text_block(prompt)], session_id=session.session_id)
    await agent.openai.close()
    return answer.text


def test_two_child_processes(agentreel, monkeypatch, tmp_path):
    for name, value in {**agentreel.env, "EXAMPLE_MODEL": "stub-model"}.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "alpha.txt").write_text("alpha body: the first file.\n")
    (tmp_path / "beta.txt").write_text("beta body: the second file.\n")
    answer = asyncio.run(summarize(tmp_path))
    assert answer == "Asking two helpers.alpha.txt is the first file, beta.txt the second."
