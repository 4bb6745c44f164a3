"""Secret scan: record mode refuses to write a file holding a live credential.

Scanned for: the value of every credential-looking variable (``*_API_KEY``, ``*_TOKEN``,
``*SECRET*``, ...) of the harness's and the agent's environment, and auth-header shapes
(``Authorization: Bearer ...``, ``x-api-key: ...``). A hit names the file, the line and
the variable — never the value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from agentreel.session import rerecord_command
from agentreel.snapshot_harness.exceptions import SecretLeakError

_AUTH_HEADER = re.compile(
    rb"(?i)(authorization[\"']?\s*[:=]\s*[\"']?\s*(bearer|basic)\s+[A-Za-z0-9._~+/=-]{12,}"
    rb"|x-api-key[\"']?\s*[:=]\s*[\"']?[A-Za-z0-9._~+/=-]{12,})"
)


def scan_for_secrets(files: Mapping[str, bytes], secrets: Mapping[str, str], scenario: str) -> None:
    """Raise ``SecretLeakError`` if any of ``files`` holds a secret value or an auth header.

    ``secrets`` maps a secret value to the variable it came from.
    """
    needles = [(value.encode(), name) for value, name in secrets.items() if value]
    hits: list[str] = []
    for file_name, data in files.items():
        for number, line in enumerate(data.split(b"\n"), start=1):
            for needle, variable in needles:
                if needle in line:
                    hits.append(f"{file_name}:{number}: the value of ${variable}")
            if _AUTH_HEADER.search(line):
                hits.append(f"{file_name}:{number}: an authorization header with a credential")
    if hits:
        listing = "\n  ".join(sorted(set(hits)))
        raise SecretLeakError(
            f"{scenario}: refusing to write the recording: it contains a live credential\n"
            f"  {listing}\nNothing was written. Find where the agent puts the key into its "
            "output or logs (it must not), fix that, and record again: "
            f"{rerecord_command(scenario)}"
        )
