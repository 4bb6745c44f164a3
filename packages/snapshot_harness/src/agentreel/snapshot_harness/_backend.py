"""The model backend of a run, as the agent's environment: what it talks to and how.

Written through ``agentreel.llm.AgentEnvironment.to_environ``: the contract's one
writer, whose reader (``from_environ``) every agent built on the kit uses.

``record``: a real provider with exactly the keys it needs, or — for ``[record] provider =
"stub"`` — a stub model server started on 127.0.0.1 for the run's lifetime, reached through
the real ``openai`` adapter. ``replay`` / ``refresh``: the replay provider on the scenario's
recordings, no key, proxies at a closed port.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from agentreel.llm import AgentEnv, AgentEnvironment
from agentreel.session import MAIN_SESSION_FILE, RequestHeader, SessionError, load_session_log
from agentreel.snapshot_harness import _environment as envvars
from agentreel.snapshot_harness._scenario import RecordConfig, Scenario
from agentreel.snapshot_harness._stub_upstream import stub_upstream


@contextlib.contextmanager
def record_backend(config: RecordConfig) -> Iterator[dict[str, str]]:
    """Environment for recording; for ``stub`` the stub server runs for the block's life."""
    if config.provider != "stub":
        env = envvars.record_passthrough(os.environ)
        settings = {"base_url": config.base_url} if config.base_url else {}
        contract = AgentEnvironment(provider=config.provider, model=config.model, settings=settings)
        env.update(contract.to_environ())
        yield env
        return
    with stub_upstream(
        config.rules,
        "record provider 'stub'",
        " or set [record] provider to a real one",
    ) as server:
        # The `stub` provider is the real openai adapter pointed at the stub server, with
        # a fixed non-secret key: recording goes through the real wire protocol.
        env = envvars.loopback_bypass()
        settings = {"base_url": server.base_url}
        contract = AgentEnvironment(provider="stub", model=config.model, settings=settings)
        env.update(contract.to_environ())
        env[AgentEnv.STUB_URL.value] = server.base_url
        yield env


def replay_backend(
    scenario: Scenario, cwd: Path, report: Path, drift_dir: Path | None = None
) -> dict[str, str]:
    """Replay and refresh: the replay provider, no key, proxies at a closed port; a drift's
    full requests written to ``drift_dir`` (``None``: beside the report)."""
    env = envvars.offline_proxies()
    contract = AgentEnvironment(
        provider="replay",
        model=recorded_model(scenario) or scenario.record.model,
        settings={
            "fixture_dir": str(scenario.directory.resolve()),
            "report_path": str(report),
            **replace(scenario.replay, drift_dir=drift_dir).settings(),
        },
        live_cwd=str(cwd),
    )
    env.update(contract.to_environ())
    return env


DRIFTED_REPORT_NAME = "drifted-report.json"
"""The drifted run's report file in its run folder (``agentreel.llm_replay.DriftedReport``)."""


@contextlib.contextmanager
def drifted_backend(
    scenario: Scenario,
    config: RecordConfig,
    cwd: Path,
    report: Path,
    drifted_report: Path,
    drift_dir: Path | None = None,
) -> Iterator[dict[str, str]]:
    """``agentreel record --drifted`` (SPEC 20): the ``replay-drifted`` provider — replay
    on the scenario's recordings, each drifted session answered by the record backend's
    provider (the stub server for the block's life, or a real one: its key stays in the
    environment that provider reads, never in these settings)."""
    with record_backend(config) as live:
        upstream = AgentEnvironment.from_environ(live)
        env = replay_backend(scenario, cwd, report, drift_dir)
        replay = AgentEnvironment.from_environ(env)
        contract = AgentEnvironment(
            provider="replay-drifted",
            model=replay.model,
            settings={
                **replay.settings,
                "drift": "error",  # a drift is what sends a session live, whatever [replay] says
                "upstream_provider": upstream.provider,
                "upstream_settings": upstream.settings,
                "drifted_report": str(drifted_report),
            },
            live_cwd=str(cwd),
        )
        # The live side's reach (its base URL past the closed proxy, a real provider's
        # key and proxies) over replay's offline environment; then the provider contract.
        env.update(live)
        env.update(contract.to_environ())
        yield env


def recorded_model(scenario: Scenario) -> str | None:
    """The model the main recording asked for (what most of its ``request/header``s name),
    if any.

    Replay runs the agent with this model so the request headers match even when the
    scenario was recorded with ``--model`` overriding ``[record] model``. Most, not the
    first: a model edited in one header then drifts at that header alone (the replay names
    it), instead of every other call drifting against it.
    """
    path = scenario.directory / MAIN_SESSION_FILE
    if not path.is_file():
        return None
    try:
        log = load_session_log(path)
    except SessionError:
        return None  # the inventory / replay provider report the broken file by name
    models = Counter(event.data.model for event in log.events if isinstance(event, RequestHeader))
    if not models:
        return None
    # most_common keeps first-seen order among ties: a tie goes to the earliest header.
    return models.most_common(1)[0][0]
