"""``agentreel upgrade [--fixtures DIR] [NAME|PATH...]``: recordings and goldens of an earlier
format rewritten to the current one (SPEC 15), keylessly, without running any agent.

Per recording folder (a scenario, or a pytest fixture's ``recordings/<module>/<test>/``):

- each session log's header gets the format stamp (``RECORDING_FORMAT``; its mask set stays
  what it was: the digests were taken with those masks); what an earlier format never
  kept (a tool's JSON before format 2, a message's before 3) stays absent, and replay
  compares those parts by digest under the log's mask set;
- every system prompt a log or golden keeps passes through the current built-in masks
  (``agentreel.llm_proxy.Masks``), as a recording made today would hold it (replay masks
  it again on both sides anyway);
- every tool whose whole JSON a log keeps (format 2 on) passes through them too and is
  digested again, in the logs and in the goldens' request headers (which hold its digest):
  replay masks a kept tool with today's masks and its served logs digest it so, so a
  newer mask set that changes a kept tool's text (mask set 4: Claude Code's WebSearch
  description, "The current month is December 2026") would otherwise leave the goldens
  with a digest no replay gives;
- ``wire.ndjson`` gets its stamp line.

Messages (and tools kept as digests only) stay as they are, previews included: their
digests were taken with the recording's mask set, which replay applies to the live
request to compare them (``agentreel.llm_proxy.MASK_SETS``, SPEC 15) — nothing needs the
text again. Lines nothing changes stay byte for byte; running it twice changes nothing the
second time. Prints per file what changed.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import msgspec

from agentreel.llm_proxy import Masks
from agentreel.mcp_replay import (
    MCP_RECORDING_PATTERN,
    MCP_RECORDINGS_DIR,
    McpRecordingError,
    upgrade_recording,
)
from agentreel.session import (
    MASKS_VERSION,
    OLDEST_FORMAT,
    RECORDING_FORMAT,
    SESSION_FILE_PATTERN,
    VERBATIM_FILE,
    RequestHeaderData,
    remasked_tools,
)
from agentreel.snapshot_harness._cli import (
    add_targets,
    command_parser,
    fixtures_directory,
    scenario_directories,
)
from agentreel.snapshot_harness._kept_tools import kept_tools
from agentreel.snapshot_harness.exceptions import HarnessError

SUMMARY = "rewrite recordings and goldens of an earlier format to the current one, keylessly"

_EXAMPLES = """\
examples:
  agentreel upgrade                          # every scenario under ./fixtures
  agentreel upgrade plain-turn --fixtures path/to/fixtures
  agentreel upgrade tests/recordings         # a pytest fixture's recordings, every test
