"""What ``record`` proves before it writes (issue 39): the one owner of record's checks.

Three kinds, in the order a recording meets them:

- **Refusals** of a run that cannot be right (``refusals``, ``run_failure``): an upstream
  error the scenario did not ask for (the stub model server's no-rule answer, named with
  the request and the rule closest to it); a delegation the scenario's rules asked for
  (``call_subagent``) whose child never called the model, or a ``call_subagent`` rule that
  answered nothing; an agent that printed a traceback or a crash on stderr and exited 0
  (a warning, an error with ``[record] strict = true``).
- **A schedule that can be held** (``schedule_problems``): a child's later call that
  started inside its parent's still-open call is an order the recorded schedule cannot
  enforce at replay; record records again (``[record] retries``) or fails naming it.
- **Trial replays** (``trial_env``; run by ``_record_trials``): the new recording replayed
  ``[record] trials`` times, each under another time zone, user and host name (HOME is a
  fresh folder on every run already), the second on another day too (``trial_day``,
  libfaketime), with the goldens compared to the first replay's;
  a difference is named value by value with the smallest mask that covers it
  (``propose_masks``), printed as TOML lines ``--accept-masks`` writes into
  ``scenario.toml``.

The stub servers a record run starts report themselves here (``upstream_started``) while
``watching_upstream`` is open, so the checks read what the upstream answered without the
run's plumbing carrying it.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import dataclasses
import difflib
import json
import os
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentreel.session import KeyMask, Mask, RequestHeader, SessionLog
from agentreel.snapshot_harness._scenario import RecordConfig, Scenario
from agentreel.snapshot_harness.exceptions import RecordError

if TYPE_CHECKING:
    from agentreel.llm.stub import StubServer

DEFAULT_TRIALS = 3
"""Trial replays after a recording when neither ``--trials`` nor ``[record] trials`` says."""
DEFAULT_RETRIES = 2
"""Recordings again when the recorded order cannot be held (``[record] retries``)."""
TRIALS_ENV = "AGENTREEL_RECORD_TRIALS"
"""Overrides ``[record] trials`` for every record in the process (the test suite sets 0)."""

_WATCHED: contextvars.ContextVar[list[StubServer] | None] = contextvars.ContextVar(
    "agentreel_record_upstream", default=None
)


@contextlib.contextmanager
def watching_upstream() -> Iterator[list[StubServer]]:
    """The stub servers record runs start inside the block, to read their requests after."""
    seen: list[StubServer] = []
    token = _WATCHED.set(seen)
    try:
        yield seen
    finally:
        _WATCHED.reset(token)


def upstream_started(server: StubServer) -> None:
    """Called by the record backends with each stub server they start."""
    seen = _WATCHED.get()
    if seen is not None:
        seen.append(server)


def trials_wanted(config: RecordConfig) -> int:
    """How many trial replays: ``AGENTREEL_RECORD_TRIALS``, else the config's (``--trials``
    or ``[record] trials``), else ``DEFAULT_TRIALS``."""
    value = os.environ.get(TRIALS_ENV, "").strip()
    if value:
        if not value.isdigit():
            raise RecordError(f"{TRIALS_ENV}={value!r} is not a count of trial replays (0, 1, …)")
        return int(value)
    return DEFAULT_TRIALS if config.trials is None else config.trials


def add_proof_options(parser: argparse.ArgumentParser) -> None:
    """``--trials N`` and ``--accept-masks`` (record only), for every record command."""
    parser.add_argument(
        "--trials",
        type=int,
        metavar="N",
        help=f"record and refresh: replay N more times under perturbations (another time "
        f"zone, user, host) before writing; 0 turns them off (default: [record] "
        f"trials, else {DEFAULT_TRIALS}; {TRIALS_ENV} overrides both)",
    )
    parser.add_argument(
        "--twice",
        action="store_true",
        help="record only: record a second time through the same upstream and compare the "
        "two runs lane by lane and golden by golden (volatile values named with masks)",
    )
    parser.add_argument(
        "--accept-masks",
        action="store_true",
        help="record only: write the masks the trial replays found into scenario.toml "
        "and record again (without it they are printed, never added)",
    )


def proof_options(
    record: RecordConfig | None, scenario: Scenario, args: argparse.Namespace
) -> RecordConfig | None:
    """``record`` (else the scenario's ``[record]``) with ``--trials`` / ``--accept-masks``."""
    if args.trials is None and not args.accept_masks and not args.twice:
        return record
    if args.trials is not None and args.trials < 0:
        raise RecordError(f"--trials {args.trials}: give a count of trial replays (0, 1, …)")
    config = record or scenario.record
    trials = config.trials if args.trials is None else args.trials
    return dataclasses.replace(
        config, trials=trials, accept_masks=bool(args.accept_masks), twice=bool(args.twice)
    )


# -- refusals ------------------------------------------------------------------------------


def _no_rule(stubs: Sequence[StubServer]) -> list[str]:
    return [
        request.message or f"request #{request.index}: no rule matched"
        for server in stubs
        for request in server.requests
        if request.outcome == "no-rule"
    ]


def _refusal(name: str, problems: list[str], what: str) -> RecordError:
    listed = "\n".join(f"- {problem}" for problem in problems)
    return RecordError(
        f"{name}: not recorded, nothing was written (the committed recording is "
        f"untouched): {what}\n{listed}"
    )


def run_failure(name: str, stubs: Sequence[StubServer]) -> RecordError | None:
    """A record run that failed: the no-rule answers that explain it, if there were any."""
    unmatched = _no_rule(stubs)
    if not unmatched:
        return None
    return _refusal(name, unmatched, _NO_RULE_WHAT)


_NO_RULE_WHAT = (
    "the stub model server answered a request no rule of the scenario matches with an "
    "error, which the agent took in as the model's answer. Add or fix the rule named:"
)


def refusals(
    name: str,
    logs: Sequence[SessionLog],
    stderr: str,
    stubs: Sequence[StubServer],
    *,
    strict: bool,
    strict_where: str,
) -> list[str]:
    """Raise ``RecordError`` for a recording that cannot be right; the warnings that stand.

    Unasked upstream errors and missing children are always errors; a crash on stderr of
    an agent that exited 0 is a warning unless ``strict`` (``[record] strict = true``,
    which ``strict_where`` names the place of)."""
    unmatched = _no_rule(stubs)
    if unmatched:
        raise _refusal(name, unmatched, _NO_RULE_WHAT)
    missing = _missing_children(logs, stubs)
    if missing:
        raise _refusal(
            name,
            missing,
            "the scenario's rules asked for a subagent the recording does not have, so "
            "this would be a subagent scenario with no subagent:",
        )
    crash = crash_on_stderr(stderr)
    if crash is None:
        return []
    message = (
        f"{name}: the agent exited 0 but printed {crash} on stderr during the "
        "record run; the recording may hold what it did after failing. Read its stderr "
        "(agentreel record --keep-runs DIR keeps it)"
    )
    if strict:
        raise RecordError(
            message + f"; nothing was written ([record] strict = true in {strict_where})"
        )
    return [message + "; `[record] strict = true` makes this an error"]


def recording_refusal(
    name: str, recording: Path, stubs: Sequence[StubServer], schedule: str
) -> str | None:
    """For a recording made outside a scenario run (the pytest fixture's record modes,
    ``agentreel proxy record``): why it must not be written, or ``None``."""
    from agentreel.session import SessionError, load_session_log, recording_names

    try:
        logs = [load_session_log(recording / file) for file in recording_names(recording)]
    except (OSError, SessionError):
        logs = []
    try:
        refusals(name, logs, "", stubs, strict=False, strict_where="")
    except RecordError as error:
        return str(error)
    unheld = schedule_problems(recording, schedule)
    if unheld:
        return (
            f"{name}: not recorded, nothing was written: the recording holds an order of "
            "calls the recorded schedule cannot enforce at replay (a child's call starting "
            "inside its parent's still-open call); record again:\n"
            + "\n".join(f"- {order}" for order in unheld)
        )
    return None


def _missing_children(logs: Sequence[SessionLog], stubs: Sequence[StubServer]) -> list[str]:
    children = sum(
        1
        for log in logs
        if log.header.parent_session is not None
        and log.header.spawn_index is not None
        and any(isinstance(event, RequestHeader) for event in log.own_events)
    )
    problems: list[str] = []
    delegating = [
        (server, request) for server in stubs for request in server.requests if request.delegations
    ]
    asked = sum(len(request.delegations) for _, request in delegating)
    if asked > children:
        calls = "; ".join(
            f"request #{request.index} answered by {request.rule} with a call of "
            f"{', '.join(request.delegations)}"
            for _, request in delegating
        )
        problems.append(
            f"{asked} delegation(s) answered ({calls}) but only {children} child session(s) "
            "called the model: the agent ran the tool without starting a subagent that "
            "talks to the model. Check that the tool call_subagent picked is the agent's "
            'subagent tool (`tool = "..."` in the rule\'s call_subagent)'
        )
    for server in stubs:
        used = {request.rule for request in server.requests}
        for position, rule in enumerate(server.rules.rules):
            label = server.rules.describe(position)
            if rule.subagent_calls and label not in used:
                match = {k: v for k, v in _fields(rule.match).items() if v is not None}
                problems.append(
                    f"{label} of {server.rules.source} asks for a subagent (call_subagent) "
                    f"but answered no request, so the child it starts was never started: "
                    f"its match {json.dumps(match, ensure_ascii=False)} fit none of the "
                    f"{len(server.requests)} request(s) (another rule answered them). Fix "
                    "its match (tool_offered_regex sees namespaced tools as ns.name)"
                )
    return problems


def _fields(value: Any) -> dict[str, Any]:
    import msgspec

    return msgspec.structs.asdict(value)


_CRASHES = (
    ("a Python traceback", re.compile(r"^Traceback \(most recent call last\):", re.M)),
    ("a Rust panic", re.compile(r"thread '[^']*' panicked at")),
    (
        "an unhandled promise rejection",
        re.compile(r"Unhandled(?:Promise)?Rejection|unhandled rejection", re.I),
    ),
    (
        "an uncaught exception",
        re.compile(r"^Uncaught \w*(?:Error|Exception)|uncaughtException", re.M),
    ),
    ("a fatal error", re.compile(r"^(?:FATAL ERROR|fatal error|Segmentation fault|panic:)", re.M)),
)


def crash_on_stderr(stderr: str) -> str | None:
    """What crash ``stderr`` shows, with its first line (``a Python traceback ("...")``)."""
    for what, pattern in _CRASHES:
        found = pattern.search(stderr)
        if found is not None:
            lines = stderr[found.start() :].splitlines()
            last = next(
                (line.strip() for line in reversed(lines[:40]) if line and not line[0].isspace()),
                lines[0] if lines else "",
            )
            return f"{what} ({last[:200]!r})"
    return None


# -- the schedule -----------------------------------------------------------------------------


def schedule_problems(fixture_dir: Path, schedule: str) -> list[str]:
    """Orders in the recording at ``fixture_dir`` its replay on the recorded schedule cannot
    be trusted to hold (``agentreel.llm_replay.unheld_orders``); none to check when it
    replays on the free schedule (``schedule``: the scenario's ``[replay] schedule``)."""
    from agentreel.llm_replay import ReplayError, load_recording, unheld_orders

    if schedule != "recorded":
        return []
    try:
        recording = load_recording(fixture_dir)
    except ReplayError:
        return []  # the trial replay names a broken recording
    return unheld_orders(recording.scripts)


# -- trial replays ----------------------------------------------------------------------------

_PERTURBATIONS: tuple[Mapping[str, str], ...] = (
    {
        "TZ": "Pacific/Kiritimati",
        "USER": "reel-trial-a",
        "LOGNAME": "reel-trial-a",
        "HOSTNAME": "trial-host-a",
    },
    {
        "TZ": "Etc/GMT+12",
        "USER": "reel-trial-b",
        "LOGNAME": "reel-trial-b",
        "HOSTNAME": "trial-host-b.example",
    },
    {"TZ": "America/St_Johns", "USER": "trial", "LOGNAME": "trial", "HOSTNAME": "t"},
)


DATE_TRIAL = 1
"""The trial (from 0) whose agent runs on another day: libfaketime preloaded into its
process (``_faketime``), its clock started ``_DAYS_ON`` days from now and running on."""
_DAYS_ON = 403
"""Another year, month, date and weekday (403 is no multiple of 7)."""


def trial_day(now: datetime | None = None) -> str:
    """The moment the date trial's agent starts its clock at: ``_DAYS_ON`` days after
    ``now`` (the real moment), time of day kept."""
    moment = (now or datetime.now(UTC)) + timedelta(days=_DAYS_ON)
    return f"{moment:%Y-%m-%d %H:%M:%S}"


def trial_env(number: int, pinned: Collection[str] = ()) -> dict[str, str]:
    """The environment trial ``number`` (from 0) adds to the scenario's: another time zone,
    user and host name — but never a variable in ``pinned``, the ones the scenario sets
    itself (``[env]``, ``[model.env]``): those are the same on every machine, so another
    value is no other machine's (and "set it in [env]" is how a trial's failure is mended)."""
    chosen = _PERTURBATIONS[number % len(_PERTURBATIONS)]
    return {key: value for key, value in chosen.items() if key not in pinned}


def pinned_variables(scenario: Scenario) -> frozenset[str]:
    """The variables ``scenario`` sets for its agent, which no trial perturbs."""
    return frozenset({*scenario.env, *scenario.model.env})


def describe_trial(env: Mapping[str, str], pinned: Collection[str] = ()) -> str:
    said = ", ".join(f"{key}={value}" for key, value in env.items())
    kept = sorted(key for key in pinned if any(key in chosen for chosen in _PERTURBATIONS))
    if kept:
        said += f"; {', '.join(kept)} as the scenario sets {'them' if len(kept) > 1 else 'it'}"
    return said


# -- masks found, not guessed -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Proposal:
    """One rule for one volatile value: where it sits, what it was, the TOML to add."""

    where: str
    values: tuple[str, str]
    mask: Mask | KeyMask

    @property
    def toml(self) -> str:
        if isinstance(self.mask, KeyMask):
            body = f"key = {json.dumps(self.mask.key)}"
        else:
            body = f"regex = {_toml_string(self.mask.regex)}"
        return f"[[golden_masks]]\n{body}\ntoken = {json.dumps(self.mask.token)}"


@dataclass(frozen=True, slots=True)
class TranscriptRule:
    """An order rule for the transcript: ``key`` (``unordered`` or ``merge``) set to
    ``kinds`` (the scenario's own, then the new), found when the goldens differ only in the
    order of some updates, or in how one thing's updates are chunked."""

    key: str
    kinds: tuple[str, ...]
    new: tuple[str, ...]

    @property
    def toml(self) -> str:
        return f"[transcript]\n{self.key} = {json.dumps(list(self.kinds))}"

    @property
    def said(self) -> str:
        how = "in another order" if self.key == "unordered" else "chunked otherwise"
        return f"- transcript.jsonl: {', '.join(self.new)} updates {how} in one run than another"


@dataclass(frozen=True, slots=True)
class CaptureRule:
    """A value the agent sends in a request that the answer carries back (a proxied
    scenario): a ``[[model.captures]]`` table, so a replay serves the live value."""

    where: str
    values: tuple[str, str]
    regex: str
    token: str

    @property
    def toml(self) -> str:
        regex = _toml_string(self.regex)
        return f"[[model.captures]]\nregex = {regex}\ntoken = {json.dumps(self.token)}"

    @property
    def said(self) -> str:
        a, b = self.values
        return (
            f"- {self.where}: {a!r} in one run, {b!r} in another, sent in a request and "
            "carried back in its answer"
        )


def _toml_string(text: str) -> str:
    if "'" not in text and "\n" not in text:
        return f"'{text}'"  # a literal string: a regex's backslashes stay as written
    return json.dumps(text)


_WORD = re.compile(r"[A-Za-z0-9_.\-]+")
_KEY_BEFORE = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)"\s*:\s*"?$')


