"""A scenario's price table, for what ``record --drifted`` did not spend (SPEC 20).

The format, the default file name and the reader are ``agentreel.llm_replay``'s (one owner,
shared with the fixture and the standalone proxy); a scenario's table is ``[record]
prices`` (a path relative to the scenario), else ``agentreel-prices.toml`` in the
scenario's directory or the directory above it (the fixtures root, beside
``agentreel.toml``). Without one, the report counts calls and tokens only.
"""

from __future__ import annotations

from agentreel.llm_replay import Prices, PriceTableError, find_prices
from agentreel.snapshot_harness._scenario import Scenario
from agentreel.snapshot_harness.exceptions import ScenarioError


def load_prices(scenario: Scenario) -> Prices | None:
    """The scenario's price table (module docstring), ``None`` without one; a malformed
    one is a ``ScenarioError`` naming the file."""
    folders = (scenario.directory, scenario.directory.parent)
    try:
        return find_prices(scenario.record.prices, folders)
    except PriceTableError as error:
        raise ScenarioError(str(error)) from None