"""


def _parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "agentreel upgrade", __doc__.split("\n\n")[0] if __doc__ else SUMMARY, _EXAMPLES
    )
    add_targets(
        parser,
        "scenario names under the fixtures directory, paths to scenario directories, or a "
        "pytest fixture's recordings/ folder (default: every scenario)",
        metavar="NAME",
    )
    return parser


def _folders(fixtures: Path, names: Sequence[str]) -> list[Path]:
    """Recording folders: a scenario's directory, or each folder holding a ``session.jsonl``
    under a path that is no scenario (a pytest fixture's ``recordings/``)."""
    found: list[Path] = []
    scenario_names: list[str] = []
    for name in names:
        path = Path(name)
        if path.is_dir() and not (path / "scenario.toml").is_file():
            found += sorted(
                {log.parent for log in path.rglob("session.jsonl") if log.parent.name != "golden"}
            )
        else:
            scenario_names.append(name)
    if scenario_names or not names:
        found += scenario_directories(fixtures, scenario_names)
    return found


class _Upgrade:
    def __init__(self, masks: Masks) -> None:
        self._masks = masks
        self.tools: Mapping[str, str] = {}
        """The recording folder's kept tool texts by digest (``kept_tools``)."""

    def log(self, path: Path, *, golden: bool) -> list[str]:
        """``path`` (a session log, or a golden one) upgraded in place; what changed."""
        data = path.read_bytes()
        lines = data.split(b"\n")
        changes: list[str] = []
        for number, line in enumerate(lines):
            if not line.strip():
                continue
            record = json.loads(line)
            changed = self._record(path, record, golden=golden)
            if changed:
                changes += changed
                lines[number] = json.dumps(
                    record, separators=(",", ":"), ensure_ascii=False
                ).encode()
        if changes:
            _write(path, b"\n".join(lines))
        return changes

    def _record(self, path: Path, record: dict[str, Any], *, golden: bool) -> list[str]:
        kind = record.get("type")
        if kind == "session":
            if golden or record.get("format") == RECORDING_FORMAT:
                return []  # a golden holds no stamp; a stamped header is current
            record["format"] = RECORDING_FORMAT
            record["masks"] = masks = record.get("masks", OLDEST_FORMAT)
            return [f"format stamp: format {RECORDING_FORMAT} (masks {masks})"]
        if kind != "request/header":
            return []
        data = record["data"]
        changes: list[str] = []
        system = data.get("system")
        if isinstance(system, str) and (masked := self._masks.text(system)) != system:
            data["system"] = masked
            changes.append(f"seq {record['seq']}: system prompt masked")
        if self.tools and data.get("tools"):
            header = msgspec.convert(data, RequestHeaderData)
            remasked = remasked_tools(header, self.tools, self._masks.text)
            if remasked is not header:
                names = [
                    new.name
                    for old, new in zip(header.tools, remasked.tools, strict=True)
                    if old.digest != new.digest
                ]
                data["tools"] = msgspec.to_builtins(remasked.tools)
                data["tools_digest"] = remasked.tools_digest
                changes.append(f"seq {record['seq']}: tool {', '.join(names)} masked")
        return changes

    def wire(self, path: Path) -> list[str]:
        data = path.read_bytes()
        if not data.strip() or data.lstrip().startswith(b'{"format"'):
            return []
        stamp = json.dumps({"format": RECORDING_FORMAT, "masks": MASKS_VERSION})
        _write(path, stamp.replace(" ", "").encode() + b"\n" + data)
        return [f"format stamp: format {RECORDING_FORMAT}"]


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".upgrade")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def main(argv: Sequence[str], out: TextIO) -> int:
    args = _parser().parse_intermixed_args(list(argv))
    fixtures = fixtures_directory(args.fixtures)
    try:
        folders = _folders(fixtures, args.scenarios)
    except HarnessError as exc:
        print(f"agentreel upgrade: {exc}", file=out)
        return 2
    if not folders:
        print(f"agentreel upgrade: no recordings under {fixtures}", file=out)
        return 2
    upgrade = _Upgrade(Masks())
    changed = 0
    for folder in folders:
        upgrade.tools = {digest: tool.text or "" for digest, tool in kept_tools(folder).items()}
        files: list[tuple[Path, list[str]]] = []
        for golden, where in ((False, folder), (True, folder / "golden")):
            for path in sorted(where.glob("session*.jsonl")):
                if SESSION_FILE_PATTERN.fullmatch(path.name):
                    files.append((path, upgrade.log(path, golden=golden)))
        if (folder / VERBATIM_FILE).is_file():
            files.append((folder / VERBATIM_FILE, upgrade.wire(folder / VERBATIM_FILE)))
        mcp = folder / MCP_RECORDINGS_DIR
        for path in sorted(mcp.iterdir()) if mcp.is_dir() else ():
            if MCP_RECORDING_PATTERN.fullmatch(path.name):
                try:
                    files.append((path, upgrade_recording(path)))
                except McpRecordingError as exc:
                    print(f"agentreel upgrade: {exc}", file=out)
                    return 1
        for path, changes in files:
            if changes:
                changed += 1
                print(f"{path}: {'; '.join(changes)}", file=out)
    print(f"\n{changed} file(s) upgraded in {len(folders)} recording(s)", file=out)
    return 0