def propose_masks(
    first: Mapping[str, bytes], other: Mapping[str, bytes], existing: Sequence[Mask | KeyMask]
) -> list[Proposal]:
    """The smallest masks that make ``other``'s goldens ``first``'s, value by value: a key
    mask where a JSON key's whole value changed, else a token regex (``agent-[0-9a-f]{16}``,
    ``(?<=count: )[0-9]+``). Empty when a difference is no single value (a reordering)."""
    proposals: dict[str, Proposal] = {}
    tokens = {mask.token for mask in existing}
    for name in first:
        if name not in other or first[name] == other[name]:
            continue
        a_lines = first[name].decode("utf-8", "replace").splitlines()
        b_lines = other[name].decode("utf-8", "replace").splitlines()
        matcher = difflib.SequenceMatcher(None, a_lines, b_lines, autojunk=False)
        for tag, a0, a1, b0, b1 in matcher.get_opcodes():
            if tag != "replace" or a1 - a0 != b1 - b0:
                continue
            for offset in range(a1 - a0):
                for proposal in _line_proposals(
                    f"{name} line {a0 + offset + 1}", a_lines[a0 + offset], b_lines[b0 + offset]
                ):
                    key = proposal.toml.split("\ntoken")[0]
                    if key not in proposals and proposal.mask.token not in tokens:
                        proposals[key] = proposal
                        tokens.add(proposal.mask.token)
    return list(proposals.values())


