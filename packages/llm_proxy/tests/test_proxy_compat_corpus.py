"""The compatibility corpus (``corpus/``, SPEC 15), read offline as replay reads it: every
recording an earlier version of this repository committed — scenarios and real agents
(Claude Code, Codex, Mistral Vibe, opencode as ``interop/fixtures`` had them) — keeps some
request texts as digests only (each message; a tool before format 2). Replay compares those
digests with the live request masked by the mask set the recording was made with, so each
such text the recording keeps beside its digest (a message's preview, its whole text) must
be left as it is by that set — also written with another machine's facts — or the agent's
unchanged request would no longer give the recorded digest.

A built-in mask added to a released set in place strands these recordings; added as a new
set (``MASK_SETS``, ``MASKS_VERSION`` + 1), it strands none."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

import agentreel.llm_proxy._masks as masks_module
from agentreel.llm_proxy import MASK_SETS, Masks
from agentreel.session import RequestHeaderData, load_session_log

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT / "corpus"
RECORDINGS = sorted(path.parent for path in CORPUS.glob("*/*/*/scenario.toml"))
REAL_AGENTS = [path for path in RECORDINGS if path.parent.parent.name == "interop"]

# Another machine's spelling of facts real agents write into their messages (Codex's
# environment context, Claude Code's and opencode's env blocks), from the recordings.
OTHER_MACHINE: tuple[tuple[str, str], ...] = (
    (r"<shell>\{\{shell\}\}</shell>", "<shell>zsh</shell>"),
    (r"\{\{os-version\}\}", "Darwin 24.1.0"),
    (r"(?<=Platform: )\{\{platform\}\}", "darwin"),
    (r"\{\{home\}\}", "/Users/grace"),
    (r"\{\{timezone\}\}", "America/Los_Angeles"),
)
# A rule nobody would ship, matching words every corpus recording's messages hold.
EXTRA_RULE = (r"\b(?:the|file|you)\b", "{{word}}")


def _digest_only_texts(recording: Path) -> list[tuple[str, int, str]]:
    """``(where, mask set, text)`` for every text a recording keeps beside a digest: each
    message's preview and whole text (system prompts and tools' texts are kept whole and
    masked again at replay, so no mask can strand them)."""
    found: list[tuple[str, int, str]] = []
    for path in sorted(recording.glob("session*.jsonl")):
        log = load_session_log(path)
        for event in log.events:
            if not isinstance(event.data, RequestHeaderData):
                continue
            for position, message in enumerate(event.data.messages):
                where = f"{path.relative_to(CORPUS)} seq {event.seq} messages[{position}]"
                for text in (message.preview, message.text):
                    if text is not None:
                        found.append((where, log.header.masks, text))
    return found


def _stranded(recording: Path, masks_for: Callable[[int], Masks]) -> list[str]:
    """Where a digest-only text of ``recording`` changes under ``masks_for(its mask set)``:
    the live request, masked so, would no longer give the recorded digest."""
    stranded: list[str] = []
    cache: dict[int, Masks] = {}
    for where, made_with, text in _digest_only_texts(recording):
        masks = cache.setdefault(made_with, masks_for(made_with))
        if masks.text(text) != text:
            stranded.append(f"{where}: {text[:60]!r} -> {masks.text(text)[:60]!r}")
    return stranded


def _as_replay_masks(made_with: int) -> Masks:
    # What replay masks a live request with before comparing this recording's digests.
    return Masks(cwd="/work/somewhere/else", version=made_with)


def test_the_corpus_holds_every_kind_of_recording() -> None:
    assert len(RECORDINGS) >= 10
    assert {path.name for path in REAL_AGENTS} >= {
        "claude-code-read",
        "claude-code-task",
        "codex-subagent",
        "mistral-vibe-subagent",
        "opencode-subagents",
    }
    made_with = {load_session_log(path / "session.jsonl").header.masks for path in RECORDINGS}
    assert made_with == set(MASK_SETS), "a recording of every released mask set"


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_digest_only_text_of_a_corpus_recording_masks_to_itself(recording: Path) -> None:
    texts = _digest_only_texts(recording)
    assert texts, f"{recording}: no request text read"
    assert _stranded(recording, _as_replay_masks) == []


def _system_prompts(recording: Path) -> list[tuple[str, str]]:
    found: dict[str, str] = {}
    for path in sorted(recording.glob("session*.jsonl")):
        for event in load_session_log(path).events:
            if isinstance(event.data, RequestHeaderData) and event.data.system is not None:
                found.setdefault(event.data.system, f"{path.name} seq {event.seq}")
    return [(where, text) for text, where in found.items()]


def _on_another_machine_and_day(text: str) -> tuple[str, int]:
    count = 0
    for pattern, spelling in (
        *OTHER_MACHINE,
        (r"\{\{date\}\}", "2028-02-29"),
        (r"\((?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day\)", "(Tuesday)"),
    ):
        text, found = re.subn(pattern, spelling, text)
        count += found
    return text, count


@pytest.mark.parametrize("recording", REAL_AGENTS, ids=lambda p: p.name)
def test_a_real_agents_recording_replays_on_another_machine_and_day(recording: Path) -> None:
    # Its agent's request as another machine writes it on another day: each digest-only
    # text masked with the recording's set gives back the recorded text (and so its
    # digest); each system prompt (kept whole) masked with today's set reads as the
    # recorded one does through it.
    rewritten = 0
    for where, made_with, text in _digest_only_texts(recording):
        other, count = _on_another_machine_and_day(text)
        rewritten += count
        if count:
            assert _as_replay_masks(made_with).text(other) == text, where
    today = Masks(cwd="/work/somewhere/else")
    for where, text in _system_prompts(recording):
        other, count = _on_another_machine_and_day(text)
        rewritten += count
        assert today.text(other) == today.text(text), f"{recording.name} {where}"
    assert rewritten, f"{recording.name}: no machine fact or date found to rewrite"


def test_a_mask_added_to_a_released_set_strands_the_corpus_and_a_new_set_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    versions = dict(MASK_SETS)

    def with_extra(
        version: int,
    ) -> Callable[[str], tuple[tuple[str, str], ...]]:
        return lambda not_cwd: (*versions[version](not_cwd), EXTRA_RULE)

    # In place: every released set gains the rule, as an unversioned mask list would.
    for version in versions:
        monkeypatch.setitem(masks_module.MASK_SETS, version, with_extra(version))
    stranded = [line for path in RECORDINGS for line in _stranded(path, _as_replay_masks)]
    real_agents = {line.split("/")[2] for line in stranded if line.startswith("interop/")}
    assert {path.name for path in REAL_AGENTS} <= real_agents, stranded[:5]
    assert any(line.startswith("scenarios/86b893e/") for line in stranded), "mask set 2"

    # As a new set: the released ones stay as they were, so the corpus replays.
    monkeypatch.setattr(
        masks_module, "MASK_SETS", {**versions, max(versions) + 1: with_extra(max(versions))}
    )
    assert [line for path in RECORDINGS for line in _stranded(path, _as_replay_masks)] == []
    assert Masks(version=max(versions) + 1).text("read the file") == "read {{word}} {{word}}"
