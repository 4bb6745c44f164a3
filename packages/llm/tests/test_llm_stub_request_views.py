"""The stub's rules see each request as its wire API's parser reads it (issue 42): one
parser per API, the wire registry's, for the proxy and the stub alike.

``data/stub_request_views.json.gz`` holds what the stub's own per-API request views made of
every request body the repository's tests sent a stub server, and of hand-written bodies
reaching the branches those do not, written before those views were replaced; each body's
view today must be that one, so no rule answers any request differently.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
from pathlib import Path
from typing import Any

import httpx2
import msgspec
import pytest

from agentreel.llm.stub import StubRulesError, StubServer, parse_rules
from agentreel.llm.stub._rules import request_view, rule_apis
from agentreel.llm.wire import WIRE_APIS, WirePath, match_under, wire_api
from agentreel.llm.wire import _registry as registry

DATA = Path(__file__).parent / "data" / "stub_request_views.json.gz"


def _recorded() -> list[dict[str, Any]]:
    document = json.loads(gzip.decompress(DATA.read_bytes()))
    requests: list[dict[str, Any]] = document["requests"]
    return requests


RECORDED = _recorded()


def test_the_recorded_views_cover_every_api_rules_answer() -> None:
    apis = set()
    for entry in RECORDED:
        found = match_under("POST", entry["path"])
        assert found is not None, entry["path"]
        apis.add(found.spec.name)
    answered = {name for name, spec in WIRE_APIS.items() if spec.rule_api}
    assert apis == answered
    assert len(RECORDED) > 300


def test_every_recorded_body_is_seen_as_before() -> None:
    differing: list[str] = []
    for entry in RECORDED:
        view = json.loads(msgspec.json.encode(request_view(entry["path"], entry["body"])))
        del view["headers"], view["call_index"]
        if view != entry["view"]:
            fields = sorted(key for key in view if view[key] != entry["view"].get(key))
            differing.append(f"{entry['path']}: {', '.join(fields)}")
    assert not differing, f"{len(differing)} views changed:\n" + "\n".join(differing[:20])


def test_a_view_keeps_the_headers_and_call_index_it_was_given() -> None:
    view = request_view(
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "hi"}]},
        7,
        {"X-Agentreel-Session": "s1"},
    )
    assert (view.call_index, dict(view.headers)) == (7, {"x-agentreel-session": "s1"})


def test_a_path_no_rule_answers_is_named() -> None:
    with pytest.raises(ValueError, match="/v1/embeddings"):
        request_view("/v1/embeddings", {"input": "x"})


def test_match_api_names_come_from_the_registry() -> None:
    assert rule_apis() == ("anthropic", "bedrock", "gemini", "ollama", "openai", "responses")
    with pytest.raises(StubRulesError) as caught:
        parse_rules('[[rule]]\nmatch.api = "cohere"\ntext = "x"', source="r.toml")
    assert "match.api is 'cohere'" in str(caught.value)
    assert "anthropic, bedrock, gemini" in str(caught.value)


def test_a_chat_api_the_registry_names_is_answered_by_rules_with_no_other_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What adding a chat API is: its spec (here Chat Completions' rules on another path,
    # named "echo" for rules) in the registry. The stub routes it, reads it, lets a rule
    # name it and answers in its shape, its no-rule error too.
    path = WirePath("/echo/v1/chat", "POST /echo/v1/chat")
    echo = dataclasses.replace(wire_api("chat"), title="Echo", rule_api="echo", paths=(path,))
    apis: dict[str, Any] = WIRE_APIS  # type: ignore[assignment]  # a name not in WireApiName
    monkeypatch.setitem(apis, "echo-chat", echo)
    table = (*registry._TABLE, (echo, path, re.compile(path.pattern + "/?")))
    monkeypatch.setattr(registry, "_TABLE", table)
    rules = '[[rule]]\nmatch = { api = "echo", last_user = "ping" }\ntext = "pong"\n'
    with StubServer.from_toml(rules) as stub:
        streamed = httpx2.post(
            f"{stub.base_url}/echo/v1/chat",
            json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "ping"}]},
        )
        refused = httpx2.post(
            f"{stub.base_url}/echo/v1/chat",
            json={"model": "m", "messages": [{"role": "user", "content": "other"}]},
        )
        answered = [(request.api, request.rule) for request in stub.requests]
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert '"content":"pong"' in streamed.text.replace(" ", "")
    assert refused.status_code == 400
    assert "no rule in" in refused.json()["error"]["message"]
    assert answered == [("echo", "rule 1"), ("echo", None)]
