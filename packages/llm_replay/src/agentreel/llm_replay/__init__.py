"""Per-session keyed replay of recorded model streams (SPEC section 5).

``ReplayProvider`` (registered as the ``replay`` provider) hands each live session — parent,
spawned or forked child, in any interleaving — its own recorded script from a fixture
directory, and fails loudly on anything the recording lacks. ``read_report`` loads the
consumption report a replaying agent process writes, so a harness can check it.
``agentreel.llm_replay.lanes`` holds the lane model (signatures, chaining, delegations,
captured values) that replay binds by and the proxy's recorder files calls by.
"""

from agentreel.llm_replay._captures import Capture
from agentreel.llm_replay._drifted import (
    DRIFTED_REPORT_FORMAT,
    GOES_LIVE,
    DriftedProvider,
    DriftedReport,
    DriftTolerantReplayProvider,
    LiveCaller,
    LiveCallers,
    create_drifted_provider,
    read_drifted_report,
)
from agentreel.llm_replay._failures import ANONYMOUS
from agentreel.llm_replay._fixture import RecordedCall, Recording, Script, load_recording
from agentreel.llm_replay._lanes import PartialLanes
from agentreel.llm_replay._merge import (
    LiveLog,
    Merged,
    RecordedLog,
    SessionFate,
    Status,
    gap_names,
    gapless_copy,
    merge_drifted,
    usage_sum,
    with_recorded_names,
    write_merged,
)
from agentreel.llm_replay._overrides import HangOverride, Override, ThrowOverride
from agentreel.llm_replay._provider import (
    BoundCall,
    RecordedStream,
    ReplayProvider,
    create_replay_provider,
)
from agentreel.llm_replay._report import (
    REPORT_FORMAT,
    REPORT_VERSION,
    ConsumptionReport,
    ReportedError,
    ScriptReport,
    read_report,
    write_report,
)
from agentreel.llm_replay._savings import (
    DEFAULT_PRICES_FILE,
    DriftedSummary,
    Prices,
    find_prices,
    read_prices,
)
from agentreel.llm_replay._schedule import CallGates, ScheduleDivergence, unheld_orders
from agentreel.llm_replay._settings import (
    DEFAULT_SCHEDULE_TIMEOUT,
    DIVERGENCE_MODES,
    PACE_NEEDS_PROXY,
    SCHEDULE_MODES,
    DivergenceMode,
    DriftMode,
    ReplaySettings,
    ReplaySettingsKeywords,
    ScheduleMode,
    value_kind,
)
from agentreel.llm_replay.exceptions import (
    FixtureError,
    IncompleteCallError,
    OverrideError,
    PriceTableError,
    ReplayError,
    ReplaySettingsError,
    RequestDriftError,
    RequestDriftWarning,
    ScheduleDivergenceError,
    ScriptExhaustedError,
    UnconsumedScriptError,
    UnrecordedSessionError,
)

# The fixture layout is the session package's (one owner); re-exported for replay users.
from agentreel.session import OVERRIDE_FILE, session_file_name

__all__ = [
    "ANONYMOUS",
    "DEFAULT_PRICES_FILE",
    "DEFAULT_SCHEDULE_TIMEOUT",
    "DIVERGENCE_MODES",
    "DRIFTED_REPORT_FORMAT",
    "GOES_LIVE",
    "OVERRIDE_FILE",
    "PACE_NEEDS_PROXY",
    "REPORT_FORMAT",
    "REPORT_VERSION",
    "SCHEDULE_MODES",
    "BoundCall",
    "CallGates",
    "Capture",
    "ConsumptionReport",
    "DivergenceMode",
    "DriftMode",
    "DriftTolerantReplayProvider",
    "DriftedProvider",
    "DriftedReport",
    "DriftedSummary",
    "FixtureError",
    "HangOverride",
    "IncompleteCallError",
    "LiveCaller",
    "LiveCallers",
    "LiveLog",
    "Merged",
    "Override",
    "OverrideError",
    "PartialLanes",
    "PriceTableError",
    "Prices",
    "RecordedCall",
    "RecordedLog",
    "RecordedStream",
    "Recording",
    "ReplayError",
    "ReplayProvider",
    "ReplaySettings",
    "ReplaySettingsError",
    "ReplaySettingsKeywords",
    "ReportedError",
    "RequestDriftError",
    "RequestDriftWarning",
    "ScheduleDivergence",
    "ScheduleDivergenceError",
    "ScheduleMode",
    "Script",
    "ScriptExhaustedError",
    "ScriptReport",
    "SessionFate",
    "Status",
    "ThrowOverride",
    "UnconsumedScriptError",
    "UnrecordedSessionError",
    "create_drifted_provider",
    "create_replay_provider",
    "find_prices",
    "gap_names",
    "gapless_copy",
    "load_recording",
    "merge_drifted",
    "read_drifted_report",
    "read_prices",
    "read_report",
    "session_file_name",
    "unheld_orders",
    "usage_sum",
    "value_kind",
    "with_recorded_names",
    "write_merged",
    "write_report",
]
