"""The pydantic-ai example tested as a plain pytest function with agentreel's fixture.

The ACP scenario (fixtures/example-pydantic-ai) drives the same agent over ACP; here the test
calls it. Record once through the stub model server (``stub-rules.toml`` beside this file):
``pytest examples/pydantic-ai-agent --agentreel-record=once``.
"""

import asyncio
import importlib.util
import sys
import uuid
from pathlib import Path

import openai
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

# The example is a folder, not a package: load agent.py beside this file by its path.
_spec = importlib.util.spec_from_file_location(
    "pydantic_ai_example", Path(__file__).parent / "agent.py"
)
example = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)


async def summarize(agentreel, cwd):
    async with openai.AsyncOpenAI(base_url=agentreel.base_url, api_key=agentreel.api_key) as client:
        model = OpenAIChatModel("stub-model", provider=OpenAIProvider(openai_client=client))
        session = str(uuid.uuid4())
        result = await example.build_agents(model).run(
            "Summarize both files, alpha.txt and beta.txt, with one helper each.",
            deps=example.Workspace(cwd, session),
            model_settings=example.identity(session),
        )
    return result.output


def test_two_helpers(agentreel, tmp_path):
    (tmp_path / "alpha.txt").write_text("alpha body: the first file.\n")
    (tmp_path / "beta.txt").write_text("beta body: the second file.\n")
    answer = asyncio.run(summarize(agentreel, tmp_path))
    assert answer == "alpha.txt is the first file, beta.txt the second."
