"""Snapshot tests for ACP agents: run a scenario, normalize, diff against goldens.

A scenario (``fixtures/<name>/scenario.toml``) drives one real agent subprocess over the
Agent Client Protocol. ``replay`` (the default) runs it keylessly against its recordings
and diffs the normalized transcript and session logs with ``golden/``; ``record`` runs it
against a real or stub model and writes recordings and goldens; ``refresh`` replays and
rewrites the goldens. The pytest plugin, the ``agentreel`` CLI and the nox sessions all
sit on ``check_scenario``.
"""

from agentreel.snapshot_harness._check import Outcome, check_scenario, verify_consumption
from agentreel.snapshot_harness._fixtures import (
    GOLDEN_DIR,
    TRANSCRIPT_FILE,
    Inventory,
    check_inventory,
    compare_goldens,
    render_run,
    take_inventory,
    unified_diff,
)
from agentreel.snapshot_harness._runner import MODES, Mode, RunResult, run_scenario
from agentreel.snapshot_harness._scenario import (
    SCENARIO_FILE,
    ExpectError,
    Initialize,
    NewSession,
    Prompt,
    PromptAndCancel,
    RecordConfig,
    Scenario,
    Step,
    discover_scenarios,
    load_scenario,
    resolve_scenario,
    validate_scenario_name,
)
from agentreel.snapshot_harness.exceptions import (
    AgentCrashError,
    AgentOutputError,
    AgentTimeoutError,
    FixtureError,
    FixtureInventoryError,
    GoldenMismatchError,
    HarnessError,
    RecordSetupError,
    ReplayConsumptionError,
    RunError,
    ScenarioError,
    SecretLeakError,
    StepError,
)

__all__ = [
    "GOLDEN_DIR",
    "MODES",
    "SCENARIO_FILE",
    "TRANSCRIPT_FILE",
    "AgentCrashError",
    "AgentOutputError",
    "AgentTimeoutError",
    "ExpectError",
    "FixtureError",
    "FixtureInventoryError",
    "GoldenMismatchError",
    "HarnessError",
    "Initialize",
    "Inventory",
    "Mode",
    "NewSession",
    "Outcome",
    "Prompt",
    "PromptAndCancel",
    "RecordConfig",
    "RecordSetupError",
    "ReplayConsumptionError",
    "RunError",
    "RunResult",
    "Scenario",
    "ScenarioError",
    "SecretLeakError",
    "Step",
    "StepError",
    "check_inventory",
    "check_scenario",
    "compare_goldens",
    "discover_scenarios",
    "load_scenario",
    "render_run",
    "resolve_scenario",
    "run_scenario",
    "take_inventory",
    "unified_diff",
    "validate_scenario_name",
    "verify_consumption",
]
