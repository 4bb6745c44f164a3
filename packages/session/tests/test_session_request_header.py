"""build_request_header / diff_request_headers: what replay's drift check compares."""

from __future__ import annotations

import msgspec

from agentreel.llm import GenerateOptions, Message, TextPart, ToolCallPart, ToolResultPart, ToolSpec
from agentreel.session import (
    NO_TEXT_KEPT,
    Normalizer,
    RequestHeader,
    build_request_header,
    diff_request_headers,
    encode_record,
    remasked_tools,
    request_text,
    without_texts,
)
from agentreel.session._codec import EVENT_DECODER

_TOOL = ToolSpec(
    name="read_file",
    description="Read a file",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)
_SESSION = "0b6f1a52-7a47-4f1c-9d55-3c8a0b1f2e3d"


def _options(cwd: str, **changes: object) -> GenerateOptions:
    fields: dict[str, object] = {
        "model": "m1",
        "system": f"Work in {cwd}. Session {_SESSION}.",
        "tools": (_TOOL,),
        "messages": (
            Message.user(f"open {cwd}/a.txt"),
            Message(
                role="assistant",
                content=(ToolCallPart(id="c1", name="read_file", arguments='{"path": "a.txt"}'),),
            ),
            Message(role="tool", content=(ToolResultPart(call_id="c1", content="hello"),)),
        ),
    }
    fields.update(changes)
    return GenerateOptions(**fields)  # type: ignore[arg-type]


def test_header_is_independent_of_cwd_and_uuids() -> None:
    first = build_request_header(_options("/tmp/a"), turn=1, step=2, cwd="/tmp/a")
    second = build_request_header(_options("/srv/b"), turn=1, step=2, cwd="/srv/b")

    assert first == second
    assert first.system == "Work in {{cwd}}. Session {{uuid:1}}."
    assert first.message_count == 3
    assert [m.role for m in first.messages] == ["user", "assistant", "tool"]
    assert first.messages[0].preview == "open {{cwd}}/a.txt"
    assert first.messages[1].preview == 'read_file({"path": "a.txt"})'
    assert first.messages[2].preview == "[result c1] hello"
    assert [t.name for t in first.tools] == ["read_file"]
    assert (first.turn, first.step) == (1, 2)
    assert diff_request_headers(first, second) == []


def test_header_round_trips_through_the_log_codec() -> None:
    data = build_request_header(_options("/w"), turn=1, step=1, cwd="/w")
    line = encode_record(RequestHeader(seq=0, time=0, data=data))

    decoded = EVENT_DECODER.decode(line)
    assert isinstance(decoded, RequestHeader)
    assert decoded.data == data


def test_diff_names_model_system_tools_and_messages() -> None:
    recorded = build_request_header(_options("/w"), turn=1, step=1, cwd="/w")
    live = build_request_header(
        _options(
            "/w",
            model="m2",
            system="Work in /w. Be brief.",
            tools=(
                ToolSpec(name="read_file", description="Read it"),
                ToolSpec(name="ls", description=""),
            ),
            messages=(Message.user("open /w/b.txt"),),
        ),
        turn=3,
        step=4,
        cwd="/w",
    )

    differences = diff_request_headers(recorded, live)

    assert differences[0] == "model: recorded 'm1', live 'm2'"
    assert differences[1].startswith("system prompt differs at character 17: recorded ")
    assert "'Work in {{cwd}}. Session {{uuid:1}}.'" in differences[1]
    assert "'Work in {{cwd}}. Be brief.'" in differences[1]
    assert differences[2].startswith("tool 'read_file': schema or description changed; ")
    # Said as what it is, never as a digest pair nobody can read.
    assert NO_TEXT_KEPT in differences[2]
    assert recorded.tools[0].digest not in differences[2]
    assert differences[3] == "tool 'ls': in the live request, not recorded"
    assert "message count: recorded 3, live 1" in differences
    assert (
        "messages[0] (user): recorded 'open {{cwd}}/a.txt', live 'open {{cwd}}/b.txt'"
        in differences
    )
    assert 'messages[1] (assistant): recorded \'read_file({"path": "a.txt"})\', missing live' in (
        differences
    )


