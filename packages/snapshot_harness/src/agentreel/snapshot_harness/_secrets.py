"""The harness's use of the one secret scan (``agentreel.session.SecretScan``).

Record scans the recordings and the goldens, refresh the goldens, before anything is
written: the values of the run's credential-looking variables (``*_API_KEY``, ``*_TOKEN``,
``*SECRET*``, ... of the harness's and the agent's environment), auth-header shapes and
known key shapes, less the scenario's ``[record] allow_secrets``. A hit is a
``SecretLeakError`` naming the file, line, event and rule — never the value — and what to
do, in the words of how the user runs agentreel.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from agentreel.session import SecretFoundError, SecretScan, rerecord_command
from agentreel.snapshot_harness.exceptions import SecretLeakError


def redact_secrets(text: str, secrets: Mapping[str, str], allow: Iterable[str] = ()) -> str:
    """``text`` (a failure message, a diff) with every value the scan refuses redacted."""
    return SecretScan({value: f"${name}" for value, name in secrets.items()}, allow).redact(text)


def scan_for_secrets(
    files: Mapping[str, bytes],
    secrets: Mapping[str, str],
    scenario: str,
    *,
    allow: Iterable[str] = (),
    action: str = "write the recording",
    allowed_in: str = "the scenario's [record] allow_secrets",
) -> None:
    """Raise ``SecretLeakError`` if any of ``files`` holds a secret.

    ``secrets`` maps a secret value to the variable it came from; ``allow`` holds the
    sha256 digests the scenario allows (``[record] allow_secrets``); ``allowed_in`` is
    where the user running it lists one (a pytest test: its ``agentreel_config``).
    """
    scan = SecretScan({value: f"${name}" for value, name in secrets.items()}, allow)
    try:
        scan.check(files)
    except SecretFoundError as found:
        listing = "\n  ".join(hit.describe() for hit in found.hits)
        raise SecretLeakError(
            f"{scenario}: refusing to {action}: it contains a credential (not shown)\n"
            f"  {listing}\nNothing was written. Find where the agent or the model puts the "
            "key into what is recorded (a tool that read a file holding one, a prompt that "
            "prints the environment: it must not), remove it, and record again: "
            f"{rerecord_command(scenario)}. A deliberate fake key of a test is allowed by "
            f"its sha256 (shown above) in {allowed_in}",
            hits=found.hits,
        ) from None
