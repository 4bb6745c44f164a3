"""``agentreel upgrade`` (SPEC 15): recordings and goldens of an earlier format rewritten to the
current one keylessly, idempotently, per file said; what cannot be upgraded without its text
named with the re-record command."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

from agentreel.session import OLDEST_FORMAT, RECORDING_FORMAT, load_session_log
from agentreel.snapshot_harness._cli import _upgrade_hint, main

ROOT = Path(__file__).resolve().parents[3]
MISTRAL = ROOT / "interop" / "fixtures" / "mistral-vibe-subagent"
WEDNESDAY = "Today's date is {{date}} (Wednesday)."


def _as_recorded_on_a_wednesday(tmp_path: Path) -> Path:
    """mistral-vibe-subagent as agentreel recorded it before time was masked in every
    spelling: its system prompts (logs and goldens) held the weekday after the date."""
    fixtures = tmp_path / "fixtures"
    shutil.copytree(MISTRAL, fixtures / MISTRAL.name)
    for path in (fixtures / MISTRAL.name).rglob("session*.jsonl"):
        text = path.read_text()
        assert "Today's date is {{date}}." in text or "{{date}}" not in text
        path.write_text(text.replace("Today's date is {{date}}.", WEDNESDAY))
    return fixtures


def _upgrade(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["upgrade", *argv], out=out)
    return code, out.getvalue()


def test_upgrade_brings_an_old_recording_to_the_current_format_once(tmp_path: Path) -> None:
    fixtures = _as_recorded_on_a_wednesday(tmp_path)
    scenario = fixtures / MISTRAL.name
    code, output = _upgrade("--fixtures", str(fixtures), MISTRAL.name)
    assert code == 0, output
    # Per file what changed: the stamp, and the system prompts through today's masks.
    assert f"{scenario / 'session.jsonl'}: format stamp: format {RECORDING_FORMAT}" in output
    assert "seq 1: system prompt masked" in output
    assert f"{scenario / 'golden' / 'session.jsonl'}: seq 1: system prompt masked" in output
    # What a recording made today holds: the committed fixture, line for line, and its
    # goldens byte for byte (a golden holds no stamp).
    for path in sorted(scenario.rglob("session*.jsonl")):
        relative = path.relative_to(scenario)
        committed = (MISTRAL / relative).read_bytes()
        assert WEDNESDAY not in path.read_text()
        if relative.parts[0] == "golden":
            assert path.read_bytes() == committed
        else:
            header, *body = path.read_bytes().splitlines()
            assert body == committed.splitlines()[1:]
            stamp = json.loads(header)
            assert (stamp["format"], stamp["masks"]) == (RECORDING_FORMAT, OLDEST_FORMAT)
            assert load_session_log(path).header.format == RECORDING_FORMAT
    # Twice: nothing changes the second time.
    before = {path: path.read_bytes() for path in scenario.rglob("*") if path.is_file()}
    code, output = _upgrade("--fixtures", str(fixtures), MISTRAL.name)
    assert code == 0
    assert "0 file(s) upgraded in 1 recording(s)" in output
    assert before == {path: path.read_bytes() for path in scenario.rglob("*") if path.is_file()}


def test_a_message_the_masks_would_change_stays_as_recorded_with_its_mask_set(
    tmp_path: Path,
) -> None:
    # A message keeps a digest of its masking by the recording's mask set, which replay
    # applies to the live request too (SPEC 15): it stays as it was, nothing is stranded.
    recordings = tmp_path / "tests" / "recordings" / "test_mod" / "test_it"
    recordings.mkdir(parents=True)
    log = recordings / "session.jsonl"
    shutil.copy(MISTRAL / "session.2.jsonl", log)
    lines = log.read_text().splitlines()
    for number, line in enumerate(lines):
        event = json.loads(line)
        if event["type"] == "request/header":
            event["data"]["messages"][0]["preview"] = "Due Fri, 04 Dec 2026 17:03:11 +0000"
            lines[number] = json.dumps(event, separators=(",", ":"))
            break
    log.write_text("\n".join(lines) + "\n")
    code, output = _upgrade(str(tmp_path / "tests" / "recordings"))
    assert code == 0, output
    assert "Re-record" not in output
    assert "Due Fri, 04 Dec 2026 17:03:11 +0000" in log.read_text()
    assert f"{log}: format stamp" in output
    assert load_session_log(log).header.masks == OLDEST_FORMAT


def test_a_failed_replay_of_an_old_recording_says_to_upgrade_it(tmp_path: Path) -> None:
    fixtures = tmp_path / "fixtures"
    shutil.copytree(ROOT / "fixtures" / "plain-turn", fixtures / "plain-turn")
    shutil.copy(ROOT / "fixtures" / "agentreel.toml", fixtures / "agentreel.toml")
    golden = fixtures / "plain-turn" / "golden" / "transcript.jsonl"
    golden.write_text(golden.read_text() + "{}\n")  # a golden the run does not give
    out = io.StringIO()
    assert main(["replay", "--fixtures", str(fixtures), "plain-turn"], out=out) == 1
    expected = (
        f"plain-turn was recorded by an earlier agentreel (recording format {OLDEST_FORMAT}; "
        f"this one writes {RECORDING_FORMAT}): `agentreel upgrade --fixtures {fixtures} "
        "plain-turn`"
    )
    assert expected in out.getvalue()
    # Upgraded, the same failure says nothing of formats.
    assert _upgrade("--fixtures", str(fixtures), "plain-turn")[0] == 0
    out = io.StringIO()
    assert main(["replay", "--fixtures", str(fixtures), "plain-turn"], out=out) == 1
    assert "agentreel upgrade" not in out.getvalue()


CLAUDE_CODE = ROOT / "interop" / "fixtures" / "claude-code-read"
# claude-code-read as agentreel recorded it with mask set 2 (format 2): its WebSearch tool's
# kept JSON held "The current month is December 2026" (mask set 4 masks it), and the logs
# and goldens the tool's digest of that text.
AS_RECORDED_IN_DECEMBER = (
    ("The current month is {{month}}", "The current month is December 2026"),
    ("0ce45576e2d1c815", "a1f32c8a0d0c01c1"),  # the WebSearch tool's digest
    ("4be72fbdda5fc3ed", "54021c1e83144fb7"),  # the request's tools digest
)


def _as_recorded_in_december(tmp_path: Path, *, stamp: str) -> Path:
    """claude-code-read as mask set 2 left it, its header stamped ``stamp``."""
    fixtures = tmp_path / "fixtures"
    scenario = fixtures / CLAUDE_CODE.name
    shutil.copytree(CLAUDE_CODE, scenario)
    for path in scenario.rglob("session*.jsonl"):
        text = path.read_text()
        for now, then in AS_RECORDED_IN_DECEMBER:
            text = text.replace(now, then)
        path.write_text(text.replace('"format":3,"masks":2}', stamp, 1))
    return scenario


def test_a_failed_replay_says_to_upgrade_a_kept_tool_a_newer_mask_set_masks_otherwise(
    tmp_path: Path,
) -> None:
    # Format 3 already, so no format to upgrade: what is out of date is its kept tool.
    scenario = _as_recorded_in_december(tmp_path, stamp='"format":3,"masks":2}')
    hint = _upgrade_hint(scenario, str(scenario.parent))
    assert hint is not None
    assert "recorded with built-in mask set 2" in hint
    assert "WebSearch" in hint
    assert f"`agentreel upgrade --fixtures {scenario.parent} {scenario.name}`" in hint
    assert _upgrade("--fixtures", str(scenario.parent), scenario.name)[0] == 0
    assert _upgrade_hint(scenario, str(scenario.parent)) is None
    # The committed recording, upgraded so, is current.
    assert _upgrade_hint(CLAUDE_CODE, "interop/fixtures") is None


def test_upgrade_masks_a_kept_tool_again_and_gives_the_goldens_its_new_digest(
    tmp_path: Path,
) -> None:
    # Replay masks a tool whose JSON the recording keeps with today's masks, on both sides,
    # and its served logs hold the digest of that: a goldens' digest of the tool as an
    # older mask set left it (the month in it) is one no replay gives in any month.
    scenario = _as_recorded_in_december(tmp_path, stamp='"format":2,"masks":2}')
    fixtures = scenario.parent
    code, output = _upgrade("--fixtures", str(fixtures), CLAUDE_CODE.name)
    assert code == 0, output
    stamp = f"format stamp: format {RECORDING_FORMAT} (masks 2)"
    assert f"{scenario / 'session.jsonl'}: {stamp}; seq 1: tool WebSearch masked" in output
    assert f"{scenario / 'golden' / 'session.jsonl'}: seq 1: tool WebSearch masked" in output
    # What the committed recording holds (upgraded so): logs and goldens byte for byte.
    for path in sorted(scenario.rglob("session*.jsonl")):
        assert path.read_bytes() == (CLAUDE_CODE / path.relative_to(scenario)).read_bytes(), path
    assert _upgrade("--fixtures", str(fixtures), CLAUDE_CODE.name)[1].endswith(
        "0 file(s) upgraded in 1 recording(s)\n"
    )


MCP_TASK = ROOT / "interop" / "fixtures" / "claude-code-mcp-task"


def test_upgrade_brings_an_mcp_recording_of_format_1_to_what_record_writes_today(
    tmp_path: Path,
) -> None:
    """claude-code-mcp-task's MCP recording as MCP format 1 wrote it (no mask-set stamp, the
    tool call's zone as the agent sent it) is upgraded keylessly to the committed file, byte
    for byte; a second upgrade changes nothing."""
    fixtures = tmp_path / "fixtures"
    scenario = fixtures / MCP_TASK.name
    shutil.copytree(MCP_TASK, scenario)
    recording = scenario / "mcp" / "time.0.jsonl"
    header, *body = recording.read_text().splitlines()
    stamp = json.loads(header)
    assert (stamp["mcp_recording"], stamp["masks"]) == (2, 4)
    old = {
        "mcp_recording": 1,
        **{k: v for k, v in stamp.items() if k not in ("mcp_recording", "masks")},
    }
    old_body = [
        line.replace('"target_timezone":"{{timezone}}"', '"target_timezone":"Asia/Tokyo"')
        for line in body
    ]
    assert old_body != body
    recording.write_text("\n".join([json.dumps(old, separators=(",", ":")), *old_body]) + "\n")

    code, output = _upgrade("--fixtures", str(fixtures), MCP_TASK.name)
    assert code == 0, output
    assert (
        f"{recording}: format stamp: MCP recording format 2 (masks 4); 1 client message(s) masked"
        in output
    )
    assert recording.read_bytes() == (MCP_TASK / "mcp" / "time.0.jsonl").read_bytes()
    code, output = _upgrade("--fixtures", str(fixtures), MCP_TASK.name)
    assert code == 0
    assert "0 file(s) upgraded in 1 recording(s)" in output


def test_upgrade_names_an_mcp_recording_made_by_a_newer_agentreel(tmp_path: Path) -> None:
    fixtures = tmp_path / "fixtures"
    scenario = fixtures / MCP_TASK.name
    shutil.copytree(MCP_TASK, scenario)
    recording = scenario / "mcp" / "time.0.jsonl"
    header, *body = recording.read_text().splitlines()
    newer = {**json.loads(header), "mcp_recording": 99}
    recording.write_text("\n".join([json.dumps(newer), *body]) + "\n")
    code, output = _upgrade("--fixtures", str(fixtures), MCP_TASK.name)
    assert code == 1
    assert "time.0.jsonl:1: made by a newer agentreel (MCP recording format 99" in output
