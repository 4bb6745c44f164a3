"""How calls are recorded: ``RecordSettings``, one value, checked here (the record side's
counterpart of ``agentreel.llm_replay.ReplaySettings``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypedDict

from agentreel.session._secret_scan import checked_allowlist
from agentreel.session.exceptions import RecordSettingsError


@dataclass(frozen=True, slots=True)
class RecordSetting:
    """What one record setting is: its flag of ``agentreel proxy record`` (given once per
    item: every record setting is a list), the flag's metavar and help, and its check (the
    value as the field holds it, or ``ValueError`` saying what is wrong)."""

    flag: str
    metavar: str
    help: str
    check: Callable[[object], Any]


def _record_setting(default: Any, **spec: Any) -> Any:
    return field(default=default, metadata={"setting": RecordSetting(**spec)})


@dataclass(frozen=True, slots=True)
class RecordSettings:
    """How calls are recorded, beyond what both modes share (``ReplaySettings``: masks,
    captures): one value, checked when made.

    Every way of recording takes this value and nothing else for these settings: the model
    proxy (``ProxySettings.record``; ``start_proxy``'s and ``start_drifted_proxy``'s
    keywords of the same names; ``agentreel proxy record``'s flags, built from the fields
    below), a scenario's ``[record]`` table (``RecordConfig.settings``) and the pytest
    fixture's ``agentreel_config``. Defined here, below the proxy and MCP record, so every
    recorder can take it. **Adding a record setting** is one field here, ``name: type =
    _record_setting(default, flag=..., metavar=..., help=..., check=...)``, and the same
    name in ``RecordSettingsKeywords``; the code that acts on it reads
    ``settings.record.<name>``. A bad value is a ``RecordSettingsError`` naming it."""

    allow_secrets: tuple[str, ...] = _record_setting(
        (),
        flag="--allow-secret",
        metavar="SHA256",
        help="the sha256 of a value the secret scan lets through (a deliberate fake key of a "
        "test; a refusal prints each value's digest). Repeatable",
        check=checked_allowlist,
    )
    """sha256 digests of values the secret scan lets through (deliberate fake keys)."""

    def __post_init__(self) -> None:
        for name, spec in self.specs().items():
            try:
                object.__setattr__(self, name, spec.check(getattr(self, name)))
            except ValueError as error:
                raise RecordSettingsError(name, str(error)) from None

    @staticmethod
    def specs() -> dict[str, RecordSetting]:
        """Each setting's ``RecordSetting``, by field name."""
        return {f.name: f.metadata["setting"] for f in fields(RecordSettings)}

    @staticmethod
    def names() -> tuple[str, ...]:
        return tuple(RecordSettings.specs())

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> RecordSettings:
        """The settings ``values`` names (a scenario's ``[record]`` keys, the fixture's
        config), the others at their defaults; a name that is no record setting is a
        ``RecordSettingsError``."""
        unknown = sorted(set(values) - set(cls.names()))
        if unknown:
            raise RecordSettingsError(
                unknown[0], f"not a record setting; known: {', '.join(cls.names())}"
            )
        return cls(**values)  # type: ignore[arg-type]

    def keywords(self) -> dict[str, Any]:
        """The settings as keywords of the same names (``start_proxy(**...)``)."""
        return {name: getattr(self, name) for name in self.names()}

    @staticmethod
    def add_flags(parser: argparse.ArgumentParser, *, only: str = "") -> None:
        """A flag for each setting, from its ``RecordSetting`` (the CLI declares none);
        ``only`` starts each help text (when a mode takes them in one case only)."""
        for name, spec in RecordSettings.specs().items():
            parser.add_argument(
                spec.flag,
                dest=name,
                action="append",
                default=argparse.SUPPRESS,
                metavar=spec.metavar,
                help=only + spec.help,
            )

    def flags(self) -> list[str]:
        """The settings as the flags ``add_flags`` reads back (each item its own flag)."""
        return [
            word
            for name, spec in self.specs().items()
            for item in getattr(self, name)
            for word in (spec.flag, str(item))
        ]

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RecordSettings:
        """The flags ``add_flags`` added, as given."""
        return cls.from_mapping({name: getattr(args, name) for name in cls.names() if name in args})


class RecordSettingsKeywords(TypedDict, total=False):
    """``RecordSettings``' fields as keywords (``start_proxy``, ``start_drifted_proxy``)."""

    allow_secrets: tuple[str, ...]
