"""Per-session keyed replay of recorded model streams (SPEC section 5).

``ReplayProvider`` (registered as the ``replay`` provider) hands each live session — parent,
spawned or forked child, in any interleaving — its own recorded script from a fixture
directory, and fails loudly on anything the recording lacks. ``read_report`` loads the
consumption report a replaying agent process writes, so a harness can check it.
"""

from agentreel.llm_replay._captures import (
    Capture,
    captured_values,
    request_strings,
    tokenized_chunks,
)
from agentreel.llm_replay._deltas import delta_text
from agentreel.llm_replay._failures import ANONYMOUS
from agentreel.llm_replay._fixture import RecordedCall, Recording, Script, load_recording
from agentreel.llm_replay._lanes import (
    Chain,
    Delegation,
    LaneSignature,
    PartialLanes,
    Reply,
    argument_strings,
    chain,
    delegated_by,
    delegations,
    first_user_text,
    first_user_texts,
    lane_signature,
    message_digests,
    recorded_reply,
    restates,
)
from agentreel.llm_replay._overrides import HangOverride, Override, ThrowOverride
from agentreel.llm_replay._provider import (
    BoundCall,
    DriftMode,
    RecordedStream,
    ReplayProvider,
    check_schedule_settings,
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
from agentreel.llm_replay._schedule import (
    DEFAULT_SCHEDULE_TIMEOUT,
    DIVERGENCE_MODES,
    SCHEDULE_MODES,
    CallGates,
    DivergenceMode,
    ScheduleDivergence,
    ScheduleMode,
)
from agentreel.llm_replay.exceptions import (
    FixtureError,
    IncompleteCallError,
    OverrideError,
    ReplayError,
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
    "DEFAULT_SCHEDULE_TIMEOUT",
    "DIVERGENCE_MODES",
    "OVERRIDE_FILE",
    "REPORT_FORMAT",
    "REPORT_VERSION",
    "SCHEDULE_MODES",
    "BoundCall",
    "CallGates",
    "Capture",
    "Chain",
    "ConsumptionReport",
    "Delegation",
    "DivergenceMode",
    "DriftMode",
    "FixtureError",
    "HangOverride",
    "IncompleteCallError",
    "LaneSignature",
    "Override",
    "OverrideError",
    "PartialLanes",
    "RecordedCall",
    "RecordedStream",
    "Recording",
    "ReplayError",
    "ReplayProvider",
    "Reply",
    "ReportedError",
    "RequestDriftError",
    "RequestDriftWarning",
    "ScheduleDivergence",
    "ScheduleDivergenceError",
    "ScheduleMode",
    "Script",
    "ScriptExhaustedError",
    "ScriptReport",
    "ThrowOverride",
    "UnconsumedScriptError",
    "UnrecordedSessionError",
    "argument_strings",
    "captured_values",
    "chain",
    "check_schedule_settings",
    "create_replay_provider",
    "delegated_by",
    "delegations",
    "delta_text",
    "first_user_text",
    "first_user_texts",
    "lane_signature",
    "load_recording",
    "message_digests",
    "read_report",
    "recorded_reply",
    "request_strings",
    "restates",
    "session_file_name",
    "tokenized_chunks",
    "write_report",
]
