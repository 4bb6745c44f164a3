"""Shared setup of the proxy tests: stub rules, SDK clients, what an SDK parsed.

Every test starts the stub server and the proxy on 127.0.0.1 itself and stops them;
replay runs with the stub stopped (nothing listens upstream), keyless.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentreel.llm.stub import StubServer

WEATHER_RULES = """
[[rule]]
name = "ask"
match.last_user = "weather"
text = "Let me check the weather."
tool_calls = [{ name = "get_weather", arguments = { city = "Paris" } }]
chunk_size = 5
usage = { input_tokens = 31, output_tokens = 12 }

[[rule]]
name = "answer"
match.last_tool_result_regex = "sunny"
text = "It is sunny in Paris today."
chunk_size = 4
usage = { input_tokens = 55, output_tokens = 7 }

[[rule]]
name = "hello"
match.last_user = "hello"
text = "Hello! How can I help?"
"""


@pytest.fixture
def weather_stub() -> Iterator[StubServer]:
    with StubServer.from_toml(WEATHER_RULES) as server:
        yield server


@pytest.fixture
def fixture_dir(tmp_path: Path) -> Path:
    return tmp_path / "fixture"
