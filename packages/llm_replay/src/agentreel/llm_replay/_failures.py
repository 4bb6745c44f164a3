"""The replay errors' messages: what happened, to which live caller and recorded script,
and what to do next (the exact re-record command). Binding, streaming and the drift check
raise what these build, so every message has one wording."""

from __future__ import annotations

from pathlib import Path

from agentreel.llm import GenerateOptions, TextPart, ToolResultPart
from agentreel.llm_replay._fixture import RecordedCall, Recording, Script
from agentreel.llm_replay.exceptions import ScriptExhaustedError, UnrecordedSessionError
from agentreel.session import NO_TEXT_KEPT, older_recording_note, rerecord_command

ANONYMOUS = "<anonymous>"


def caller_name(options: GenerateOptions) -> str:
    """The live caller as messages and the report name it (``<anonymous>`` without an id)."""
    return options.session_id or ANONYMOUS


def identity_hint(options: GenerateOptions, *, proxied: bool = False) -> str:
    """For a caller without a session id: the likelier cause than a changed agent, in the
    words of the path the user is on (``proxied``: a model endpoint the agent calls over
    HTTP, which can only send headers; else agentreel's provider layer in process)."""
    if options.session_id is not None:
        return ""
    if proxied:
        return (
            " The request carried no identity, so the proxy binds it by content alone: send "
            "x-agentreel-session-id (and x-agentreel-parent-session-id and "
            "x-agentreel-spawn-index for a subagent), or hand each agent its own "
            "/s/<token>/ base URL; text that changes between runs goes in the scenario's "
            "[model] masks."
        )
    return (
        " The agent sent no session_id: pass GenerateOptions.session_id (and "
        "parent_session_id and spawn_index for a subagent); without it every model call is "
        "one anonymous caller, bound to one recorded script."
    )


def first_message(options: GenerateOptions) -> str:
    """The live caller's first non-system message, shortened: how a caller without an id
    is told apart from the others (a headerless worker by its task)."""
    for message in options.messages:
        if message.role in ("system", "developer"):
            continue
        pieces = [
            part.text if isinstance(part, TextPart) else part.content
            for part in message.content
            if isinstance(part, TextPart | ToolResultPart)
        ]
        text = " ".join(" ".join(pieces).split())
        return repr(text if len(text) <= 80 else text[:79] + "…")
    return "none"


def unrecorded_error(
    options: GenerateOptions,
    reason: str,
    recording: Recording,
    bound: int,
    scenario: str,
    *,
    proxied: bool = False,
    parent_label: str | None = None,
    recorded_spawn_index: int | None = None,
) -> UnrecordedSessionError:
    """A live caller the recording has no script for; ``bound`` scripts are already taken.
    ``parent_label`` names the parent as the recording knows it (its file), and
    ``recorded_spawn_index`` the spawn index record gave a child without one."""
    parent = parent_label or options.parent_session_id or "none"
    spawn = options.spawn_index if options.spawn_index is not None else recorded_spawn_index
    return UnrecordedSessionError(
        f"live session {caller_name(options)} (parent {parent}, "
        f"spawn index {spawn if spawn is not None else 'none'}), "
        f"first message {first_message(options)}, made a model call the recording has no "
        f"script for: {reason}. The recording "
        f"{recording.fixture_dir} holds {len(recording.scripts)} session script(s), "
        f"{f'{bound} already bound' if bound else 'none bound yet'}."
        f"{identity_hint(options, proxied=proxied)}{_UNRECORDED_NEXT}"
        f"{rerecord_command(scenario)}",
        session_id=options.session_id,
        parent_session_id=options.parent_session_id,
        spawn_index=options.spawn_index,
    )


_UNRECORDED_NEXT = (
    " The live run started a session the recording does not contain; if that is intended, "
    "re-record: "
)


# How many lines of differences from the nearest recorded request an error shows: the
# nearest may be another agent's request altogether (every tool a line).
_NEAREST_LINES = 8


