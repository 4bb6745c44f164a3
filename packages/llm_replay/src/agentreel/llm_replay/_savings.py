"""What a drifted recording did not spend (SPEC 20): the price table and the report, one
owner for ``agentreel record --drifted``, the pytest fixture's ``--agentreel-record=drifted``
and ``agentreel proxy replay --record-drifted``.

A price file is TOML the user edits (agentreel ships no prices: they change)::

    currency = "USD"            # optional; what the report names the money in

    [models."gpt-4.1"]
    prompt = 2.00               # per million prompt (input) tokens
    completion = 8.00           # per million completion (output) tokens

    [models."*"]                # optional: any model not listed
    prompt = 1.0
    completion = 4.0

Each way of running names where it looks for one (a scenario's ``[record] prices``, the
proxy's ``--prices FILE``), else the default file ``agentreel-prices.toml``
(``DEFAULT_PRICES_FILE``) in the folders ``find_prices`` is given. Without one, the report
counts calls and tokens only.

The report: per session kept / re-recorded from call k / new / dropped, then calls,
tokens and — with a price table — money not spent.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agentreel.llm_replay._merge import SessionFate, Status, usage_sum
from agentreel.llm_replay.exceptions import PriceTableError

DEFAULT_PRICES_FILE = "agentreel-prices.toml"
ANY_MODEL = "*"


@dataclass(frozen=True, slots=True)
class Prices:
    """Per model: (prompt, completion) price per million tokens; ``path`` they came from."""

    path: Path
    currency: str
    models: dict[str, tuple[float, float]]

    def cost(self, model: str | None, prompt: int, completion: int) -> float | None:
        """What ``prompt`` + ``completion`` tokens of ``model`` cost (``None``: no price)."""
        price = self.models.get(model or "", self.models.get(ANY_MODEL))
        if price is None:
            return None
        return (prompt * price[0] + completion * price[1]) / 1_000_000


def find_prices(given: Path | None, folders: Iterable[Path]) -> Prices | None:
    """The price table: ``given`` (a file the user named), else ``DEFAULT_PRICES_FILE`` in
    the first of ``folders`` that holds one, else ``None``."""
    if given is not None:
        return read_prices(given)
    for folder in folders:
        if (folder / DEFAULT_PRICES_FILE).is_file():
            return read_prices(folder / DEFAULT_PRICES_FILE)
    return None


def read_prices(path: Path) -> Prices:
    """Read a price file; a missing or malformed one is a ``PriceTableError`` naming it."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise PriceTableError(f"{path}: cannot read the price table: {error}") from None
    currency = data.get("currency", "USD")
    table = data.get("models", {})
    if not isinstance(currency, str) or not isinstance(table, dict):
        raise PriceTableError(
            f"{path}: a price table has a string 'currency' and a [models.\"<name>\"] table "
            "per model with 'prompt' and 'completion' prices per million tokens"
        )
    models: dict[str, tuple[float, float]] = {}
    for name, entry in table.items():
        if not isinstance(entry, dict) or set(entry) != {"prompt", "completion"}:
            raise PriceTableError(
                f"{path}: [models.{name!r}] must hold exactly 'prompt' and 'completion' "
                "(prices per million tokens)"
            )
        prompt, completion = entry["prompt"], entry["completion"]
        if not all(isinstance(v, int | float) and v >= 0 for v in (prompt, completion)):
            raise PriceTableError(f"{path}: [models.{name!r}] prices must be numbers >= 0")
        models[name] = (float(prompt), float(completion))
    return Prices(path, currency, models)


@dataclass(frozen=True, slots=True)
class DriftedSummary:
    """The report of one drifted run: each session's fate and the totals. ``name`` is
    what ran (a scenario, a test's node id, a fixture folder)."""

    name: str
    sessions: list[SessionFate]
    upstream_calls: int
    prices: Prices | None = None

    @property
    def saved_calls(self) -> int:
        return sum(fate.calls - fate.live_calls for fate in self.sessions if fate.file)

    @property
    def saved_tokens(self) -> tuple[int, int]:
        return usage_sum(fate.saved_tokens for fate in self.sessions if fate.file)

    @property
    def live_tokens(self) -> tuple[int, int]:
        return usage_sum(fate.live_tokens for fate in self.sessions if fate.file)

    def money_saved(self) -> float | None:
        """What the replayed calls would have cost at ``prices`` (``None`` without them,
        or when a model they name has no price)."""
        if self.prices is None:
            return None
        total = 0.0
        for fate in self.sessions:
            if not fate.file or fate.calls == fate.live_calls:
                continue
            cost = self.prices.cost(fate.model, *fate.saved_tokens)
            if cost is None:
                return None
            total += cost
        return total

    def text(self) -> str:
        counts = {s: sum(f.status == s for f in self.sessions) for s in _STATUSES}
        lines = [
            f"{self.name}: re-recorded only what drifted — "
            + ", ".join(f"{counts[s]} {s}" for s in _STATUSES)
        ]
        lines += [f"  {fate.line()}" for fate in self.sessions]
        saved_in, saved_out = self.saved_tokens
        live_in, live_out = self.live_tokens
        lines.append(
            f"  calls: {self.saved_calls} replayed, {self.upstream_calls} to the upstream; "
            f"tokens not spent again: {saved_in} prompt + {saved_out} completion "
            f"(spent: {live_in} + {live_out})"
        )
        money = self.money_saved()
        if money is not None and self.prices is not None:
            lines.append(f"  money not spent: {money:.4f} {self.prices.currency}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, object]:
        return {
            "scenario": self.name,
            "sessions": [dataclasses.asdict(fate) for fate in self.sessions],
            "upstream_calls": self.upstream_calls,
            "saved_calls": self.saved_calls,
            "saved_tokens": list(self.saved_tokens),
            "live_tokens": list(self.live_tokens),
            "money_saved": self.money_saved(),
            "currency": self.prices.currency if self.prices is not None else None,
        }


_STATUSES: tuple[Status, ...] = ("kept", "re-recorded", "new", "dropped")
