"""How model calls are recorded and replayed: ``ReplaySettings``, one value, checked here.

Every way of running a replay takes this value and nothing else for these settings:
``ReplayProvider`` (``settings=`` or its keywords of the same names), the proxy
(``ProxySettings.replay``, ``start_proxy``'s keywords, ``agentreel proxy``'s flags, built
from the fields below), a scenario (``[replay]``, and ``[model]`` for the three it always
had there) and the pytest fixture's ``agentreel_config``. Each field carries its own
``Setting``: what it means (the CLI's help), the scenario table a user types it in, the
proxy modes it applies to, its flag, and its kind — how a value is checked, read from text
(an ``AGENTREEL_*`` variable, a flag) and written back as text.

**Adding a setting** is one field here: ``name: type = setting(default, kind=..., help=...)``
(choose ``table``, ``modes`` and ``only_with`` if the defaults do not fit) and the same name
in ``ReplaySettingsKeywords``. The scenario reader, ``agentreel_config``, the proxy's flags
and ``start_proxy`` take it from the field; the code that acts on it reads
``settings.<name>`` (the provider, or the proxy's run).

A bad value is a ``ReplaySettingsError`` (a ``ValueError``): ``setting`` the field,
``key`` where inside it (``partial_lanes[1]``, ``captures[0].token``), ``problem`` the
words a located message uses (``scenario.toml: key 'replay.schedule': <problem>``); its
own text names the setting for a caller in code.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, TypedDict, TypeVar, cast

from agentreel.llm_replay._captures import Capture
from agentreel.llm_replay.exceptions import ReplaySettingsError

DriftMode = Literal["error", "warn", "off"]
DRIFT_MODES: tuple[DriftMode, ...] = ("error", "warn", "off")
ScheduleMode = Literal["free", "recorded"]
SCHEDULE_MODES: tuple[ScheduleMode, ...] = ("free", "recorded")
DivergenceMode = Literal["error", "allow"]
DIVERGENCE_MODES: tuple[DivergenceMode, ...] = ("error", "allow")
PaceMode = Literal["instant", "recorded"]
PACE_MODES: tuple[PaceMode, ...] = ("instant", "recorded")
DEFAULT_SCHEDULE_TIMEOUT = 10.0
"""Seconds a call waits for the calls the recording put before it (``schedule_timeout``)."""
MAX_SCHEDULE_TIMEOUT = 3600.0
"""The longest ``schedule_timeout``: a scenario's own timeout at most."""

ProxyMode = Literal["record", "replay"]
Table = Literal["replay", "model"]

_T = TypeVar("_T")


def value_kind(value: object) -> str:
    """A value's type in the words of a TOML file (``a string``, ``an array``)."""
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a float",
        str: "a string",
        list: "an array",
        tuple: "an array",
        dict: "a table",
    }.get(type(value), type(value).__name__)


class _Kind:
    """How values of one kind of setting are checked, read from text and written as text."""

    def check(self, name: str, value: object) -> object:
        """``value`` as the field holds it, or ``ReplaySettingsError``."""
        raise NotImplementedError

    def parse(self, name: str, text: str) -> object:
        """A value from text (an environment variable, a flag), before ``check``."""
        return text

    def text(self, value: Any) -> str:
        return str(value)

    def repeated(self) -> bool:
        """A list: the CLI flag is given once per item."""
        return False

    def choices(self) -> tuple[str, ...]:
        """The values it may take, when they are a few words (a flag's metavar)."""
        return ()


@dataclass(frozen=True, slots=True)
class _Choice(_Kind):
    words: tuple[str, ...]
    meaning: str
    """Each choice explained, for the message (``free: ...; recorded: ...``)."""

    def choices(self) -> tuple[str, ...]:
        return self.words

    def check(self, name: str, value: object) -> object:
        if isinstance(value, str) and value in self.words:
            return value
        quoted = ", ".join(repr(choice) for choice in self.words)
        raise ReplaySettingsError(
            name,
            name,
            f"{value!r} is not one of {quoted} ({self.meaning})",
            f"replay setting {name} must be one of {', '.join(self.words)}; got {value!r} "
            f"({self.meaning})",
        )


