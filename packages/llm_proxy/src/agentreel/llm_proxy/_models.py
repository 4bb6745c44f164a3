"""``GET /v1/models`` as recorded: the upstream's listing, kept beside the session logs
(and every API's own listing alike: ``/api/tags``, Bedrock's ``/foundation-models`` and
``/inference-profiles``).

Record mode passes the listing through (the client gets what the upstream sent, status
included) and keeps it, per query string, in ``models.json`` — in the sessions root as it
arrives, in the fixture when the fixture is written. Replay answers with the recorded
listing; a recording without one (made before the listing was kept, or by an agent that
never listed models) gets the models its calls used (SPEC 11: from the recording).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import msgspec

from agentreel.llm.wire import WIRE_APIS, WireApiName, wire_api
from agentreel.llm_proxy._routes import GEMINI_KEY_HEADER, Route, without_key
from agentreel.llm_proxy.exceptions import ProxyConfigError
from agentreel.llm_replay import Recording
from agentreel.session import MODELS_FILE, rerecord_command


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


GEMINI_LISTING = "gemini:"
"""The key prefix of a Gemini models listing (``GET /v1beta/models``, or ``/v1/models`` from
a client sending a Gemini key), kept apart from OpenAI's ``GET /v1/models``."""


LISTING_SEPARATOR = "/"
"""Between an API and the name of a listing other than its own in a listing's key:
``bedrock-converse/inference-profiles:`` (``WirePath.listing``)."""


def listing_key(route: Route, headers: Mapping[str, str], query: Mapping[str, str]) -> str:
    """Which recorded listing a ``GET .../models`` request asks for: its query string
    without a Gemini ``key=`` (never written), a Gemini listing's marked as such."""
    kept = without_key("&".join(f"{name}={value}" for name, value in query.items()))
    if route.listing:
        return f"{route.api}{LISTING_SEPARATOR}{route.listing}:{kept}"
    if route.api != "chat":
        return f"{route.api}:{kept}"
    gemini = GEMINI_KEY_HEADER in headers or "key" in query
    return GEMINI_LISTING + kept if gemini else kept


def listing_for(
    listings: dict[str, ModelsListing], key: str, recording: Recording
) -> ModelsListing:
    """What replay answers a models listing with (``key``: ``listing_key``): the listing
    recorded for that query, else the one recorded without a query, else the recorded
    calls' models (a Gemini listing: the Gemini calls' models, in Gemini's shape)."""
    prefix, separator, _ = key.partition(":")
    name, _, listing = prefix.partition(LISTING_SEPARATOR)
    api: WireApiName = "chat"
    if separator and name in WIRE_APIS:
        api = name
    unqueried = f"{prefix}:" if api != "chat" else ""
    found = listings.get(key) or listings.get(unqueried)
    if found is not None:
        return found
    # The models of the calls made in the listing's API family (Gemini's or Ollama's own
    # listing shape; the OpenAI and Anthropic listings share one), in the shape of the
    # listing asked for (Bedrock's inference profiles: their own).
    spec = wire_api(api)
    family = spec.models_body
    shape = next(
        (
            path.listing_body
            for path in spec.paths
            if listing and path.listing == listing and path.listing_body is not None
        ),
        family,
    )
    models = sorted(
        {
            c.request.model
            for s in recording.scripts
            for c in s.calls
            if c.request and wire_api(c.request.api or "chat").models_body is family
        }
    )
    body = shape(models)
    return ModelsListing(status=200, content_type="application/json", body=body.decode())
