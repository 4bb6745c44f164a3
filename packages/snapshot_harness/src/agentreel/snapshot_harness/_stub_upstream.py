"""The stub model server a record run talks to, for the block's life: one starter for the
harness's backend (``[record] provider = "stub"``) and its proxied runs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from agentreel.snapshot_harness._record_proof import upstream_started
from agentreel.snapshot_harness.exceptions import RecordSetupError

if TYPE_CHECKING:
    from agentreel.llm.stub import StubServer


@contextlib.contextmanager
def stub_upstream(rules: Path | None, needs: str, otherwise: str = "") -> Iterator[StubServer]:
    """The stub server on ``rules``, started and announced to the record proof; a missing
    rules file is a ``RecordSetupError`` saying ``needs`` it (and ``otherwise``, the other
    way out)."""
    if rules is None or not rules.is_file():
        from agentreel.llm.stub import RULES_FORMAT_HINT

        raise RecordSetupError(
            f"{needs} needs its rules file {rules}; create it ({RULES_FORMAT_HINT}){otherwise}"
        )
    from agentreel.llm.exceptions import StubRulesError
    from agentreel.llm.stub import StubServer

    try:
        server = StubServer(rules)
    except StubRulesError as exc:
        raise RecordSetupError(f"cannot start the stub model server: {exc}") from None
    upstream_started(server)
    with server:
        yield server
