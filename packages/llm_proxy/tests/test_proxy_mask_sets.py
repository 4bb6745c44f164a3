"""Versioned built-in mask sets (SPEC 15): every set agentreel ever applied is kept, frozen,
so a recording that keeps digests of texts masked with an older set is compared with the
live request masked with that same set. A released set never changes: its rules are pinned
here by fingerprint, and a new or better mask is a new set."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import (
    MASK_SETS,
    Masks,
    ProxyConfigError,
    mask_set_fingerprint,
    start_proxy,
)
from agentreel.llm_replay import read_report
from agentreel.session import MASKS_HISTORY, MASKS_VERSION

# Never edit a released set's line: a change here strands every recording made with it.
# A new set adds its line (and MASKS_VERSION, MASKS_HISTORY in agentreel.session).
RELEASED = {
    1: "b5cf001b77c28a51",
    2: "496e84adafd52c27",
    3: "ff1687eb5ea06075",
    4: "f184c8c1e649e5b2",
}


@pytest.mark.parametrize("version", sorted(RELEASED))
def test_a_released_mask_set_never_changes(version: int) -> None:
    assert mask_set_fingerprint(version) == RELEASED[version], (
        f"built-in mask set {version} changed: recordings made with it keep digests of "
        "texts masked with its rules. Leave it as it was and add the change as mask set "
        f"{MASKS_VERSION + 1} (MASK_SETS, MASKS_VERSION, MASKS_HISTORY, this table)"
    )


def test_every_mask_set_is_kept_and_described() -> None:
    assert sorted(MASK_SETS) == list(range(1, MASKS_VERSION + 1)) == sorted(RELEASED)
    assert sorted(MASKS_HISTORY) == sorted(MASK_SETS)


def test_set_1_leaves_what_set_2_masks_and_the_default_is_the_newest() -> None:
    text = "Today is Friday, 4 December 2026 at 17:03:11 UTC+14. See Etc/GMT2"
    # Set 1's IANA rule stops at a digit; set 2's takes the whole zone name.
    assert Masks(version=1).text(text) == (
        "Today is Friday, 4 December 2026 at 17:03:11 UTC+14. See {{timezone}}2"
    )
    assert (
        Masks().text(text)
        == Masks(version=MASKS_VERSION).text(text)
        == ("Today is {{date}}. See {{timezone}}")
    )
    # What both sets mask, they mask alike.
    assert Masks(version=1).text("2026-12-04 on Linux 6.1.0") == "{{date}} on {{os-version}}"


def test_set_3_masks_an_iana_name_holding_an_offset_whole() -> None:
    # Etc/GMT+12 is the real zone name of UTC-12: set 2 masked its offset only, so a
    # recording made in UTC read differently from one made there.
    text = '{"target_timezone":"Etc/GMT+12"} and UTC+14'
    assert Masks(version=2).text(text) == '{"target_timezone":"Etc/{{timezone}}"} and {{timezone}}'
    assert Masks(version=3).text(text) == '{"target_timezone":"{{timezone}}"} and {{timezone}}'


# Claude Code 0.23.1's WebSearch description (CLI 2.1.83; the same sentence in CLI 2.1.318
# and Qwen Code): the current month, next to a knowledge cutoff that is no machine fact.
WEB_SEARCH = (
    "Assistant knowledge cutoff is August 2025.\nIMPORTANT - Use the correct year in search "
    "queries:\n  - The current month is December 2026. You MUST use this year when searching"
)


def test_set_4_masks_now_said_in_prose_and_set_3_leaves_it() -> None:
    assert Masks(version=3).text(WEB_SEARCH) == WEB_SEARCH
    assert Masks(version=4).text(WEB_SEARCH) == WEB_SEARCH.replace("December 2026", "{{month}}")
    for said, masked in (
        ("The current month is February 2028.", "The current month is {{month}}."),
        ("current month: Jan 2027", "current month: {{month}}"),
        ("It is now March 2027 and", "It is now {{month}} and"),
        ("The current year is 2027.", "The current year is {{year}}."),
        ("Today is Monday, January 4.", "Today is {{date}}."),
        ("today\u2019s date: 29 Feb", "today\u2019s date: {{date}}"),
        (
            "The current date is Dec 31 (ask again later)",
            "The current date is {{date}} (ask again later)",
        ),
        # A whole date was already one; a weekday alone stays the weekday rule's.
        ("Today is Friday, December 4, 2026.", "Today is {{date}}."),
        ("Today is Friday.", "Today is {{weekday}}."),
        # mcp-server-time's convert_time: the weekday of the date of the call.
        (
            '"datetime":"{{date}}","day_of_week":"Friday"',
            '"datetime":"{{date}}","day_of_week":"{{weekday}}"',
        ),
        ('\\"day_of_week\\": \\"Sunday\\"', '\\"day_of_week\\": \\"{{weekday}}\\"'),
    ):
        assert Masks(version=4).text(said) == masked, said
        assert Masks(version=4).text(masked) == masked  # idempotent
    # Only after words naming now: a month, year or day elsewhere in prose is text.
    for prose in (
        "In May we ship the 2026 roadmap; this month we plan.",
        "the year 2026 was long; released in December 2026",
        "freeze after Thursday, December 10",
        "every weekday: Monday to Friday",
    ):
        assert Masks(version=4).text(prose) == prose


def test_an_unknown_mask_set_names_what_this_agentreel_knows() -> None:
    with pytest.raises(ProxyConfigError, match=r"mask set 9 is unknown .* knows 1, 2, 3, 4"):
        Masks(version=9)


@pytest.mark.asyncio
async def test_a_recording_mixing_mask_sets_compares_each_log_as_it_was_made(
    tmp_path: Path,
) -> None:
    """A ``--drifted`` merge keeps old logs byte for byte beside new ones, so one recording
    may hold a log made with mask set 3 keeping digests only (recorded before format 3,
    upgraded) and a new log of today's set keeping every message's JSON. The set is read
    per log, as each is stamped: the new log's message that set 4 masks and set 3 does
    not ('The current month is December 2026') compares equal, and so does the old log's
    message, compared through set 3."""
    old, new = "Say hello to the team.", "The current month is December 2026. Plan it."
    assert Masks(version=3).text(new) != Masks().text(new)
    fixture = tmp_path / "fixture"
    with StubServer.from_toml('[[rule]]\ntext = "ok"\n') as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            await _ask(proxy.openai_base_url, old, new)
    assert proxy.errors == []
    logs = {path: path.read_text() for path in sorted(fixture.glob("session*.jsonl"))}
    (made_before,) = [path for path, text in logs.items() if old in text]
    lines = []
    for line in logs[made_before].splitlines():
        record = json.loads(line)
        if record["type"] == "session":
            record["masks"] = 3  # made with set 3 ...
        elif record["type"] == "request/header":
            for message in record["data"]["messages"]:
                message.pop("json", None)  # ... before logs kept a message's JSON
        lines.append(json.dumps(record, separators=(",", ":")))
    made_before.write_text("\n".join(lines) + "\n")
    async with start_proxy("replay", fixture=fixture, report=tmp_path / "report.json") as replayed:
        await _ask(replayed.openai_base_url, old, new)
    assert replayed.errors == []
    report = read_report(tmp_path / "report.json")
    assert report.errors == []
    assert [script.consumed for script in report.scripts] == [1, 1]


async def _ask(base_url: str, *questions: str) -> None:
    """One conversation (a lane, a log) per question, each named as a session."""
    client = openai.AsyncOpenAI(base_url=base_url, api_key="test-dummy", max_retries=0)
    for number, question in enumerate(questions):
        answer = await client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": question}],
            extra_headers={"x-agentreel-session-id": f"s{number}"},
        )
        assert answer.choices[0].message.content == "ok"
    await client.close()
