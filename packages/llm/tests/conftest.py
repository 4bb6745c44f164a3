"""Fixtures shared by the SDK adapter tests (openai and anthropic against the stub server).

``adapter_name`` is the registry name of the stub-backed adapter under test. Here it runs
every test over both adapters; a module that tests one wire format overrides it with a
plain fixture returning its own name. Test modules cannot import each other under
``--import-mode=importlib``, so shared setup lives here as fixtures.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from agentreel.llm import load_provider
from agentreel.llm._anthropic import AnthropicProvider
from agentreel.llm._openai import OpenAIProvider
from agentreel.llm.stub import StubServer

AdapterProvider = OpenAIProvider | AnthropicProvider
_ADAPTER_CLASSES: dict[str, type[AdapterProvider]] = {
    "stub": OpenAIProvider,
    "stub-anthropic": AnthropicProvider,
}
_FAST_RETRIES = {"max_retries": 2, "retry_initial_delay": 0.01, "retry_max_delay": 0.02}


@pytest.fixture(params=list(_ADAPTER_CLASSES), ids=["openai", "anthropic"])
def adapter_name(request: pytest.FixtureRequest) -> str:
    """The stub-backed provider name; both adapters unless a module overrides it."""
    name: str = request.param
    return name


@pytest.fixture
def fast_retries() -> dict[str, float]:
    """Retry settings that keep a retrying test well under a second."""
    return dict(_FAST_RETRIES)


@pytest.fixture
def connect(adapter_name: str) -> Callable[..., AdapterProvider]:
    """``connect(server, **settings)``: the adapter under test pointed at ``server``."""

    def connect_to(server: StubServer, **settings: object) -> AdapterProvider:
        provider = load_provider(adapter_name, base_url=server.base_url, **settings)
        assert isinstance(provider, _ADAPTER_CLASSES[adapter_name])
        return provider

    return connect_to


@pytest_asyncio.fixture
async def server_and_provider(
    request: pytest.FixtureRequest,
    connect: Callable[..., AdapterProvider],
) -> AsyncIterator[tuple[StubServer, AdapterProvider]]:
    """A stub server running the rules in ``request.param`` and an open adapter on it."""
    rules: str = request.param
    with StubServer.from_toml(rules) as server:
        async with connect(server, **_FAST_RETRIES) as provider:
            yield server, provider
