"""The proxy tests run offline: ``offline_proxies`` (conftest, autouse) aims every proxy
variable at a closed port, loopback exempt, for the test's own SDK clients and for every
child process it starts."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from urllib.parse import urlsplit

import openai
import pytest

from agentreel.llm.stub import StubServer

NAMES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def test_the_proxy_variables_point_at_a_closed_port(offline_proxies: dict[str, str]) -> None:
    assert {os.environ[name] for name in NAMES} == {offline_proxies["HTTPS_PROXY"]}
    address = urlsplit(offline_proxies["HTTPS_PROXY"])
    assert address.hostname == "127.0.0.1"
    assert address.port is not None
    with (
        pytest.raises(ConnectionRefusedError),
        socket.create_connection((address.hostname, address.port), timeout=30),
    ):
        pass


def test_sdk_clients_still_reach_loopback(offline_proxies: dict[str, str]) -> None:
    with StubServer.from_toml('[[rule]]\ntext = "through no proxy"\n') as stub:
        client = openai.OpenAI(base_url=stub.openai_base_url, api_key="k", max_retries=0)
        reply = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
        client.close()
    assert reply.choices[0].message.content == "through no proxy"


def test_child_processes_inherit_the_closed_proxies(offline_proxies: dict[str, str]) -> None:
    script = f"import json, os; print(json.dumps({{n: os.environ.get(n) for n in {NAMES!r}}}))"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {name: offline_proxies[name] for name in NAMES}
