"""Model prices, for what ``record --drifted`` did not spend (SPEC 20).

A price file is TOML the user edits (agentreel ships no prices: they change)::

    currency = "USD"            # optional; what the report names the money in

    [models."gpt-4.1"]
    prompt = 2.00               # per million prompt (input) tokens
    completion = 8.00           # per million completion (output) tokens

    [models."*"]                # optional: any model not listed
    prompt = 1.0
    completion = 4.0

It is ``[record] prices`` (a path relative to the scenario), else the default file
``agentreel-prices.toml`` in the scenario's directory or the directory above it (the
fixtures root, beside ``agentreel.toml``). Without one, the report counts calls and
tokens only.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from agentreel.snapshot_harness._scenario import Scenario
from agentreel.snapshot_harness.exceptions import ScenarioError

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


def load_prices(scenario: Scenario) -> Prices | None:
    """The scenario's price table (module docstring), ``None`` without one."""
    path = scenario.record.prices
    if path is None:
        for folder in (scenario.directory, scenario.directory.parent):
            if (folder / DEFAULT_PRICES_FILE).is_file():
                path = folder / DEFAULT_PRICES_FILE
                break
        else:
            return None
    return read_prices(path)


def read_prices(path: Path) -> Prices:
    """Read a price file; a missing or malformed one is a ``ScenarioError`` naming it."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ScenarioError(f"{path}: cannot read the price table: {error}") from None
    currency = data.get("currency", "USD")
    table = data.get("models", {})
    if not isinstance(currency, str) or not isinstance(table, dict):
        raise ScenarioError(
            f"{path}: a price table has a string 'currency' and a [models.\"<name>\"] table "
            "per model with 'prompt' and 'completion' prices per million tokens"
        )
    models: dict[str, tuple[float, float]] = {}
    for name, entry in table.items():
        if not isinstance(entry, dict) or set(entry) != {"prompt", "completion"}:
            raise ScenarioError(
                f"{path}: [models.{name!r}] must hold exactly 'prompt' and 'completion' "
                "(prices per million tokens)"
            )
        prompt, completion = entry["prompt"], entry["completion"]
        if not all(isinstance(v, int | float) and v >= 0 for v in (prompt, completion)):
            raise ScenarioError(f"{path}: [models.{name!r}] prices must be numbers >= 0")
        models[name] = (float(prompt), float(completion))
    return Prices(path, currency, models)
