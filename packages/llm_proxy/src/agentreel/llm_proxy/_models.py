"""``GET /v1/models`` as recorded: the upstream's listing, kept beside the session logs.

Record mode passes the listing through (the client gets what the upstream sent, status
included) and keeps it, per query string, in ``models.json`` — in the sessions root as it
arrives, in the fixture when the fixture is written. Replay answers with the recorded
listing; a recording without one (made before the listing was kept, or by an agent that
never listed models) gets the models its calls used (SPEC 11: from the recording).
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from agentreel.llm.wire import models_listing_body
from agentreel.llm_proxy.exceptions import ProxyConfigError
from agentreel.llm_replay import Recording
from agentreel.session import rerecord_command

MODELS_FILE = "models.json"
"""The recorded ``GET /v1/models`` answers, in the sessions root and in the fixture."""


class ModelsListing(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded ``GET /v1/models`` answer."""

    status: int
    content_type: str
    body: str


class _ModelsFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    listings: dict[str, ModelsListing]
    """By query string (``""`` for none)."""


def write_models(directory: Path, listings: dict[str, ModelsListing]) -> None:
    """Write ``listings`` into ``directory``'s ``models.json`` (atomically); none: remove it,
    so a re-recorded fixture keeps no listing of an earlier recording."""
    target = directory / MODELS_FILE
    if not listings:
        target.unlink(missing_ok=True)
        return
    directory.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_bytes(msgspec.json.format(msgspec.json.encode(_ModelsFile(listings))) + b"\n")
    os.replace(tmp, target)


def read_models(directory: Path) -> dict[str, ModelsListing]:
    """The listings recorded in ``directory`` (empty when it holds no ``models.json``)."""
    path = directory / MODELS_FILE
    try:
        return msgspec.json.decode(path.read_bytes(), type=_ModelsFile).listings
    except FileNotFoundError:
        return {}
    except (OSError, msgspec.DecodeError) as error:
        raise ProxyConfigError(
            f"{path}: the recorded GET /v1/models answers cannot be read ({error}). Restore "
            f"the file, delete it (replay then lists the recorded calls' models), or "
            f"re-record: {rerecord_command(directory.name)}"
        ) from None


def listing_for(
    listings: dict[str, ModelsListing], query: str, recording: Recording
) -> ModelsListing:
    """What replay answers ``GET /v1/models?<query>`` with: the listing recorded for that
    query, else the one recorded without a query, else the recorded calls' models."""
    found = listings.get(query) or listings.get("")
    if found is not None:
        return found
    models = sorted({c.request.model for s in recording.scripts for c in s.calls if c.request})
    return ModelsListing(
        status=200, content_type="application/json", body=models_listing_body(models).decode()
    )
