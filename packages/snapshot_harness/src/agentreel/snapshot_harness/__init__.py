"""Snapshot tests for ACP agents: run a scenario, normalize, diff against goldens.

A scenario (``fixtures/<name>/scenario.toml``) drives one real agent subprocess over the
Agent Client Protocol. ``replay`` (the default) runs it keylessly against its recordings
and diffs the normalized transcript and session logs with ``golden/``; ``record`` runs it
against a real or stub model and writes recordings and goldens; ``refresh`` replays and
rewrites the goldens. The pytest plugin, the ``agentreel`` CLI and the nox sessions all
sit on ``check_scenario``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agentreel.snapshot_harness._faketime import FAKETIME_ENV, FAKETIME_LIBRARY_ENV, faketime_env
from agentreel.snapshot_harness._scenario import (
    DIRECTORY_CONFIG_FILE,
    MODES,
    SCENARIO_FILE,
    Authenticate,
    ExpectError,
    ForkServerConfig,
    ForkSession,
    HomeFile,
    Initialize,
    LoadSession,
    Mode,
    ModelConfig,
    NewSession,
    Prompt,
    PromptAndCancel,
    RecordConfig,
    ReplayConfig,
    Scenario,
    Step,
    validate_scenario_name,
)
from agentreel.snapshot_harness._scenario_reader import (
    discover_scenarios,
    load_scenario,
    resolve_scenario,
)
from agentreel.snapshot_harness.exceptions import (
    AgentCrashError,
    AgentOutputError,
    AgentreelError,
    AgentTimeoutError,
    FaketimeError,
    FixtureInventoryError,
    GoldenMismatchError,
    HarnessError,
    McpMismatchError,
    RecordError,
    RecordSetupError,
    ReplayConsumptionError,
    RunError,
    ScenarioError,
    ScenarioFilesError,
    SecretLeakError,
    StepError,
    VolatileValuesError,
    _deprecated_name,
)

if TYPE_CHECKING:
    from agentreel.snapshot_harness._check import Outcome, check_scenario
    from agentreel.snapshot_harness._consumption import verify_consumption
    from agentreel.snapshot_harness._diff import (
        compare_goldens,
        file_equals,
        unified_diff,
        unified_diff_file,
    )
    from agentreel.snapshot_harness._layout import (
        GOLDEN_DIR,
        TRANSCRIPT_FILE,
        Inventory,
        check_inventory,
        take_inventory,
    )
    from agentreel.snapshot_harness._render import render_goldens, render_recordings, render_run
    from agentreel.snapshot_harness._result import RunResult
    from agentreel.snapshot_harness._runner import run_scenario

# The runner pulls in the ACP SDK, the session and the replay packages. The pytest plugin
# imports this package in every pytest run of the environment, so those load on first use.
_LAZY = {
    "Outcome": "_check",
    "check_scenario": "_check",
    "verify_consumption": "_consumption",
    "compare_goldens": "_diff",
    "file_equals": "_diff",
    "unified_diff": "_diff",
    "unified_diff_file": "_diff",
    "GOLDEN_DIR": "_layout",
    "TRANSCRIPT_FILE": "_layout",
    "Inventory": "_layout",
    "check_inventory": "_layout",
    "take_inventory": "_layout",
    "render_goldens": "_render",
    "render_recordings": "_render",
    "render_run": "_render",
    "RunResult": "_result",
    "run_scenario": "_runner",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        return _deprecated_name(__name__, name)  # FixtureError, or AttributeError
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "DIRECTORY_CONFIG_FILE",
    "FAKETIME_ENV",
    "FAKETIME_LIBRARY_ENV",
    "GOLDEN_DIR",
    "MODES",
    "SCENARIO_FILE",
    "TRANSCRIPT_FILE",
    "AgentCrashError",
    "AgentOutputError",
    "AgentTimeoutError",
    "AgentreelError",
    "Authenticate",
    "ExpectError",
    "FaketimeError",
    "FixtureInventoryError",
    "ForkServerConfig",
    "ForkSession",
    "GoldenMismatchError",
    "HarnessError",
    "HomeFile",
    "Initialize",
    "Inventory",
    "LoadSession",
    "McpMismatchError",
    "Mode",
    "ModelConfig",
    "NewSession",
    "Outcome",
    "Prompt",
    "PromptAndCancel",
    "RecordConfig",
    "RecordError",
    "RecordSetupError",
    "ReplayConfig",
    "ReplayConsumptionError",
    "RunError",
    "RunResult",
    "Scenario",
    "ScenarioError",
    "ScenarioFilesError",
    "SecretLeakError",
    "Step",
    "StepError",
    "VolatileValuesError",
    "check_inventory",
    "check_scenario",
    "compare_goldens",
    "discover_scenarios",
    "faketime_env",
    "file_equals",
    "load_scenario",
    "render_goldens",
    "render_recordings",
    "render_run",
    "resolve_scenario",
    "run_scenario",
    "take_inventory",
    "unified_diff",
    "unified_diff_file",
    "validate_scenario_name",
    "verify_consumption",
]
