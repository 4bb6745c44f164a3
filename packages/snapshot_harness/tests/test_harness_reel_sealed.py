"""The ``agentreel`` fixture seals the test: loopback exempt from the proxy variables, every
proxy variable at a blocker that names what it refused, a private ``HOME`` and temp dir.

Driven through pytester in subprocesses, with the outer environment as a user's machine
may have it: proxy variables at a closed port and no ``NO_PROXY`` line.
"""

from __future__ import annotations

import os
import socket

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow

QUIET = ("-p", "no:cacheprovider", "-p", "no:asyncio", "-q")
RULES = '[[rule]]\nmatch = { last_user = "hello" }\ntext = "Hi there."\n'
ASK = """
import json
import os
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import openai

import pytest


def ask(agentreel):
    with openai.OpenAI(base_url=agentreel.base_url, api_key=agentreel.api_key) as client:
        reply = client.chat.completions.create(
            model="stub-model", messages=[{"role": "user", "content": "hello"}]
        )
    return reply.choices[0].message.content
"""
TELEMETRY_HOST = "telemetry.agentreel-example.invalid"


@pytest.fixture
def proxied_machine(monkeypatch: pytest.MonkeyPatch) -> str:
    """Proxy variables at a closed port, no NO_PROXY: returns that proxy's URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        proxy = f"http://127.0.0.1:{sock.getsockname()[1]}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, proxy)
    for name in ("NO_PROXY", "no_proxy", "all_proxy", "CI", "AGENTREEL_RERECORD_COMMAND"):
        monkeypatch.delenv(name, raising=False)
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return proxy


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*QUIET, *args)


@pytest.mark.usefixtures("proxied_machine")
def test_records_and_replays_with_proxy_variables_at_a_closed_port_and_no_no_proxy(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", **{"stub-rules": RULES})
    pytester.makepyfile(
        test_chat=ASK + "\n\ndef test_hello(agentreel):\n    assert ask(agentreel) == 'Hi there.'\n"
    )
    run(pytester, "--agentreel-record=once").assert_outcomes(passed=1)
    assert (pytester.path / "recordings" / "test_chat" / "test_hello" / "session.jsonl").is_file()
    run(pytester).assert_outcomes(passed=1)


@pytest.mark.usefixtures("proxied_machine")
def test_an_outside_host_the_agent_tries_is_blocked_and_named(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", **{"stub-rules": RULES})
    pytester.makepyfile(
        test_chat=ASK
        + f"""

def phone_home():
    # An agent's best-effort telemetry: it swallows whatever goes wrong.
    for url in ("http://{TELEMETRY_HOST}/ping", "https://{TELEMETRY_HOST}/v1/events"):
        try:
            urllib.request.urlopen(url, timeout=10)
        except (urllib.error.URLError, OSError) as exc:
            print("telemetry failed:", exc)


def test_hello(agentreel):
    phone_home()
    assert ask(agentreel) == "Hi there."
"""
    )
    recorded = run(pytester, "--agentreel-record=once")
    recorded.assert_outcomes(passed=1)
    replayed = run(pytester)
    replayed.assert_outcomes(passed=1)
    out = replayed.stdout.str()
    assert "agentreel: outside connections blocked" in out
    assert f"blocked an outside connection to {TELEMETRY_HOST} (`GET http://" in out
    assert f"blocked an outside connection to {TELEMETRY_HOST}:443 (`CONNECT" in out
    assert "--agentreel-network=open" in out

    # Opted out: the machine's own proxy variables (a closed port here) are left alone,
    # nothing goes through the blocker, and the model calls still replay.
    opened = run(pytester, "--agentreel-network=open")
    opened.assert_outcomes(passed=1)
    assert "outside connections blocked" not in opened.stdout.str()


@pytest.mark.usefixtures("proxied_machine")
def test_a_client_that_ignores_no_proxy_is_named_first(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", **{"stub-rules": RULES})
    pytester.makepyfile(
        test_chat=ASK
        + """

def test_stubborn(agentreel):
    # A client that always sends through HTTP_PROXY, NO_PROXY or not.
    import http.client
    import urllib.parse

    proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
    body = {"model": "stub-model", "messages": [{"role": "user", "content": "hello"}]}
    connection = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=10)
    connection.request(
        "POST",
        agentreel.base_url + "/chat/completions",
        body=json.dumps(body),
        headers={"content-type": "application/json"},
    )
    response = connection.getresponse()
    assert response.status == 200, response.read()
