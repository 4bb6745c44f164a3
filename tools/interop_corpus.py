"""The compatibility corpus's real-agent recordings as ``nox -s interop`` replays them with
their agents (SPEC 15, ``corpus/README.md``): each ``corpus/interop/<commit>/<scenario>/``
under the name ``<scenario>-<commit>`` (the corpus may hold one scenario at several commits,
and ``interop/fixtures/`` holds today's recording of the same scenario under its bare name),
copied into a scratch fixtures folder (a corpus file is never edited) and replayed under
libfaketime from the moment it was recorded: the ``created_at`` of its main session log.

Why that moment: a digest-only recording (format 1) keeps no text of its tools, and Claude
Code 0.23.1's ``WebSearch`` description names the month ("The current month is December
2026"), so its digest matches only a live request made in that month; the recorded moment
is the one day every such text matches.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

# Where the real-agent recordings live, under the repository root.
CORPUS_INTEROP = Path("corpus") / "interop"
# The main session log: its first line, the session header, holds ``created_at``.
MAIN_LOG = "session.jsonl"


def scenarios(root: Path) -> dict[str, Path]:
    """Each real-agent corpus recording by its name, ``<scenario>-<commit>``, sorted."""
    found = sorted((root / CORPUS_INTEROP).glob("*/*/scenario.toml"))
    return {f"{toml.parent.name}-{toml.parent.parent.name}": toml.parent for toml in found}


def recorded_at(scenario: Path) -> str:
    """The moment ``scenario`` was recorded, from its main log's header (``created_at``,
    epoch milliseconds), as this machine's local ``YYYY-MM-DD HH:MM:SS``: libfaketime reads
    an absolute start in the local time zone, so the agent's clock starts at that instant.
    ``ValueError`` naming the file when its first line holds no ``created_at``."""
    log = scenario / MAIN_LOG
    with log.open(encoding="utf-8") as f:
        first = f.readline()
    try:
        created = json.loads(first)["created_at"]
        moment = datetime.fromtimestamp(float(created) / 1000)
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(
            f"{log}: its first line holds no created_at (epoch milliseconds) to replay it "
            f"from ({error!r}); a corpus recording is copied byte for byte from git history"
        ) from None
    return f"{moment:%Y-%m-%d %H:%M:%S}"


def copy_to(chosen: dict[str, Path], scratch: Path) -> None:
    """A fresh ``scratch`` fixtures folder holding each ``chosen`` recording under its name."""
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    for name, scenario in chosen.items():
        shutil.copytree(scenario, scratch / name)
