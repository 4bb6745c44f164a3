"""Loaded first by every program the framework tests run (``PYTHONPATH``): an audit hook
that refuses — and writes down — any name lookup other than loopback and any connection
other than to the loopback ports the test allows (the proxy). So a framework that phones
home (a tracing exporter, a telemetry ping) fails the test instead of reaching the internet.

``AGENTREEL_TEST_NETWORK_LOG``: the file to write refusals to (the hook is off without it);
``AGENTREEL_TEST_ALLOWED_PORTS``: comma-separated loopback ports that may be connected to.
"""

from __future__ import annotations

import os
import sys
from typing import Any

_LOG = os.environ.get("AGENTREEL_TEST_NETWORK_LOG")
_ALLOWED = {int(p) for p in os.environ.get("AGENTREEL_TEST_ALLOWED_PORTS", "").split(",") if p}
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def _refuse(what: str) -> None:
    assert _LOG is not None
    with open(_LOG, "a", encoding="utf-8") as log:
        log.write(what + "\n")
    raise OSError(f"test network guard: {what} refused (tests never reach the internet)")


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.getaddrinfo":
        host = args[0].decode() if isinstance(args[0], bytes) else args[0]
        if host is not None and host not in _LOOPBACK:
            _refuse(f"name lookup {host}")
    elif event == "socket.connect":
        address = args[1]
        if isinstance(address, tuple) and len(address) >= 2:  # AF_INET / AF_INET6
            host, port = address[0], address[1]
            if host not in _LOOPBACK or port not in _ALLOWED:
                _refuse(f"connect {host}:{port}")


if _LOG:
    sys.addaudithook(_audit)