def _line_proposals(where: str, a: str, b: str) -> list[Proposal]:
    found: list[Proposal] = []
    chars = difflib.SequenceMatcher(None, a, b, autojunk=False)
    seen_spans: list[tuple[int, int]] = []
    for tag, a0, a1, b0, b1 in chars.get_opcodes():
        if tag == "equal":
            continue
        # Grow the change to whole words on both sides.
        start_a, end_a = _word_around(a, a0, a1)
        if any(s <= start_a < e for s, e in seen_spans):
            continue
        seen_spans.append((start_a, end_a))
        start_b, end_b = _word_around(b, b0, b1)
        value_a, value_b = a[start_a:end_a], b[start_b:end_b]
        if not value_a or not value_b:
            continue
        key = _KEY_BEFORE.search(a[:start_a])
        after = a[end_a : end_a + 1]
        if key is not None and after in ('"', ",", "}", "") and _whole_value(a, start_a, end_a):
            token = _token_name(key.group(1))
            found.append(Proposal(where, (value_a, value_b), KeyMask.checked(key.group(1), token)))
            continue
        found.append(
            Proposal(where, (value_a, value_b), _regex_mask(a[:start_a], value_a, value_b))
        )
    return found


def _whole_value(line: str, start: int, end: int) -> bool:
    before = line[start - 1 : start]
    after = line[end : end + 1]
    quoted = before == '"' and after == '"'
    bare = before in (":", " ") and after in (",", "}", "")
    return quoted or bare