def test_diff_reports_change_beyond_preview_and_tool_order() -> None:
    long_text = "x" * 200
    recorded = build_request_header(
        _options(
            "/w",
            messages=(Message.user(long_text + "a"),),
            tools=(_TOOL, ToolSpec(name="b", description="")),
        ),
        turn=1,
        step=1,
        cwd="/w",
    )
    live = build_request_header(
        _options(
            "/w",
            messages=(Message.user(long_text + "b"),),
            tools=(ToolSpec(name="b", description=""), _TOOL),
        ),
        turn=1,
        step=1,
        cwd="/w",
    )

    differences = diff_request_headers(recorded, live)

    assert (
        differences[0] == "tool order changed: recorded ['read_file', 'b'], live ['b', 'read_file']"
    )
    assert differences[1].startswith("messages[0] (user): content differs beyond the preview")
    assert len(recorded.messages[0].preview) == 80


def test_diff_caps_the_number_of_message_lines() -> None:
    recorded = build_request_header(
        _options("/w", messages=tuple(Message.user(f"m{i}") for i in range(6))),
        turn=1,
        step=1,
        cwd="/w",
    )
    live = build_request_header(
        _options("/w", messages=tuple(Message.user(f"n{i}") for i in range(6))),
        turn=1,
        step=1,
        cwd="/w",
    )

    differences = diff_request_headers(recorded, live)

    assert len(differences) == 4
    assert differences[-1] == "... and 3 more message(s)"


def test_system_prompt_added_or_removed() -> None:
    recorded = build_request_header(_options("/w", system=None), turn=1, step=1, cwd="/w")
    live = build_request_header(
        _options("/w", messages=(Message(role="user", content=(TextPart("hi"),)),)),
        turn=1,
        step=1,
        cwd="/w",
    )

    assert diff_request_headers(recorded, live)[0] == (
        "system prompt: recorded none, live 'Work in {{cwd}}. Session {{uuid:1}}.'"
    )


def test_fast_path_matches_the_normalizer_for_awkward_cwds() -> None:
    for cwd in ("/tmp/ünïcode dir", '/tmp/q"uote', "/", "/tmp/deadbeef12"):
        options = _options(cwd)
        header = build_request_header(options, turn=1, step=1, cwd=cwd)
        expected = Normalizer(cwd).text(options.system or "")
        assert header.system == expected
        if cwd != "/":
            assert header.messages[0].preview == "open {{cwd}}/a.txt"


def test_wire_api_is_written_only_when_known_and_older_lines_still_load() -> None:
    in_process = build_request_header(_options("/w"), turn=0, step=0, cwd="/w")
    line = encode_record(RequestHeader(seq=0, time=0, data=in_process))
    # In process (and in every recording made before the field): no "api" key at all, so
    # committed logs and their goldens are byte-identical.
    assert b'"api"' not in line
    decoded = EVENT_DECODER.decode(line)
    assert isinstance(decoded, RequestHeader)
    assert decoded.data.api is None
    over_http = build_request_header(_options("/w"), turn=0, step=0, cwd="/w", api="messages")
    line = encode_record(RequestHeader(seq=0, time=0, data=over_http))
    assert line.endswith(b',"api":"messages"}}\n')
    assert EVENT_DECODER.decode(line) == RequestHeader(seq=0, time=0, data=over_http)


def test_diff_names_another_wire_api_and_ignores_an_unknown_one() -> None:
    recorded = build_request_header(_options("/w"), turn=0, step=0, cwd="/w", api="chat")
    live = build_request_header(_options("/w"), turn=0, step=0, cwd="/w", api="responses")
    (difference,) = diff_request_headers(recorded, live)
    assert difference.startswith(
        "wire API: recorded POST /v1/chat/completions (OpenAI Chat Completions), live "
        "POST /v1/responses (OpenAI Responses)"
    )
    # An in-process live call (or a recording without the field) says nothing either way.
    in_process = build_request_header(_options("/w"), turn=0, step=0, cwd="/w")
    assert diff_request_headers(recorded, in_process) == []
    assert diff_request_headers(in_process, live) == []


# -- readable drift past the preview (SPEC 13) ---------------------------------------------


def _long(word: str) -> Message:
    lines = [f"row {n}: nothing to see in {'/w'} here" for n in range(300)]
    lines[250] = f"row 250: the answer is {word}"
    return Message.user("\n".join(lines))


def test_full_text_keeps_each_long_message_whole_and_a_short_one_as_its_preview() -> None:
    header = build_request_header(
        _options("/w", messages=(_long("alpha"), Message.user("hi"))),
        turn=0,
        step=0,
        cwd="/w",
        full_text=True,
    )
    long, short = header.messages
    assert long.text is not None
    assert "row 250: the answer is alpha" in long.text
    assert "{{cwd}}" in long.text  # normalized like the preview
    assert long.text.count("\n") == 299  # lines kept, not collapsed as in the preview
    assert short.text is None
    plain = build_request_header(
        _options("/w", messages=(_long("alpha"),)), turn=0, step=0, cwd="/w"
    )
    assert plain.messages[0].text is None
    assert plain.messages[0].digest == long.digest  # the text never changes the digest
    assert without_texts(header).messages[0].text is None