def with_live_request(
    error: UnrecordedSessionError,
    files: tuple[Path, Path | None] | None,
    nearest: tuple[Script, RecordedCall, list[str]] | None,
) -> UnrecordedSessionError:
    """``error`` with what the live caller sent (SPEC 13): ``files``, the live caller's full
    masked request and the nearest recorded one as a replay wrote them, named before what
    to do next; then, on the lines after, how the live request differs from that nearest
    one (the script and call it is). Without them a headerless caller's failure says only
    that nothing matched."""
    said = ""
    if files is not None:
        said = f" Its full masked request: {files[0]}"
        said += f"; the nearest recorded one: {files[1]}." if files[1] is not None else "."
    shown_after = ""
    if nearest is None and error.delegation is None:
        said += " The recording has no request left to compare it with."
    if nearest is not None:
        # After the first line (what failed and the command to run, as every cause's first
        # line is read), the lines showing what differs.
        script, call, differences = nearest
        shown: list[str] = []
        lines = 0
        for difference in differences:
            lines += difference.count("\n") + 1
            if lines > _NEAREST_LINES and shown:
                more = len(differences) - len(shown)
                shown.append(
                    f"… and {more} more difference(s)" + (" (both files)" if files else "")
                )
                break
            shown.append(difference)
        listing = "\n  ".join(shown) if shown else "nothing (the same request)"
        shown_after = (
            f"\nThe nearest recorded request (call {call.number} of {script.label}) differs "
            f"from it in:\n  {listing}"
        )
    message = str(error)
    at = message.rfind(_UNRECORDED_NEXT)
    at = at if at >= 0 else len(message)
    result = UnrecordedSessionError(
        message[:at] + said + message[at:] + shown_after,
        session_id=error.session_id,
        parent_session_id=error.parent_session_id,
        spawn_index=error.spawn_index,
    )
    result.delegation = error.delegation
    return result


def exhausted_error(
    options: GenerateOptions, script: Script, call: int, scenario: str, *, proxied: bool = False
) -> ScriptExhaustedError:
    """The caller bound to ``script`` asked for call number ``call``, past its end."""
    recorded = len(script.calls)
    return ScriptExhaustedError(
        f"live session {caller_name(options)}, bound to {script.label}, asked "
        f"for model call {call} but the recording holds only {recorded} call(s) for it."
        f"{identity_hint(options, proxied=proxied)} The live run made more model calls than "
        "the recorded one (an extra step or turn); if that is intended, re-record: "
        f"{rerecord_command(scenario)}",
        session_id=options.session_id,
        call=call,
        recorded_calls=recorded,
    )


def drift_message(
    options: GenerateOptions,
    script: Script,
    call: RecordedCall,
    differences: list[str],
    scenario: str,
    files: tuple[Path, Path] | None = None,
    *,
    proxied: bool = False,
    parent: Script | None = None,
) -> str:
    """The live request of ``call`` differs from its recorded ``request/header``;
    ``files``: the full masked recorded and live requests, written beside the run;
    ``parent``: the script's recorded parent (a child's drift names both)."""
    listing = "\n  ".join(differences)
    written = (
        f"  full masked requests: {files[0]} (recorded), {files[1]} (live)\n"
        if files is not None
        else ""
    )
    spawn = script.header.spawn_index
    lineage = (
        f", {'child ' + str(spawn) if spawn is not None else 'a side lane'} of {parent.label}"
        if parent is not None
        else ""
    )
    head = (
        f"live session {caller_name(options)}, call {call.number} of "
        f"{script.label}{lineage} (recorded turn {call.turn}, step {call.step}): the request "
        f"differs from the recorded request/header:\n  {listing}\n{written}"
    )
    # A recording of an earlier format or mask set that kept no text of what differs:
    # say which agentreel made it and the one fix, not that the agent changed.
    older = (
        older_recording_note(
            script.path.name, script.header.format, script.header.masks, rerecord_command(scenario)
        )
        if any(NO_TEXT_KEPT in line for line in differences)
        else None
    )
    if older is not None:
        return head + older
    return (
        f"{head}{identity_hint(options, proxied=proxied).lstrip()}"
        f"{' ' if options.session_id is None else ''}"
        "The agent now sends a different request (prompt, tools or history changed). "
        f"If that is intended, re-record: {rerecord_command(scenario)}"
    )
