"""The ``AGENTREEL_*`` environment contract between a harness and the agent it runs.

A harness (``agentreel.snapshot_harness``, or anything else) starts an agent with an
explicit environment; the agent reads from it which provider to load, with which model
and settings, and where to write its session logs. The names are defined once, here
(``AgentEnv``), and so is the mapping both ways (``AgentEnvironment.from_environ`` /
``to_environ``), so the writer and every reader agree by construction:

======================================  =====================================================
variable                                meaning
======================================  =====================================================
``AGENTREEL_PROVIDER``                  registered provider name (``openai``, ``stub``, ``replay``)
``AGENTREEL_MODEL``                     model name of every request
``AGENTREEL_PROVIDER_SETTINGS``         JSON object of keyword settings for the factory
``AGENTREEL_REPLAY_DIR``                the setting ``fixture_dir``
``AGENTREEL_REPLAY_REPORT``             the setting ``report_path``
``AGENTREEL_REPLAY_LIVE_CWD``           the live cwd (``live_cwd``, for providers that take it)
``AGENTREEL_SESSIONS_ROOT``             where the agent's ``SessionStore`` writes
``AGENTREEL_STUB_URL``                  the stub model server (read by ``stub`` providers)
======================================  =====================================================

Nothing here names a particular provider: the variables that carry one setting each are a
table (``SETTING_VARIABLES``), and the live cwd goes to any factory that declares a
``live_cwd`` keyword parameter. An agent that also has flags overlays them with
``AgentEnvironment.overlay``.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from agentreel.llm._provider import Provider, load_provider_factory
from agentreel.llm.exceptions import AgentEnvironmentError

LIVE_CWD_SETTING = "live_cwd"


class AgentEnv(StrEnum):
    """The contract's variable names (each member *is* its name: ``str`` subclass)."""

    PROVIDER = "AGENTREEL_PROVIDER"
    MODEL = "AGENTREEL_MODEL"
    PROVIDER_SETTINGS = "AGENTREEL_PROVIDER_SETTINGS"
    REPLAY_DIR = "AGENTREEL_REPLAY_DIR"
    REPLAY_REPORT = "AGENTREEL_REPLAY_REPORT"
    REPLAY_LIVE_CWD = "AGENTREEL_REPLAY_LIVE_CWD"
    SESSIONS_ROOT = "AGENTREEL_SESSIONS_ROOT"
    STUB_URL = "AGENTREEL_STUB_URL"


# Variables that carry exactly one provider setting (they win over the JSON's keys).
SETTING_VARIABLES: Mapping[AgentEnv, str] = {
    AgentEnv.REPLAY_DIR: "fixture_dir",
    AgentEnv.REPLAY_REPORT: "report_path",
}


