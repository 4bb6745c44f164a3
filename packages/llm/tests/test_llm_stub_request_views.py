"""The stub's rules see each request as its wire API's parser reads it (issue 42): one
parser per API, the wire registry's, for the proxy and the stub alike.

``data/stub_request_views.json.gz`` holds what the stub's own per-API request views made of
every request body the repository's tests sent a stub server, and of hand-written bodies
reaching the branches those do not, written before those views were replaced; each body's
view today must be that one, so no rule answers any request differently.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from agentreel.llm.stub import StubRulesError, parse_rules
from agentreel.llm.stub._rules import request_view, rule_apis
from agentreel.llm.wire import WIRE_APIS, match_under

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
