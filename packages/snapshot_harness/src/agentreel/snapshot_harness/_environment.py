"""The agent's explicit environment: built from nothing, never inherited wholesale.

Replay gets no credential of any kind and proxies pointing at a closed loopback port, so a
stray network call fails at once instead of hanging or reaching a real model. Record gets
exactly what its provider needs. The ``AGENTREEL_*`` names and their meaning are the
contract with the agent, owned by ``agentreel.llm`` (``AgentEnv``, ``AgentEnvironment``):
any agent built on the agent kit reads them with the same code that writes them here.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterable, Mapping
from pathlib import Path

from agentreel.llm import AgentEnv
from agentreel.session import REFRESH_COMMAND_ENV, RERECORD_COMMAND_ENV
from agentreel.snapshot_harness._faketime import FAKETIME_ENV, faketime_env
from agentreel.snapshot_harness.exceptions import RecordSetupError

# The contract's names, owned by agentreel.llm (the agent kit's one list), under the names
# the harness's modules use.
PROVIDER = AgentEnv.PROVIDER.value
MODEL = AgentEnv.MODEL.value
PROVIDER_SETTINGS = AgentEnv.PROVIDER_SETTINGS.value
SESSIONS_ROOT = AgentEnv.SESSIONS_ROOT.value
REPLAY_DIR = AgentEnv.REPLAY_DIR.value
REPLAY_LIVE_CWD = AgentEnv.REPLAY_LIVE_CWD.value
REPLAY_REPORT = AgentEnv.REPLAY_REPORT.value


PROXY_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)
_NO_PROXY_VARS = ("NO_PROXY", "no_proxy")
# Credential-looking names: never inherited in replay, scanned for in record.
SECRET_NAME = re.compile(r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.IGNORECASE)
# What a real provider may need from the caller's environment while recording.
_RECORD_PASSTHROUGH = re.compile(
    r"^(OPENAI_|ANTHROPIC_|AZURE_OPENAI_|HTTPS?_PROXY$|ALL_PROXY$|NO_PROXY$|SSL_CERT_|"
    r"REQUESTS_CA_BUNDLE$|CURL_CA_BUNDLE$)",
    re.IGNORECASE,
)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released): connections are refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def base_environment(run_dir: Path) -> dict[str, str]:
    """What every agent gets: PATH, a private HOME and TMPDIR, UTF-8, unbuffered Python;
    with ``AGENTREEL_FAKETIME`` set, libfaketime and its start (``_faketime``)."""
    home = run_dir / "home"
    tmp = run_dir / "tmp"
    home.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "PYTHONIOENCODING": "utf-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    # How the user re-records and refreshes: named in the agent's replay errors too.
    for hint in (RERECORD_COMMAND_ENV, REFRESH_COMMAND_ENV):
        if os.environ.get(hint):
            env[hint] = os.environ[hint]
    # Another day (``nox -s interop -- --faketime``): libfaketime preloaded (``_faketime``).
    if when := os.environ.get(FAKETIME_ENV):
        env.update(faketime_env(when))
    if os.name == "nt":  # pragma: no cover - Windows needs these to start Python at all
        for key in ("SYSTEMROOT", "SYSTEMDRIVE", "COMSPEC", "PATHEXT"):
            if key in os.environ:
                env[key] = os.environ[key]
    return env


def offline_proxies() -> dict[str, str]:
    """Proxy variables aimed at a closed loopback port, with no bypass list."""
    proxy = f"http://127.0.0.1:{closed_port()}"
    env = dict.fromkeys(PROXY_VARIABLES, proxy)
    env.update(dict.fromkeys(_NO_PROXY_VARS, ""))
    return env


def loopback_bypass() -> dict[str, str]:
    """No proxy for loopback, so the agent reaches a stub server on 127.0.0.1 directly."""
    return dict.fromkeys(_NO_PROXY_VARS, "127.0.0.1,localhost")


def record_passthrough(source: Mapping[str, str]) -> dict[str, str]:
    """The provider keys, base URLs, proxies and CA settings a real recording needs."""
    return {key: value for key, value in source.items() if _RECORD_PASSTHROUGH.match(key)}


def secret_values(*sources: Mapping[str, str], keys: Iterable[str] = ()) -> dict[str, str]:
    """``{value: variable name}`` for every credential-looking variable worth scanning for,
    and every variable named in ``keys`` whatever its name (an auth method's variables)."""
    named = set(keys)
    found: dict[str, str] = {}
    for source in sources:
        for key, value in source.items():
            if (key in named or SECRET_NAME.search(key)) and len(value) >= 8:
                found.setdefault(value, key)
    return found


# What an auth method's variables hold in a replay: keyless, yet set.
REPLAY_AUTH_VALUE = "agentreel-replay-has-no-key"


def auth_environment(names: Iterable[str], *, record: bool, where: str) -> dict[str, str]:
    """The variables an ``authenticate`` method reads: the harness's own values while
    recording (each must be set), a placeholder in replay. ``where`` names the scenario."""
    if not record:
        return dict.fromkeys(names, REPLAY_AUTH_VALUE)
    unset = [name for name in names if not os.environ.get(name)]
    if unset:
        raise RecordSetupError(
            f"{where}: the scenario's auth method reads {', '.join(unset)}, not set in this "
            "environment; export it to record (its value is refused from every recording)"
        )
    return {name: os.environ[name] for name in names}