@dataclass(frozen=True, slots=True)
class _Seconds(_Kind):
    maximum: float

    def check(self, name: str, value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ReplaySettingsError(
                name, name, f"expected seconds as a number, got {value_kind(value)}"
            )
        if not 0 < value <= self.maximum:
            raise ReplaySettingsError(
                name,
                name,
                f"{value!r} is out of range: {name} must be a positive number of seconds, at "
                f"most {self.maximum:g}",
            )
        return float(value)

    def parse(self, name: str, text: str) -> object:
        try:
            return float(text)
        except ValueError:
            raise ReplaySettingsError(
                name, name, f"expected seconds as a number, got {text!r}"
            ) from None

    def text(self, value: Any) -> str:
        return repr(value)


@dataclass(frozen=True, slots=True)
class _Directory(_Kind):
    def check(self, name: str, value: object) -> object:
        if value is None or value == "":
            return None
        if not isinstance(value, str | os.PathLike):
            raise ReplaySettingsError(name, name, f"expected a path, got {value_kind(value)}")
        return Path(value)

    def text(self, value: Any) -> str:
        return "" if value is None else os.fspath(value)


def _items(name: str, value: object, what: str) -> list[object]:
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
        raise ReplaySettingsError(name, name, f"expected {what}, got {value_kind(value)}")
    return list(value)


@dataclass(frozen=True, slots=True)
class _Regexes(_Kind):
    label: str
    """What one item is called in messages: ``mask 1``, ``partial lane 2``."""

    def check(self, name: str, value: object) -> object:
        items = _items(name, value, "an array of non-empty strings (regexes)")
        if not all(isinstance(item, str) and item for item in items):
            raise ReplaySettingsError(
                name, name, "expected an array of non-empty strings (regexes)"
            )
        for index, pattern in enumerate(cast(list[str], items)):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ReplaySettingsError(
                    name,
                    f"{name}[{index}]",
                    f"{self.label} {index + 1} {pattern!r} is not a valid regex: {exc} "
                    "(Python re syntax)",
                ) from None
        return tuple(cast(list[str], items))

    def parse(self, name: str, text: str) -> object:
        return [line for line in text.splitlines() if line.strip()]  # one pattern a line

    def text(self, value: Any) -> str:
        return "\n".join(value)

    def repeated(self) -> bool:
        return True


_CAPTURE_KEYS = ("regex", "token")
CAPTURE_EXAMPLE = 'regex = \'"agent_id":"([0-9a-f-]{36})"\', token = "agent-id"'


@dataclass(frozen=True, slots=True)
class _Captures(_Kind):
    def check(self, name: str, value: object) -> object:
        what = f"an array of tables ({', '.join(_CAPTURE_KEYS)}), e.g. {CAPTURE_EXAMPLE}"
        captures: list[Capture] = []
        for index, item in enumerate(_items(name, value, what)):
            key = f"{name}[{index}]"
            if isinstance(item, Capture):
                captures.append(item)
                continue
            if isinstance(item, str):
                item = self._table(key, item)
            if not isinstance(item, Mapping):
                raise ReplaySettingsError(name, key, f"expected a table, got {value_kind(item)}")
            unknown = sorted(set(item) - set(_CAPTURE_KEYS))
            if unknown:
                raise ReplaySettingsError(
                    name,
                    f"{key}.{unknown[0]}",
                    f"unknown key; allowed here: {', '.join(_CAPTURE_KEYS)}",
                )
            for part in _CAPTURE_KEYS:
                if not isinstance(item.get(part), str) or not item[part]:
                    raise ReplaySettingsError(name, f"{key}.{part}", "required: a non-empty string")
            try:
                captures.append(Capture.checked(item["regex"], item["token"]))
            except ValueError as exc:
                raise ReplaySettingsError(name, key, str(exc)) from None
        return tuple(captures)

    @staticmethod
    def _table(key: str, text: str) -> dict[str, str]:
        """``TOKEN=REGEX`` (a flag, an environment line) as a capture's table."""
        token, equals, regex = text.partition("=")
        if not equals:
            raise ReplaySettingsError(
                "captures",
                key,
                f'{text!r} is not TOKEN=REGEX, e.g. agent-id=\'"agent_id":"([0-9a-f-]{{36}})"\'',
            )
        return {"regex": regex, "token": token}

    def parse(self, name: str, text: str) -> object:
        return [line for line in text.splitlines() if line.strip()]  # TOKEN=REGEX a line

    def text(self, value: Any) -> str:
        return "\n".join(f"{capture.token}={capture.regex}" for capture in value)

    def repeated(self) -> bool:
        return True


PACE_NEEDS_PROXY = (
    "the recorded pace is served by the proxy only (a call's frame times are kept with its "
    "answer as sent, in wire.ndjson); replay this agent through the proxy ([model] via = "
    '"proxy", the agentreel fixture, agentreel proxy replay --pace recorded) or leave pace out'
)
"""Why ``pace = "recorded"`` is refused where a replay runs in process (SPEC 18)."""


@dataclass(frozen=True, slots=True)
class Setting:
    """How one ``ReplaySettings`` field is typed by its users (see the module doc).

    ``table``: the scenario table that holds it (``None``: no scenario key — the harness
    sets it for each run). ``modes``: the proxy modes it applies to (its flag is on those
    subcommands). ``flag``: the proxy CLI's (default ``--<name>``, ``_`` as ``-``).
    ``only_with``: ``(other setting, value)`` without which giving it by name is an error.
    """

    kind: _Kind
    help: str
    table: Table | None = "replay"
    modes: tuple[ProxyMode, ...] = ("replay",)
    flag: str | None = None
    metavar: str | None = None
    only_with: tuple[str, str] | None = None


def setting(
    default: _T,
    *,
    kind: _Kind,
    help: str,
    table: Table | None = "replay",
    modes: tuple[ProxyMode, ...] = ("replay",),
    flag: str | None = None,
    metavar: str | None = None,
    only_with: tuple[str, str] | None = None,
) -> _T:
    """A ``ReplaySettings`` field with its ``Setting`` (the module doc)."""
    spec = Setting(kind, help, table, modes, flag, metavar, only_with)
    # The dataclass sees the Field; a type checker, the default's type.
    made: _T = field(default=default, metadata={"setting": spec})
    return made


@dataclass(frozen=True, slots=True)
class ReplaySettings:
    """How model calls are recorded and replayed (SPEC 5, 11, 13): one value, checked once.

    Constructing it checks every field (``ReplaySettingsError``, a ``ValueError``) and
    makes lists tuples and paths ``Path``; ``from_mapping`` reads settings given by name (a
    scenario's tables, ``agentreel_config``, flags), ``from_text`` from text (an agent's
    ``AGENTREEL_*`` environment), ``settings`` writes them as that text.
    """

    drift: DriftMode = setting(  # noqa: RUF009 - a field with its Setting
        "error",
        kind=_Choice(
            DRIFT_MODES,
            "error: a request that differs from the recorded one fails its call; warn: it "
            "is reported; off: not checked",
        ),
        help="request drift: a live request that differs from the recorded one",
        table=None,
    )
    drift_dir: Path | None = setting(  # noqa: RUF009 - a field with its Setting
        None,
        kind=_Directory(),
        help="where a drifted call's full recorded and live requests are written (default: "
        "drift/ beside the report)",
        table=None,
        metavar="DIR",
    )
    masks: tuple[str, ...] = setting(
        (),
        kind=_Regexes("mask"),
        help="volatile request text, masked before requests are compared (each regex's "
        "match becomes {{mask:N}})",
        table="model",
        modes=("record", "replay"),
        flag="--mask",
        metavar="REGEX",
    )
    partial_lanes: tuple[str, ...] = setting(
        (),
        kind=_Regexes("partial lane"),
        help="a regex naming a lane (found in its model, system prompt or first message) "
        "that may be consumed partly or not at all",
        table="model",
        flag="--partial-lane",
        metavar="REGEX",
    )
    captures: tuple[Capture, ...] = setting(
        (),
        kind=_Captures(),
        help="a live value the model names back (a child's agent id): its regex's group "
        "(or whole match) in requests, recorded as {{TOKEN:N}}, served as the live "
        "request's N-th value",
        table="model",
        modes=("record", "replay"),
        flag="--capture",
        metavar="TOKEN=REGEX",
    )
    schedule: ScheduleMode = setting(  # noqa: RUF009 - a field with its Setting
        "free",
        kind=_Choice(
            SCHEDULE_MODES,
            "free: each call answered when asked; recorded: calls of different sessions "
            "and lanes kept in their recorded order",
        ),
        help="recorded: calls of different sessions and lanes keep their recorded order",
    )
    schedule_timeout: float = setting(
        DEFAULT_SCHEDULE_TIMEOUT,
        kind=_Seconds(MAX_SCHEDULE_TIMEOUT),
        help="how long a call held by schedule = recorded waits before it goes on (a "
        "schedule divergence)",
        metavar="SECONDS",
        only_with=("schedule", "recorded"),
    )
    schedule_divergence: DivergenceMode = setting(  # noqa: RUF009 - a field with its Setting
        "error",
        kind=_Choice(
            DIVERGENCE_MODES,
            "error: a wait past schedule_timeout fails the replay; allow: it is reported only",
        ),
        help="allow: a schedule divergence is reported, not a failure",
        only_with=("schedule", "recorded"),
    )
    pace: PaceMode = setting(  # noqa: RUF009 - a field with its Setting
        "instant",
        kind=_Choice(
            PACE_MODES,
            "instant: each answer served at once; recorded: each answer kept as sent goes "
            "out at its recorded first-byte delay and inter-frame gaps",
        ),
        help="recorded: serve each answer at its recorded first-byte delay and inter-frame "
        "gaps (default: at once)",
    )

    def __post_init__(self) -> None:
        for spec in fields(self):
            value = spec.metadata["setting"].kind.check(spec.name, getattr(self, spec.name))
            object.__setattr__(self, spec.name, value)

    # -- the fields' specs -------------------------------------------------------------

    @staticmethod
    def specs() -> dict[str, Setting]:
        """Every field's name and ``Setting``, in field order."""
        return {spec.name: spec.metadata["setting"] for spec in fields(ReplaySettings)}

    @staticmethod
    def names(table: Table | None = None) -> tuple[str, ...]:
        """The settings' names; with ``table``, those a scenario types in that table."""
        return tuple(
            name for name, spec in ReplaySettings.specs().items() if table in (None, spec.table)
        )

    @staticmethod
    def flag(name: str) -> str:
        """Setting ``name``'s proxy CLI flag."""
        return ReplaySettings.specs()[name].flag or "--" + name.replace("_", "-")

    @staticmethod
    def flag_reader(name: str) -> Callable[[str], object]:
        """Setting ``name``'s reader of one flag value: a scalar read from text, a list's
        one item checked as the list's items are (``ReplaySettingsError``), kept as text."""
        kind = ReplaySettings.specs()[name].kind

        def read(text: str) -> object:
            if not kind.repeated():
                return kind.parse(name, text)
            kind.check(name, kind.parse(name, text) or [text])
            return text

        return read

    # -- reading -----------------------------------------------------------------------

    def with_values(self, values: Mapping[str, object]) -> ReplaySettings:
        """These settings with ``values`` (by name, as the fields take them) laid over;
        an unknown name is a ``TypeError``, a bad value a ``ReplaySettingsError``."""
        known = self.specs()
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise TypeError(
                f"unknown replay setting(s) {', '.join(unknown)}; known: {', '.join(known)}"
            )
        merged: dict[str, Any] = {name: getattr(self, name) for name in known}
        merged.update(values)
        return ReplaySettings(**merged)

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> ReplaySettings:
        """Settings a user gave by name (a scenario's tables, ``agentreel_config``, flags):
        every check of the fields, an unknown name and a setting given without the one it
        only means something with are ``ReplaySettingsError``s naming it."""
        known = cls.specs()
        for name in sorted(values):
            if name not in known:
                raise ReplaySettingsError(name, name, f"unknown setting; known: {', '.join(known)}")
        settings = ReplaySettings().with_values(values)
        for name in sorted(values):
            needs = known[name].only_with
            if needs is not None and getattr(settings, needs[0]) != needs[1]:
                raise ReplaySettingsError(
                    name,
                    name,
                    f'only means something with {needs[0]} = "{needs[1]}"; set that, or '
                    "remove this key",
                )
        return settings

    @classmethod
    def parse(cls, name: str, text: str) -> object:
        """Setting ``name``'s value from text (unchecked: construct or ``from_mapping``)."""
        return cls.specs()[name].kind.parse(name, text)

    @classmethod
    def from_text(cls, values: Mapping[str, str]) -> ReplaySettings:
        """Settings given as text by name (an agent's ``AGENTREEL_*`` environment, written
        by ``settings``)."""
        return ReplaySettings().with_values(
            {name: cls.parse(name, text) for name, text in values.items()}
        )

    # -- writing -----------------------------------------------------------------------

    def keywords(self) -> dict[str, Any]:
        """Every setting by name, as the fields hold them."""
        return {name: getattr(self, name) for name in self.specs()}

    def settings(self) -> dict[str, str]:
        """The settings that differ from the defaults, as text by name (what ``from_text``
        reads: the replay provider's settings in an agent's ``AGENTREEL_*`` environment)."""
        default = ReplaySettings()
        return {
            name: spec.kind.text(getattr(self, name))
            for name, spec in self.specs().items()
            if getattr(self, name) != getattr(default, name)
        }


class ReplaySettingsKeywords(TypedDict, total=False):
    """``ReplaySettings``' fields as keywords (``ReplayProvider``, ``start_proxy``): one key
    per field, of the same name (a test holds them equal)."""

    drift: DriftMode
    drift_dir: str | os.PathLike[str] | None
    masks: Sequence[str]
    partial_lanes: Sequence[str]
    captures: Sequence[Capture]
    schedule: ScheduleMode
    schedule_timeout: float
    schedule_divergence: DivergenceMode
    pace: PaceMode


def checked_regexes(name: str, patterns: Iterable[str]) -> tuple[str, ...]:
    """``patterns`` checked as setting ``name``'s (``masks``, ``partial_lanes``)."""
    kind = ReplaySettings.specs()[name].kind
    return cast(tuple[str, ...], kind.check(name, list(patterns)))
