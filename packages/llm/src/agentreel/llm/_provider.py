"""The Provider protocol and the entry-point provider registry.

Providers register a *factory* under the entry-point group ``agentreel.llm.providers``::

    [project.entry-points."agentreel.llm.providers"]
    replay = "agentreel.llm_replay._provider:create_provider"

The factory's module is imported only when that provider is asked for, so importing
``agentreel.llm`` never pulls in a provider SDK.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Protocol, runtime_checkable

from agentreel.llm._chunks import Chunk
from agentreel.llm._options import GenerateOptions
from agentreel.llm.exceptions import ProviderNotFoundError

PROVIDER_ENTRY_POINT_GROUP = "agentreel.llm.providers"


@runtime_checkable
class Provider(Protocol):
    """Anything that streams chunks for a model call."""

    def stream(self, options: GenerateOptions) -> AsyncIterator[Chunk]:
        """Stream the response to one call as chunks obeying the stream contract."""
        ...


ProviderFactory = Callable[..., Provider]


def _provider_entry_points() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=PROVIDER_ENTRY_POINT_GROUP)}


def available_providers() -> list[str]:
    """Names of every registered provider, sorted (no provider module is imported)."""
    return sorted(_provider_entry_points())


def load_provider_factory(name: str) -> ProviderFactory:
    """Import and return the factory registered as ``name``."""
    found = _provider_entry_points()
    if name not in found:
        raise ProviderNotFoundError(name, list(found))
    factory: ProviderFactory = found[name].load()
    return factory


def load_provider(name: str, /, **settings: Any) -> Provider:
    """Create the provider registered as ``name`` with keyword ``settings``."""
    return load_provider_factory(name)(**settings)


_TRUE_WORDS = ("1", "true", "yes", "on")
_FALSE_WORDS = ("0", "false", "no", "off")


def setting_flag(setting: str, text: str, *, empty: bool | None = None) -> bool:
    """A boolean provider setting given as text (from the environment): anything but a
    known word (or nothing, when ``empty`` says what nothing means) is a ``ValueError``
    naming ``setting``, so a typo never silently flips it."""
    word = text.strip().lower()
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    if not word and empty is not None:
        return empty
    raise ValueError(
        f"{setting} must be one of {', '.join(_TRUE_WORDS + _FALSE_WORDS)}; got {text!r}. "
        "Fix the provider settings (e.g. AGENTREEL_PROVIDER_SETTINGS)"
    )