@dataclass(frozen=True, slots=True)
class AgentEnvironment:
    """The contract's values. Empty variables count as unset (``None`` / no setting).

    ``settings`` holds ``AGENTREEL_PROVIDER_SETTINGS`` with the one-setting variables
    applied; ``live_cwd`` is kept apart because the agent may supply it late (the cwd of
    its first session) and only factories that take ``live_cwd`` get it.
    """

    provider: str | None = None
    model: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    live_cwd: str | None = None
    sessions_root: str | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> AgentEnvironment:
        """Read the contract from ``environ`` (default ``os.environ``)."""
        env = os.environ if environ is None else environ
        settings: dict[str, Any] = {}
        raw = env.get(AgentEnv.PROVIDER_SETTINGS)
        if raw:
            try:
                loaded = json.loads(raw)
            except ValueError as exc:
                raise AgentEnvironmentError(
                    f"{AgentEnv.PROVIDER_SETTINGS} is not valid JSON ({exc}); set it to a JSON "
                    'object such as {"base_url": "http://127.0.0.1:8000/v1"}'
                ) from None
            if not isinstance(loaded, dict):
                raise AgentEnvironmentError(
                    f"{AgentEnv.PROVIDER_SETTINGS} must be a JSON object, got "
                    f"{type(loaded).__name__}"
                )
            settings.update(loaded)
        for variable, setting in SETTING_VARIABLES.items():
            value = env.get(variable)
            if value:
                settings[setting] = value
        return cls(
            provider=env.get(AgentEnv.PROVIDER) or None,
            model=env.get(AgentEnv.MODEL) or None,
            settings=settings,
            live_cwd=env.get(AgentEnv.REPLAY_LIVE_CWD) or None,
            sessions_root=env.get(AgentEnv.SESSIONS_ROOT) or None,
        )

    def to_environ(self) -> dict[str, str]:
        """The variables that make ``from_environ`` read back exactly these values."""
        env: dict[str, str] = {}
        if self.provider is not None:
            env[AgentEnv.PROVIDER] = self.provider
        if self.model is not None:
            env[AgentEnv.MODEL] = self.model
        settings = dict(self.settings)
        for variable, setting in SETTING_VARIABLES.items():
            value = settings.get(setting)
            if isinstance(value, str) and value:
                env[variable] = settings.pop(setting)
        if settings:
            env[AgentEnv.PROVIDER_SETTINGS] = json.dumps(settings)
        if self.live_cwd is not None:
            env[AgentEnv.REPLAY_LIVE_CWD] = self.live_cwd
        if self.sessions_root is not None:
            env[AgentEnv.SESSIONS_ROOT] = self.sessions_root
        return {str(name): value for name, value in env.items()}  # plain str keys

    def overlay(
        self,
        *,
        provider: str | None = None,
        model: str | None = None,
        settings: Mapping[str, Any] | None = None,
        live_cwd: str | None = None,
        sessions_root: str | None = None,
    ) -> AgentEnvironment:
        """These values with every given (non-``None``) one winning: how flags override
        the environment. ``settings`` keys override keys of the environment's settings."""
        return replace(
            self,
            provider=provider if provider is not None else self.provider,
            model=model if model is not None else self.model,
            settings={**self.settings, **(settings or {})},
            live_cwd=live_cwd if live_cwd is not None else self.live_cwd,
            sessions_root=sessions_root if sessions_root is not None else self.sessions_root,
        )

    def provider_settings(self, name: str, *, cwd: str | None = None) -> dict[str, Any]:
        """The keyword settings the factory of provider ``name`` is called with.

        ``live_cwd`` (the environment's, else ``cwd``: the directory the agent works in)
        is added for a factory that declares a ``live_cwd`` keyword, unless the settings
        already hold one.
        """
        settings = dict(self.settings)
        live = self.live_cwd if self.live_cwd is not None else cwd
        wanted = live is not None and LIVE_CWD_SETTING not in settings
        if wanted and LIVE_CWD_SETTING in _keyword_parameters(name):
            settings[LIVE_CWD_SETTING] = live
        return settings

    def load_provider(self, *, cwd: str | None = None, default: str | None = None) -> Provider:
        """Create the configured provider (``default`` when none is configured)."""
        name = self.provider or default
        if name is None:
            raise AgentEnvironmentError(
                f"no provider configured: set {AgentEnv.PROVIDER} (e.g. replay, openai, stub) "
                "or pass a default"
            )
        factory = load_provider_factory(name)
        return factory(**self.provider_settings(name, cwd=cwd))


def _keyword_parameters(name: str) -> set[str]:
    factory = load_provider_factory(name)
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: nothing to learn
        return set()
    return {p.name for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}


def provider_from_env(
    environ: Mapping[str, str] | None = None,
    *,
    cwd: str | None = None,
    default: str | None = None,
) -> Provider:
    """The provider the ``AGENTREEL_*`` environment asks for, created through the registry.

    ``cwd`` is the directory the agent works in (an ACP session's cwd): a replaying
    provider turns ``{{cwd}}`` in its recording into it, unless
    ``AGENTREEL_REPLAY_LIVE_CWD`` says otherwise. ``default`` is the provider to use when
    ``AGENTREEL_PROVIDER`` is unset. Replay mode needs no key and imports no provider SDK:
    only the named provider's module is imported.
    """
    return AgentEnvironment.from_environ(environ).load_provider(cwd=cwd, default=default)
