"""The one secret scan (SPEC 10): known key shapes, auth headers and the run's own values
refused, named by file, line, event and rule — never the value; ids and hashes let through;
a deliberate fake key allowed by its sha256; the detector loaded only when a scan runs."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import uuid

import pytest

from agentreel.llm import GenerateOptions, Message
from agentreel.session import (
    RequestHeader,
    SecretFoundError,
    SecretScan,
    build_request_header,
    checked_allowlist,
    encode_record,
    secret_sha256,
)
from agentreel.session.testing import FAKE_CREDENTIAL_RULES, fake_credentials

KEYS = fake_credentials()
SESSION = "82b62b66-2e93-450a-a79a-a22547ba342f"
HEADER = json.dumps({"type": "session", "version": 1, "id": SESSION}) + "\n"


def _chunk(seq: int, chunk: dict[str, object], turn: int = 0) -> str:
    data = {"turn": turn, "step": 0, "chunk": chunk}
    return json.dumps({"type": "assistant/chunk", "seq": seq, "time": 1, "data": data}) + "\n"


def _leaked(text: str) -> list[str]:
    """The kinds whose value appears in ``text`` (names only: a failure prints no key)."""
    return [kind for kind, value in KEYS.items() if value in text]


@pytest.mark.parametrize("kind", sorted(KEYS))
def test_each_known_shape_is_refused_and_named_never_shown(kind: str) -> None:
    log = HEADER + _chunk(1, {"type": "text-delta", "index": 0, "text": f"key: {KEYS[kind]}"})
    (hit,) = SecretScan().scan("session.jsonl", log.encode())
    assert (hit.file, hit.line, hit.rule) == ("session.jsonl", 2, FAKE_CREDENTIAL_RULES[kind])
    assert hit.event == f"session {SESSION}, call turn 0 step 0, event 1 assistant/chunk text-delta"
    assert hit.sha256 == secret_sha256(KEYS[kind])
    assert _leaked(hit.describe()) == []
    with pytest.raises(SecretFoundError) as caught:
        SecretScan().check({"session.jsonl": log.encode()})
    assert _leaked(str(caught.value)) == []
    assert "session.jsonl:2" in str(caught.value)


def test_ids_hashes_and_high_entropy_strings_alone_pass() -> None:
    text = " ".join(
        [
            str(uuid.uuid4()),
            hashlib.sha256(b"x").hexdigest(),
            "call_" + "Zx9Qw2Lm8Nb4Vc7Xz1Ka5Sd3Fg6Hj0Pq",
            "msg_01XFDUDYJgAACzvnptvVoYEL",
            "EqQBCkYIBxgCKkB" + "aZ" * 40,  # a thinking signature's shape
            "the Authorization header",
            "task-0123456789abcdefghijklmnopqrstuvwxyzABCDEF",
        ]
    )
    assert SecretScan().scan("x.jsonl", (json.dumps({"text": text}) + "\n").encode()) == []


def test_auth_headers_and_the_runs_own_values() -> None:
    scan = SecretScan({"abcdefgh-live-0123": "$ACME_TOKEN", "short": "$X"})
    data = b'{"h": "Authorization: Bearer abcdefghijklmnopq"}\nok short\nkey abcdefgh-live-0123\n'
    hits = scan.scan("t.jsonl", data)
    assert [(h.line, h.rule) for h in hits] == [
        (1, "authorization header with a credential"),
        (3, "the value of $ACME_TOKEN (a credential of this run)"),
    ]
    assert hits[1].sha256 is None  # the run's own key is never allowed
    assert scan.value_in("xx abcdefgh-live-0123") == "$ACME_TOKEN"


def test_a_key_split_across_deltas_is_caught_in_its_block_end_and_when_never_ended() -> None:
    key = KEYS["anthropic"]
    pieces = [key[i : i + 7] for i in range(0, len(key), 7)]
    deltas = [
        _chunk(n + 1, {"type": "text-delta", "index": 0, "text": p}) for n, p in enumerate(pieces)
    ]
    assert SecretScan().scan("s.jsonl", (HEADER + "".join(deltas)).encode()) == []  # no key whole
    end = _chunk(
        len(pieces) + 1,
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": key}},
    )
    (hit,) = SecretScan().scan("s.jsonl", (HEADER + "".join(deltas) + end).encode())
    assert hit.line == len(pieces) + 2
    assert "block-end" in hit.event
    cut = _chunk(len(pieces) + 1, {"type": "finish", "reason": "error", "code": "cut"})
    (hit,) = SecretScan().scan("s.jsonl", (HEADER + "".join(deltas) + cut).encode())
    assert (hit.line, hit.rule) == (2, "Anthropic API Key")
    assert "never ended" in hit.event
    assert _leaked(hit.describe()) == []


def test_the_allowlist_lets_exactly_its_digests_through() -> None:
    log = (
        HEADER + _chunk(1, {"type": "text-delta", "index": 0, "text": " ".join(KEYS.values())})
    ).encode()
    everything = SecretScan(allow=[secret_sha256(value) for value in KEYS.values()])
    assert everything.scan("s.jsonl", log) == []
    but_aws = SecretScan(allow=[secret_sha256(v) for k, v in KEYS.items() if k != "aws"])
    assert [hit.rule for hit in but_aws.scan("s.jsonl", log)] == ["AWS Access Key"]


def test_the_allowlist_is_validated_without_echoing_an_entry() -> None:
    digest = secret_sha256("x")
    assert checked_allowlist([digest]) == (digest,)
    with pytest.raises(
        ValueError, match=r"entry 1 \(a string of \d+ characters\) is not a sha256"
    ) as caught:
        checked_allowlist([digest, KEYS["github"]])
    assert _leaked(str(caught.value)) == []
    with pytest.raises(ValueError, match="expected a list"):
        checked_allowlist(digest)
    with pytest.raises(ValueError, match=r"entry 0 \(int\)"):
        checked_allowlist([3])


def test_importing_the_session_package_loads_no_detector() -> None:
    """The agent imports agentreel.session at start-up: the detector (detect-secrets pulls
    in requests) and RE2 load on the first scan only."""
    code = (
        "import sys, agentreel.session\n"
        "print(sorted(m for m in ('detect_secrets', 're2', 'requests') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_first_scan_leaves_the_processs_warnings_alone() -> None:
    """detect-secrets turns on logging.captureWarnings at import: a replay's first drift file
    (redacted by the scan) sent the RequestDriftWarning it then raised to logging, and
    pytest.warns saw none. A fresh process: the detector loads inside the block."""
    code = (
        "import warnings\n"
        "from agentreel.session import SecretScan\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    SecretScan().redact('nothing to hide')\n"
        "    warnings.warn('a drift', UserWarning)\n"
        "print([str(w.message) for w in caught])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['a drift']"
    assert out.stderr == ""


def test_redact_hides_every_refused_value_as_written_and_json_escaped() -> None:
    raw = " and ".join(KEYS.values())
    shown = f"- {json.dumps({'text': raw})}\n+ plain {raw}\n+ token abcdefgh-live-0123\n"
    redacted = SecretScan({"abcdefgh-live-0123": "$ACME_TOKEN"}).redact(shown)
    assert _leaked(redacted) == []
    assert "abcdefgh-live-0123" not in redacted
    assert redacted.count("[redacted: Private Key]") == 2
    assert "[redacted: the value of $ACME_TOKEN (a credential of this run)]" in redacted
    allowed = SecretScan(allow=[secret_sha256(KEYS["aws"])]).redact(shown)
    assert _leaked(allowed) == ["aws"]  # an allowed fake key is shown as it is
    assert SecretScan().redact("nothing here") == "nothing here"


@pytest.mark.parametrize(
    "shape",
    [
        '"x-goog-api-key": "{key}"',
        "GET https://generativelanguage.googleapis.com/v1beta/models?key={key}&pageSize=50",
        "GEMINI_API_KEY={key}",
        "the keys I found:\n{key}\tend",  # after a JSON escape
    ],
)
def test_a_google_api_key_is_refused_as_gemini_sends_it(shape: str) -> None:
    """Gemini's key (``AIza`` + 35) as the header and query Gemini clients send it, or
    echoed as an agent read it from its environment; an ``AIza`` run of another length or
    inside a longer token (a base64 signature) is not a key."""
    key = KEYS["google"]
    line = json.dumps({"text": shape.format(key=key)}) + "\n"
    (hit,) = SecretScan().scan("session.jsonl", line.encode())
    assert (hit.line, hit.rule, hit.sha256) == (1, "Google API Key", secret_sha256(key))
    assert _leaked(hit.describe()) == []
    near_misses = [key[:-1], key + "x", "Zm9v" + key, key[:20] + "+/" + key[20:]]
    text = " ".join(near_misses)
    assert SecretScan().scan("s.jsonl", (json.dumps({"text": text}) + "\n").encode()) == []


def _header_line(seq: int, text: str, *, full_text: bool) -> str:
    """A request header whose message is ``text`` (its preview cut at 80 characters)."""
    options = GenerateOptions(model="m", messages=(Message.user(text),))
    data = build_request_header(options, turn=0, step=0, cwd="/w", full_text=full_text)
    return encode_record(RequestHeader(seq=seq, time=1, data=data)).decode()


@pytest.mark.parametrize("kind", sorted(KEYS))
def test_one_allowed_key_covers_its_start_in_a_cut_preview_and_nothing_else(kind: str) -> None:
    """A key running past a message preview's end is written cut there (the preview keeps
    the recording's format: goldens hold it): the key allowed by its one sha256 covers
    the cut start too, where the log holds it whole; a cut key no allowed key begins
    with is refused, and so is the whole key when it is not allowed."""
    key = KEYS[kind]
    message = json.dumps({"type": "user/message", "seq": 1, "time": 1, "data": {"text": ""}})
    covered = 0
    for lead in (30, 50, 60, 70):
        text = "x" * (lead - 1) + " " + key + " and more after the key"
        for full_text in (False, True):
            user = message.replace('"text": ""', f'"text": {json.dumps(text)}')
            header = _header_line(2, text, full_text=full_text)
            log = (HEADER + user + "\n" + header).encode()
            allowed = SecretScan(allow=[secret_sha256(key)]).scan("session.jsonl", log)
            assert allowed == [], f"{kind} at {lead}: {[h.describe() for h in allowed]}"
            covered += key not in header and any(
                hit.line == 3 for hit in SecretScan().scan("session.jsonl", log)
            )
            # Another key allowed: the whole one and its cut start are both refused.
            other = secret_sha256(KEYS["aws" if kind != "aws" else "github"])
            refused = SecretScan(allow=[other]).scan("session.jsonl", log)
            assert secret_sha256(key) in {hit.sha256 for hit in refused if hit.line == 2}
            cut_here = [hit for hit in SecretScan().scan("session.jsonl", log) if hit.line == 3]
            assert [hit.sha256 for hit in refused if hit.line == 3] == [
                hit.sha256 for hit in cut_here
            ]
            # A cut key with no allowed key written whole is refused (its sha256 is its
            # own); the proxy's header holds the whole text beside its preview.
            alone = SecretScan(allow=[secret_sha256(key)]).scan("s", (HEADER + header).encode())
            assert [hit.sha256 for hit in alone] == [
                hit.sha256 for hit in cut_here if hit.sha256 != secret_sha256(key) and not full_text
            ]
    if len(key) > 60:
        assert covered, f"{kind}: no preview cut the key where the scan sees it"
    # ``check`` over several files: the whole key in one covers its cut start in another.
    text = "x" * 29 + " " + key
    user = message.replace('"text": ""', f'"text": {json.dumps(text)}')
    SecretScan(allow=[secret_sha256(key)]).check(
        {
            "session.jsonl": (HEADER + user + "\n").encode(),
            "golden/session.jsonl": (HEADER + _header_line(2, text, full_text=False)).encode(),
        }
    )
