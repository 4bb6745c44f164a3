"""Fixture helpers without an agent: diffs, cwd tokens, secret scan, environment rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentreel.session import rerecord_command, tokenize_cwd
from agentreel.snapshot_harness import SecretLeakError, unified_diff
from agentreel.snapshot_harness._environment import (
    closed_port,
    offline_proxies,
    record_passthrough,
    secret_values,
)
from agentreel.snapshot_harness._secrets import scan_for_secrets


def test_unified_diff_names_both_sides_and_truncates() -> None:
    expected = b"".join(f"line {i}\n".encode() for i in range(500))
    actual = b"".join(f"LINE {i}\n".encode() for i in range(500))
    diff = unified_diff("transcript.jsonl", expected, actual, max_lines=50)
    lines = diff.splitlines()
    assert lines[0] == "--- golden/transcript.jsonl"
    assert lines[1] == "+++ live/transcript.jsonl"
    assert len(lines) == 51
    assert lines[-1].startswith("[... ")
    assert lines[-1].endswith("more diff lines not shown ...]")


def test_unified_diff_shortens_huge_lines() -> None:
    diff = unified_diff("session.jsonl", b"a\n", b"x" * 5000 + b"\n")
    assert "more characters]" in diff
    assert max(len(line) for line in diff.splitlines()) < 500


def test_tokenize_cwd_replaces_plain_and_escaped_spellings(tmp_path: Path) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    data = (
        f'{{"cwd":"{cwd}","args":"{{\\"path\\":\\"{cwd}/a.txt\\"}}","esc":"'
        + str(cwd).replace("/", "\\/")
        + '"}\n'
    ).encode()
    out = tokenize_cwd(data, cwd).decode()
    assert str(cwd) not in out
    assert out.count("{{cwd}}") == 3


def test_secret_scan_names_file_line_and_variable_never_the_value() -> None:
    secrets = secret_values({"ACME_API_KEY": "sk-0123456789", "PATH": "/usr/bin", "X_TOKEN": "ab"})
    assert secrets == {"sk-0123456789": "ACME_API_KEY"}  # short values are not scanned for
    with pytest.raises(SecretLeakError) as caught:
        scan_for_secrets({"session.jsonl": b"ok\nkey=sk-0123456789\n"}, secrets, "demo")
    message = str(caught.value)
    assert "session.jsonl:2: the value of $ACME_API_KEY" in message
    assert "sk-0123456789" not in message
    assert rerecord_command("demo") in message


def test_secret_scan_catches_auth_headers() -> None:
    with pytest.raises(SecretLeakError, match="authorization header"):
        scan_for_secrets(
            {"transcript.jsonl": b'{"Authorization": "Bearer abcdefghijklmnopqrstuv"}\n'}, {}, "x"
        )
    scan_for_secrets({"transcript.jsonl": b'{"text": "the Authorization header"}\n'}, {}, "x")


def test_offline_proxies_point_at_a_closed_port() -> None:
    import socket

    proxies = offline_proxies()
    port = int(proxies["HTTPS_PROXY"].rsplit(":", 1)[1])
    assert proxies["HTTP_PROXY"] == proxies["ALL_PROXY"] == proxies["https_proxy"]
    assert proxies["NO_PROXY"] == ""
    with socket.socket() as sock, pytest.raises(ConnectionRefusedError):
        sock.connect(("127.0.0.1", port))
    assert closed_port() > 0


def test_record_passthrough_keeps_provider_settings_only() -> None:
    kept = record_passthrough(
        {"OPENAI_API_KEY": "k", "ANTHROPIC_BASE_URL": "u", "HOME": "/h", "GITHUB_TOKEN": "t"}
    )
    assert kept == {"OPENAI_API_KEY": "k", "ANTHROPIC_BASE_URL": "u"}


def _apply(expected: list[str], diff: str) -> list[str]:
    """Apply a unified diff (as ``unified_diff`` renders it) to ``expected``'s lines."""
    result = list(expected)
    offset = 0
    lines = diff.splitlines(keepends=True)[2:]
    position = 0
    while position < len(lines):
        header = lines[position]
        numbers = header.split("@@")[1].split()
        old_start, _, old_count = numbers[0][1:].partition(",")
        count = int(old_count) if old_count else 1
        start = int(old_start) - (1 if count else 0)
        position += 1
        replacement: list[str] = []
        while position < len(lines) and not lines[position].startswith("@@"):
            line = lines[position]
            if line[0] in " +":
                replacement.append(line[1:])
            position += 1
        result[start + offset : start + offset + count] = replacement
        offset += len(replacement) - count
    return result


_LINE = st.sampled_from(["a\n", "b\n", "c\n", '{"x": 1}\n', "\n"])


@settings(max_examples=200, deadline=None)
@given(st.lists(_LINE, max_size=30), st.lists(_LINE, max_size=30))
def test_unified_diff_applies_back_to_the_live_file(expected: list[str], actual: list[str]) -> None:
    diff = unified_diff("f", "".join(expected).encode(), "".join(actual).encode(), 10_000)
    if expected == actual:
        assert diff == ""
        return
    assert _apply(expected, diff) == actual