"""
    )
    result = run(pytester, "--agentreel-record=once")
    result.assert_outcomes(failed=1)
    failure = result.stdout.str().split("_ test_stubborn _", 1)[1]
    first = next(line for line in failure.splitlines() if "test_stubborn" in line)
    assert "a client could not reach the agentreel proxy" in first
    assert "POST http://127.0.0.1:" in first
    assert "HTTP_PROXY" in first
    assert "NO_PROXY" in first
    assert "The test failed because of it (AssertionError" in failure


def test_the_test_gets_a_private_home_and_temp_dir_unless_it_opts_out(
    pytester: pytest.Pytester, proxied_machine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = pytester.path / "the-users-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    pytester.makefile(".toml", **{"stub-rules": RULES})
    pytester.makepyfile(
        test_chat=ASK
        + f"""
USER_HOME = {str(home)!r}


def test_private(agentreel):
    assert ask(agentreel) == "Hi there."
    assert str(Path.home()) != USER_HOME
    Path.home().joinpath(".crewai-preferences").write_text("telemetry on")
    assert not Path(USER_HOME, ".crewai-preferences").exists()
    assert Path(tempfile.gettempdir()).parent == Path.home().parent
    assert os.environ["NO_PROXY"] == "127.0.0.1,localhost"


@pytest.mark.agentreel(private_home=False)
def test_own_home(agentreel):
    assert ask(agentreel) == "Hi there."
    assert str(Path.home()) == USER_HOME


def test_after(tmp_path):
    # Restored once the test is done.
    assert str(Path.home()) == USER_HOME
    assert os.environ["HTTP_PROXY"] == {proxied_machine!r}
    assert "NO_PROXY" not in os.environ
"""
    )
    run(pytester, "--agentreel-record=once").assert_outcomes(passed=3)
    assert not (home / ".crewai-preferences").exists()
    assert os.environ.get("HOME") == str(home)


@pytest.mark.usefixtures("proxied_machine")
def test_gemini_base_url_records_and_replays_a_gemini_call(pytester: pytest.Pytester) -> None:
    # What google-genai sends to HttpOptions(base_url=agentreel.gemini_base_url), by hand.
    pytester.makefile(".toml", **{"stub-rules": RULES})
    pytester.makepyfile(
        test_chat=ASK
        + """

def test_gemini(agentreel):
    assert agentreel.gemini_base_url == agentreel.env["GOOGLE_GEMINI_BASE_URL"]
    body = {"contents": [{"role": "user", "parts": [{"text": "hello"}]}]}
    request = urllib.request.Request(
        agentreel.gemini_base_url + "/v1beta/models/stub-model:generateContent",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", "x-goog-api-key": agentreel.api_key},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        reply = json.load(response)
    assert reply["candidates"][0]["content"]["parts"][0]["text"] == "Hi there."
"""
    )
    run(pytester, "--agentreel-record=once").assert_outcomes(passed=1)
    run(pytester).assert_outcomes(passed=1)


@pytest.mark.usefixtures("proxied_machine")
def test_a_call_on_a_path_agentreel_does_not_speak_is_named(pytester: pytest.Pytester) -> None:
    # What Cohere's v2 client pointed at the fixture sends (Bedrock, the earlier example,
    # is spoken now): it reached the proxy, so the failure never says no call did.
    pytester.makefile(".toml", **{"stub-rules": RULES})
    pytester.makepyfile(
        test_chat=ASK
        + """

def test_cohere(agentreel):
    body = {"model": "command-r", "messages": [{"role": "user", "content": "hello"}]}
    request = urllib.request.Request(
        agentreel.anthropic_base_url + "/v2/chat",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    try:
        urllib.request.urlopen(request, timeout=30)
    except urllib.error.HTTPError as exc:
        assert exc.code == 404
"""
    )
    result = run(pytester, "--agentreel-record=once")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert (
        "1 request on paths agentreel does not speak (`POST /v2/chat` "
        "looks like Cohere) — supported: POST /v1/chat/completions"
    ) in out
    assert "no model call" not in out
