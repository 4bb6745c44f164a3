"""A session-keyed record/replay model endpoint for agents in any framework or process.

Point any agent — plain ``openai`` / ``anthropic`` SDK programs, frameworks, CLI agents,
each subagent its own process if need be — at the proxy's base URL. In ``record`` mode it
forwards to an upstream (a real provider or the stub server), passing every SSE event
through as it arrives while writing one session log per caller and lane; in ``replay``
mode it answers keylessly from a fixture through ``agentreel.llm_replay``'s binding, so
each session gets its own recorded script whatever the arrival order (SPEC section 11)::

    async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
        client = openai.AsyncOpenAI(base_url=proxy.openai_base_url, api_key="...")
    async with start_proxy("replay", fixture=fixture_dir, report=report_file) as proxy:
        ...

One server can also serve many independent runs, each under its own ``/r/<run>/`` base
URL with its own recorder or replay provider, logs and report (``ProxyServer.open_run`` /
``close_run``) — what the snapshot harness keeps per worker process::

    server = await ProxyServer().start()
    run = await server.open_run(ProxySettings(mode="replay", fixture=fixture_dir))
    ...  # clients at run.base_url
    await server.close_run(run)  # this run's logs and report written; others go on
"""

from agentreel.llm_proxy._cli import main
from agentreel.llm_proxy._drifted_proxy import (
    DriftedProxy,
    drifted_record_settings,
    drifted_replay_settings,
    merge_drifted_run,
    start_drifted_proxy,
)
from agentreel.llm_proxy._fixture_output import recorded_files, write_fixture
from agentreel.llm_proxy._identity import (
    IDENTITY_HEADERS,
    PARENT_HEADER,
    SESSION_HEADER,
    SPAWN_INDEX_HEADER,
    Identity,
    resolve_identity,
)
from agentreel.llm_proxy._masks import MASK_SETS, Masks, mask_set_fingerprint
from agentreel.llm_proxy._record_command import NO_TRIALS, RecordTrials, Trial
from agentreel.llm_proxy._routes import SUPPORTED_PATHS, unspoken_summary
from agentreel.llm_proxy._run import ProxyRun, RunLogFilter
from agentreel.llm_proxy._server import Proxy, ProxyServer, start_proxy
from agentreel.llm_proxy._settings import (
    DUMMY_KEY,
    KEY_VARIABLES,
    MODES,
    Mode,
    ProxySettings,
    ProxySettingsKeywords,
)
from agentreel.llm_proxy.exceptions import (
    ProxyConfigError,
    ProxyError,
    RequestError,
    SecretInRecordingError,
)
from agentreel.session import (
    RecordSetting,
    RecordSettings,
    RecordSettingsError,
    RecordSettingsKeywords,
)

__all__ = [
    "DUMMY_KEY",
    "IDENTITY_HEADERS",
    "KEY_VARIABLES",
    "MASK_SETS",
    "MODES",
    "NO_TRIALS",
    "PARENT_HEADER",
    "SESSION_HEADER",
    "SPAWN_INDEX_HEADER",
    "SUPPORTED_PATHS",
    "DriftedProxy",
    "Identity",
    "Masks",
    "Mode",
    "Proxy",
    "ProxyConfigError",
    "ProxyError",
    "ProxyRun",
    "ProxyServer",
    "ProxySettings",
    "ProxySettingsKeywords",
    "RecordSetting",
    "RecordSettings",
    "RecordSettingsError",
    "RecordSettingsKeywords",
    "RecordTrials",
    "RequestError",
    "RunLogFilter",
    "SecretInRecordingError",
    "Trial",
    "drifted_record_settings",
    "drifted_replay_settings",
    "main",
    "mask_set_fingerprint",
    "merge_drifted_run",
    "recorded_files",
    "resolve_identity",
    "start_drifted_proxy",
    "start_proxy",
    "unspoken_summary",
    "write_fixture",
]
