"""The format stamp every recording carries (SPEC 15): which recording format and which set
of built-in request masks made it.

A session log says it in its header (``"format"``, ``"masks"``), ``wire.ndjson`` in its
first line (``{"format":…,"masks":…}``). A recording without a stamp is the oldest format,
1, made with mask set 1. A reader refuses a recording of a newer format or mask set, naming
both versions; it reads every older one as what it is, never as the current format.

Kept here, the lowest layer that reads recordings (the session loader), beside the mask
sets themselves (``MASK_SETS``, ``agentreel.session._built_in_masks``).
"""

from __future__ import annotations

__all__ = [
    "FORMAT_HISTORY",
    "MADE_BY",
    "MASKS_HISTORY",
    "MASKS_VERSION",
    "NO_TEXT_KEPT",
    "OLDEST_FORMAT",
    "RECORDING_FORMAT",
    "newer_stamp_problem",
    "older_recording_note",
]

RECORDING_FORMAT = 3
"""The recording format this agentreel writes (see ``FORMAT_HISTORY``)."""
MASKS_VERSION = 4
"""The set of built-in request masks this agentreel applies (see ``MASKS_HISTORY``)."""
OLDEST_FORMAT = 1
"""What a recording without a stamp is: format 1, mask set 1."""

MADE_BY: dict[int, str] = {
    1: "agentreel 0.1.0 before the format stamp (December 2026)",
    2: "agentreel 0.1.0 with the format stamp",
    3: "agentreel 0.1.0 keeping each message's masked JSON",
}
"""Which agentreel wrote each recording format, as an error names it."""
NO_TEXT_KEPT = "the recording keeps no whole text of it"
"""What a request diff says of a difference it cannot show (the recording holds a digest
only): the words by which a drift's message knows to name the recording's format."""

FORMAT_HISTORY: dict[int, str] = {
    1: "agentreel 0.1.0 before the format stamp (December 2026): no stamp; a request keeps "
    "its system prompt whole, each message as a digest, a preview and (recorded through "
    "the proxy) its whole text, each tool as a digest only",
    2: "the format stamp (session headers, wire.ndjson); recorded through the proxy, each "
    "tool's whole masked JSON once per lane log (ToolHeader.text), masked again at replay",
    3: "recorded through the proxy, each message's canonical masked JSON once per lane log "
    "(MessageHeader.json), masked again and digested again at replay",
}
MASKS_HISTORY: dict[int, str] = {
    1: "machine facts and four date shapes (ISO 8601, m/d/yyyy, Date.toDateString, "
    "'Wednesday, December 2, 2026')",
    2: "time in every spelling: dates with weekday, time and zone; times; weekdays naming "
    "today; UTC offsets",
    3: "an IANA zone name holding a UTC offset (Etc/GMT+12) masked whole, not as Etc/{{timezone}}",
    4: "now said in prose: 'The current month is December 2026' ({{month}}), a current year "
    "({{year}}), today without its year ('Today is Friday, December 4': {{date}}), a weekday "
    'labelled as the day of the week (\'"day_of_week": "Friday"\': {{weekday}})',
}


def newer_stamp_problem(format_: object, masks: object) -> str | None:
    """What is wrong with a stamp of recording format ``format_`` and mask set ``masks`` for
    this agentreel (``None``: it reads it), both versions named."""
    wrong: list[str] = []
    if not isinstance(format_, int) or format_ > RECORDING_FORMAT or format_ < OLDEST_FORMAT:
        wrong.append(f"recording format {format_!r} (this agentreel reads 1 to {RECORDING_FORMAT})")
    if not isinstance(masks, int) or masks > MASKS_VERSION or masks < OLDEST_FORMAT:
        wrong.append(f"built-in mask set {masks!r} (this agentreel knows 1 to {MASKS_VERSION})")
    if not wrong:
        return None
    return "made by a newer agentreel: " + " and ".join(wrong)


def older_recording_note(name: str, format_: int, masks: int, fix: str) -> str | None:
    """What a digest-only difference of the recording ``name`` (format ``format_``, mask set
    ``masks``) means — compared through the masks it was made with (SPEC 15), the agent's
    request changed where the recording kept no text — and ``fix``, the command that fixes
    it; ``None`` for a recording of the current format and masks."""
    if format_ >= RECORDING_FORMAT and masks >= MASKS_VERSION:
        return None
    made_by = MADE_BY.get(format_, f"recording format {format_}")
    return (
        f"{name} was made by {made_by} (recording format {format_}, built-in mask set "
        f"{masks}; this agentreel: format {RECORDING_FORMAT}, mask set {MASKS_VERSION}). "
        f"Where it kept no text, the live request was masked with mask set {masks} too, as "
        "the recording was, so the agent sends something else there; the recording cannot "
        f"show what. Fix: re-record it: {fix}"
    )
