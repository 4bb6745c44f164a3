"""The name of where a model call went, for error messages (SDK-free: the adapters and the
wire decoders of ``agentreel.llm.wire`` both use it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ProviderLabel:
    """Names used in error messages: provider, where it points, the key's variable."""

    name: str
    base_url: str
    key_env: str

    def where(self) -> str:
        return f"the {self.name} provider at {self.base_url}"
