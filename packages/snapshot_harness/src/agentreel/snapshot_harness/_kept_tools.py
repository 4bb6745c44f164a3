"""The tools whose whole JSON a recording keeps (``ToolHeader.text``, format 2 on), and
which of them today's built-in masks change (SPEC 15): what ``agentreel upgrade`` masks
again and digests again, and what a failed replay names when it says to run it."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from agentreel.llm_proxy import Masks
from agentreel.session import RequestHeaderData, ToolHeader, remasked_tools

__all__ = ["kept_tools", "stale_tools"]


def kept_tools(folder: Path) -> dict[str, ToolHeader]:
    """Every tool whose whole JSON the folder's logs keep (``ToolHeader.text``), by digest."""
    kept: dict[str, ToolHeader] = {}
    for path in sorted(folder.glob("session*.jsonl")):
        for line in path.read_bytes().splitlines():
            if b'"request/header"' not in line:
                continue
            record = json.loads(line)
            if record.get("type") != "request/header":
                continue
            for tool in record["data"].get("tools", ()):
                if isinstance(tool.get("text"), str):
                    kept.setdefault(tool["digest"], msgspec.convert(tool, ToolHeader))
    return kept


def stale_tools(folder: Path) -> list[str]:
    """The tools whose whole JSON the recording ``folder`` keeps and today's built-in masks
    change (a newer mask set than the recording's): their digests in its logs and goldens
    are none a replay gives until ``agentreel upgrade`` rewrites them."""
    kept = kept_tools(folder)
    if not kept:
        return []
    header = RequestHeaderData(
        turn=0,
        step=0,
        model="",
        system=None,
        tools=tuple(kept.values()),
        tools_digest="",
        messages=(),
        message_count=0,
    )
    remasked = remasked_tools(header, {}, Masks().text)
    return sorted(
        {old.name for old, new in zip(header.tools, remasked.tools, strict=True) if old != new}
    )
