"""Turning a run into fixture files: normalized goldens and cwd-tokenized recordings.

Goldens go through the one normalizer (``agentreel.session.Normalizer``); recordings keep
raw ids and times and only write the cwd as ``{{cwd}}`` (``agentreel.session.tokenize_cwd``),
named by the session package's fixture layout.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentreel.session import Normalizer, session_file_name, tokenize_cwd
from agentreel.snapshot_harness._layout import TRANSCRIPT_FILE
from agentreel.snapshot_harness._result import RunResult


@dataclass(frozen=True, slots=True)
class Rendered:
    """A run turned into fixture files: ``goldens`` and ``recordings``, name → bytes."""

    goldens: dict[str, bytes]
    recordings: dict[str, bytes]


def render_run(result: RunResult) -> Rendered:
    """Normalize a run into golden texts and tokenize its logs into recordings.

    ``render_goldens`` and ``render_recordings`` together (so the run must have kept its
    raw logs: see ``render_recordings``); a caller needing one side only calls that one (a
    replay never needs recordings: no raw or cwd-tokenized copy of each log).
    """
    return Rendered(goldens=render_goldens(result), recordings=render_recordings(result))


def render_goldens(result: RunResult) -> dict[str, bytes]:
    """A run's goldens, file name → normalized bytes.

    The normalizer is the shared one (``agentreel.session.Normalizer``): transcript first,
    then the logs in session order, so numbering is the same on every run. Its bytes
    outputs are used so the normalized text never exists twice (SPEC 9, peak memory).
    """
    # Besides the cwd, the run's other private paths become tokens too, in case an agent
    # mentions its sessions root, HOME or TMPDIR: they differ on every run.
    extra = {
        str(result.run_dir / "sessions"): "{{sessions}}",
        str(result.run_dir / "home"): "{{home}}",
        str(result.run_dir / "tmp"): "{{tmp}}",
    }
    normalizer = Normalizer.for_logs(
        result.cwd,
        result.session_logs,
        extra_paths=extra,
        masks=result.scenario.golden_masks,
        unordered=result.scenario.unordered,
        merge=result.scenario.merge,
    )
    goldens: dict[str, bytes] = {
        TRANSCRIPT_FILE: normalizer.transcript_bytes(
            result.transcript, source=f"agent stdout of {result.scenario.name}"
        )
    }
    for number, log in enumerate(result.session_logs):
        goldens[session_file_name(number)] = normalizer.session_log_bytes(log)
    return goldens


def render_recordings(result: RunResult) -> dict[str, bytes]:
    """A run's recordings, file name → raw log bytes with the cwd as ``{{cwd}}``, plus what
    a record run through the proxy kept beside its logs (``RunResult.proxy_files``).

    Needs the raw logs: a record run keeps them, another only with ``keep_raw_logs=True``.
    """
    if len(result.session_log_bytes) != len(result.session_logs):
        raise ValueError(
            f"{result.scenario.name}: the run has {len(result.session_logs)} session logs but "
            f"{len(result.session_log_bytes)} raw contents, so no recordings can be made; "
            f"a {result.mode} run keeps raw logs only when asked: "
            "run_scenario(..., keep_raw_logs=True)"
        )
    recordings = {
        session_file_name(number): tokenize_cwd(raw, result.cwd)
        for number, raw in enumerate(result.session_log_bytes)
    }
    recordings.update(result.proxy_files)
    recordings.update(result.mcp_files)
    return recordings