def test_a_drift_past_the_preview_shows_a_few_lines_of_each_side() -> None:
    recorded = build_request_header(
        _options("/w", messages=(_long("alpha"),)), turn=0, step=0, cwd="/w", full_text=True
    )
    live = build_request_header(
        _options("/w", messages=(_long("omega"),)), turn=0, step=0, cwd="/w", full_text=True
    )
    (difference,) = diff_request_headers(
        without_texts(recorded),
        live,
        texts={recorded.messages[0].digest: recorded.messages[0].text or ""},
    )
    lines = difference.splitlines()
    assert lines[0].startswith("messages[0] (user) differs at character ")
    assert lines[0].endswith("(line 251):")
    assert lines[1:] == [
        "    recorded | row 249: nothing to see in {{cwd}} here",
        "             | row 250: the answer is alpha",
        "    live     | row 249: nothing to see in {{cwd}} here",
        "             | row 250: the answer is omega",
    ]
    assert "digest" not in difference
    # Without the recorded text (an older recording) it says so, still without digests.
    (older,) = diff_request_headers(without_texts(recorded), live)
    assert "keeps no whole text" in older
    assert "digest" not in older


def test_request_text_writes_a_whole_request_with_known_texts() -> None:
    header = build_request_header(
        _options("/w", messages=(_long("alpha"), Message.user("hi"))),
        turn=0,
        step=0,
        cwd="/w",
        full_text=True,
    )
    bare = without_texts(header)
    text = request_text(bare, {header.messages[0].digest: header.messages[0].text or ""})
    assert "--- system prompt ---\nWork in {{cwd}}. Session {{uuid:1}}.\n" in text
    assert "row 250: the answer is alpha" in text
    assert "--- messages[1] (user) ---\nhi\n" in text
    assert "preview only" in request_text(bare)


def test_a_message_that_reads_the_same_under_todays_masks_is_said_so() -> None:
    # A recording made with older masks: its whole text, masked again today, equals the
    # live one, but its checksum was taken with the old masking. Not shown as two equal
    # texts, nor as a pair of digests.
    recorded = build_request_header(
        _options("/w", messages=(_long("alpha"),)), turn=0, step=0, cwd="/w", full_text=True
    )
    live = build_request_header(
        _options("/w", messages=(_long("alpha"),)), turn=0, step=0, cwd="/w", full_text=True
    )
    old = msgspec.structs.replace(recorded.messages[0], digest="0123456789abcdef")
    recorded = msgspec.structs.replace(recorded, messages=(old,))
    (difference,) = diff_request_headers(recorded, live)
    assert difference.startswith("messages[0] (user): reads the same on both sides")
    assert NO_TEXT_KEPT in difference
    assert "digest" not in difference
    assert "0123456789abcdef" not in difference


def test_a_tools_whole_json_is_kept_and_masked_again_to_its_digest() -> None:
    # full_text keeps each tool's canonical JSON, whose digest is the tool's; masked again
    # with nothing to mask it stays as it was; with a new mask, text and digests follow it.
    tool = ToolSpec(name="remind", description="Fires on 2026-12-03 at /w/x.")
    header = build_request_header(
        _options("/w", tools=(tool,)), turn=0, step=0, cwd="/w", full_text=True
    )
    (kept,) = header.tools
    assert kept.text is not None
    assert "{{cwd}}/x" in kept.text
    assert without_texts(header).tools[0].text is None
    assert remasked_tools(header, {}, lambda text: text) == header
    masked = remasked_tools(header, {}, lambda text: text.replace("2026-12-03", "{{date}}"))
    (again,) = masked.tools
    assert again.text is not None
    assert "{{date}}" in again.text
    assert again.digest != kept.digest
    assert masked.tools_digest != header.tools_digest
    # A tool kept as a digest only, its text known from an earlier call of the log.
    bare = msgspec.structs.replace(header, tools=(msgspec.structs.replace(kept, text=None),))
    texts = {kept.digest: kept.text}
    (from_log,) = remasked_tools(
        bare, texts, lambda text: text.replace("2026-12-03", "{{date}}")
    ).tools
    assert from_log.digest == again.digest
    assert from_log.text is None