def _word_around(text: str, start: int, end: int) -> tuple[int, int]:
    while start > 0 and _WORD.fullmatch(text[start - 1]):
        start -= 1
    while end < len(text) and _WORD.fullmatch(text[end]):
        end += 1
    return start, end


def _token_name(text: str) -> str:
    token = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", text).lower()
    token = re.sub(r"[^a-z0-9]+", "-", token).strip("-")
    return token or "volatile"


def _class_of(a: str, b: str) -> str:
    both = a + b
    if both.isdigit():
        return "[0-9]"
    if re.fullmatch(r"[0-9a-f]+", both):
        return "[0-9a-f]"
    if re.fullmatch(r"[0-9A-F]+", both):
        return "[0-9A-F]"
    if re.fullmatch(r"[0-9A-Za-z]+", both):
        return "[0-9A-Za-z]"
    return r"[0-9A-Za-z_\-]"


def _regex_mask(before: str, a: str, b: str) -> Mask:
    """A token regex for one word that changed: its common literal head kept (up to its
    last separator), the rest a character class of the right length; a bare number gets
    the word before it as a look-behind, so the regex does not mask every number."""
    head = a[
        : next(
            (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
        )
    ]
    cut = max(head.rfind(ch) for ch in "-_.:") + 1 if head else 0
    if cut == 0 and re.fullmatch(r"[A-Za-z]+", head):
        cut = len(head) if not (a[len(head) :] + b[len(head) :]).isalpha() else 0
    literal, rest_a, rest_b = a[:cut], a[cut:], b[cut:]
    width = (
        f"{{{len(rest_a)}}}"
        if len(rest_a) == len(rest_b)
        else f"{{{min(len(rest_a), len(rest_b))},{max(len(rest_a), len(rest_b))}}}"
    )
    if (rest_a + rest_b).isdigit():
        width = "+"
    variable = _class_of(rest_a, rest_b) + width
    if literal:
        regex = _escape(literal) + variable
        token = _token_name(literal) + "-id"
    else:
        context = re.search(r"([A-Za-z_][A-Za-z0-9_]*[^A-Za-z0-9_\\]{1,2})$", before)
        if context is None:
            regex = rf"\b{variable}\b"
            token = "volatile"
        else:
            regex = f"(?<={_escape(context.group(1))}){variable}"
            token = _token_name(context.group(1))
    return Mask.checked(regex, token)


def _escape(text: str) -> str:
    """``text`` as a regex with only the characters special outside a class escaped
    (``re.escape`` also escapes ``-`` and spaces: a proposed regex is read by people)."""
    return re.sub(r"([.^$*+?{}\[\]\\|()])", r"\\\1", text)


def capture_proposals(
    first: Mapping[str, bytes], proposals: Sequence[Proposal], existing: Sequence[str] = ()
) -> list[CaptureRule]:
    """For each proposed token regex whose value, in ``first``'s session logs, sits in a
    recorded request and again in a later recorded answer of that log: a capture (the
    answer names back what the request held, which a mask alone cannot make the live
    value). ``existing``: the scenario's capture tokens."""
    found: list[CaptureRule] = []
    for proposal in proposals:
        mask = proposal.mask
        if isinstance(mask, KeyMask) or mask.token in existing:
            continue
        value = proposal.values[0]
        for name, data in first.items():
            if name == "transcript.jsonl":
                continue
            asked = False
            for line in data.decode("utf-8", "replace").splitlines():
                if value not in line:
                    continue
                if '"request/header"' in line:
                    asked = True
                elif asked and '"assistant/chunk"' in line:
                    found.append(CaptureRule(f"{name}", proposal.values, mask.regex, mask.token))
                    break
            if found and found[-1].token == mask.token:
                break
    return found


def transcript_lines_kinds(first: bytes, other: bytes) -> tuple[str, ...]:
    """The ``sessionUpdate`` kinds of the transcript lines that differ between two
    transcripts and of the lines beside them (a line moved past another: either may be
    the one to compare unordered), in order of first appearance."""
    a_lines = first.decode("utf-8", "replace").splitlines()
    b_lines = other.decode("utf-8", "replace").splitlines()
    matcher = difflib.SequenceMatcher(None, a_lines, b_lines, autojunk=False)
    kinds: list[str] = []
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            continue
        near = [*a_lines[max(a0 - 1, 0) : a1 + 1], *b_lines[max(b0 - 1, 0) : b1 + 1]]
        for line in near:
            kind = transcript_line_kind(line)
            if kind is not None and kind not in kinds:
                kinds.append(kind)
    return tuple(kinds)


def transcript_line_kind(line: str) -> str | None:
    """The ``sessionUpdate`` kind of one transcript line, else ``None``."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    params = message.get("params") if isinstance(message, dict) else None
    update = params.get("update") if isinstance(params, dict) else None
    kind = update.get("sessionUpdate") if isinstance(update, dict) else None
    return kind if isinstance(kind, str) else None


def masked_goldens_equal(
    first: Mapping[str, bytes], other: Mapping[str, bytes], proposals: Sequence[Proposal]
) -> bool:
    """Whether the proposals make the two sets of goldens equal (a check of the proposal,
    on the golden text: the normalizer applies them to what it reads)."""

    def apply(data: bytes) -> str:
        text = data.decode("utf-8", "replace")
        for proposal in proposals:
            mask = proposal.mask
            if isinstance(mask, KeyMask):
                pattern = rf'("{re.escape(mask.key)}"\s*:\s*)("(?:[^"\\]|\\.)*"|[^,}}\]]+)'
                text = re.sub(pattern, r"\1{{" + mask.token + "}}", text)
            else:
                text = re.sub(mask.regex, "{{" + mask.token + "}}", text)
        return text

    return all(apply(first[name]) == apply(other.get(name, b"")) for name in first)


AnyProposal = Proposal | TranscriptRule | CaptureRule
"""What record proposes: a golden mask, an order rule for the transcript, a capture."""

_NOTE = "# Added by agentreel record --accept-masks: what differed between trials."


def accept_masks(toml_path: Path, proposals: Sequence[AnyProposal]) -> None:
    """Write the proposals into ``scenario.toml``: masks and captures appended as tables,
    an order rule set as its key of ``[transcript]`` (the table added when missing)."""
    text = toml_path.read_text(encoding="utf-8").rstrip("\n") + "\n"
    tables = [p.toml for p in proposals if not isinstance(p, TranscriptRule)]
    for rule in (p for p in proposals if isinstance(p, TranscriptRule)):
        line = f"{rule.key} = {json.dumps(list(rule.kinds))}"
        table = re.search(r"^\[transcript\][ \t]*$", text, flags=re.MULTILINE)
        if table is None:
            tables.append(f"[transcript]\n{line}")
            continue
        body_end = re.search(r"^\[", text[table.end() :], flags=re.MULTILINE)
        end = table.end() + (body_end.start() if body_end else len(text) - table.end())
        body = text[table.end() : end]
        key = re.compile(rf"^{rule.key}[ \t]*=[ \t]*\[[^\]]*\][^\n]*$", re.MULTILINE | re.DOTALL)
        body = key.sub(line, body, count=1) if key.search(body) else f"\n{line}{body}"
        text = text[: table.end()] + body + text[end:]
    if tables:
        # Array tables go last: an order rule's table may stand before them, never after.
        text = text.rstrip("\n") + f"\n\n{_NOTE}\n" + "\n\n".join(tables) + "\n"
    toml_path.write_text(text, encoding="utf-8")


def proposals_message(proposals: Sequence[AnyProposal]) -> str:
    lines = []
    for proposal in proposals:
        if isinstance(proposal, Proposal):
            a, b = proposal.values
            lines.append(f"- {proposal.where}: {a!r} in one run, {b!r} in another")
        else:
            lines.append(proposal.said)
    rules = "\n\n".join(proposal.toml for proposal in proposals)
    return (
        "What differs between runs of the same recording:\n"
        + "\n".join(lines)
        + "\nThe smallest rules that cover it, for scenario.toml (record with "
        "--accept-masks to add them and record again):\n" + rules
    )
