"""The settings of MCP record and replay, one value checked once (SPEC 19), and the shim's
command line built from them — what a harness gives the agent instead of the server's."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agentreel.mcp_replay._layout import SERVER_NAME
from agentreel.mcp_replay._recording import Masking
from agentreel.mcp_replay.exceptions import McpConfigError
from agentreel.session import KeyMask, Mask, RecordSettings, SecretScan

Mode = Literal["record", "replay"]


@dataclass(frozen=True, slots=True)
class McpSettings:
    """``recordings``: the scenario's folder (its ``mcp/`` holds the recordings); ``state``:
    the run's folder for claims and failures (``check_replayed`` reads it); ``scenario``:
    named in the re-record command; ``cwd``: written as ``{{cwd}}``; ``masks``: the
    scenario's masks by regex (``Mask``) and by JSON key (``KeyMask``), applied to what is
    written and compared (``Masking`` says which side each reaches)."""

    mode: Mode
    recordings: Path
    state: Path
    scenario: str | None = None
    cwd: str | None = None
    masks: tuple[Mask | KeyMask, ...] = ()
    # The record settings (the scenario's [record]: allow_secrets, the sha256 digests of
    # credentials it allows), the same value the model proxy records with.
    record: RecordSettings = field(default_factory=RecordSettings)

    def __post_init__(self) -> None:
        if self.mode not in ("record", "replay"):
            raise McpConfigError(f"mode {self.mode!r}: use 'record' or 'replay'")

    @property
    def masking(self) -> Masking:
        return Masking(self.cwd, self.masks)

    @property
    def scan(self) -> SecretScan:
        """The secret scan each written line passes (credential shapes, less the allowed)."""
        return SecretScan(allow=self.record.allow_secrets)

    def shim_args(self, server: str) -> list[str]:
        """The shim's own options for ``server`` (without the real command)."""
        check_server_name(server)
        args = [
            "--server", server, "--mode", self.mode,
            "--recordings", str(self.recordings), "--state", str(self.state),
        ]  # fmt: skip
        if self.scenario:
            args += ["--scenario", self.scenario]
        if self.cwd:
            args += ["--cwd", self.cwd]
        for mask in self.masks:
            if isinstance(mask, KeyMask):
                args += ["--key-mask", f"{mask.token}={mask.key}"]
            else:
                args += ["--mask", f"{mask.token}={mask.regex}"]
        return args + self.record.flags()


def check_server_name(server: str) -> str:
    if not SERVER_NAME.match(server):
        raise McpConfigError(
            f"MCP server name {server!r}: use letters, digits, '-' and '_' only "
            "(it names the server's recording files)"
        )
    return server


def stdio_command(settings: McpSettings, server: str, command: Sequence[str]) -> list[str]:
    """The command line that stands for ``command`` (the real server's): the shim, which
    records the server's exchanges or (replay) answers them with no server running."""
    return [
        sys.executable, "-m", "agentreel.mcp_replay", "stdio",
        *settings.shim_args(server), "--", *command,
    ]  # fmt: skip
