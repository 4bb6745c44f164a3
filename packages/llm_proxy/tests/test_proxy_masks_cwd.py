"""The request masks are idempotent around the cwd token (SPEC 13): record masks a live
request (the cwd left to the normalizer) and the fixture holds ``{{cwd}}`` where the cwd
was; replay masks that recorded text again at load. Wherever HOME, the temp folder or an
install folder sits relative to the cwd — HOME inside the cwd (a harness or interop run
gives the agent a fresh HOME in its workdir, as Gemini CLI's offline setup does) or the cwd
inside HOME — the second pass must change nothing: ``{{cwd}}`` wins. It gave
``{{cwd}}{{home}}/.gemini…`` for the ``{{cwd}}/home/.gemini…`` record wrote, and the
conversation lane was missed on replay."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentreel.llm_proxy import Masks
from agentreel.session import Normalizer

# Path components: plain names, and the ones a mask rule looks for after a slash.
_NAME = st.text(alphabet="abcdefgh0123456789_-", min_size=1, max_size=8).filter(
    lambda name: not name.startswith("-")
)
_SPECIAL = st.sampled_from(
    ["home", "Users", "root", ".gemini", "tmp", "node_modules", "site-packages", "dist-packages"]
)
_COMPONENT = st.one_of(_NAME, _SPECIAL)
_RELATIVE = st.lists(_COMPONENT, min_size=0, max_size=4)


@st.composite
def _layout(draw: st.DrawFn) -> tuple[str, str]:
    """(cwd, HOME): HOME inside the cwd, or the cwd inside HOME (in every machine's shape)."""
    if draw(st.booleans()):
        cwd = "/" + "/".join(draw(st.lists(_NAME, min_size=1, max_size=3)))
        home = cwd + "/" + "/".join(draw(st.lists(_COMPONENT, min_size=1, max_size=2)))
    else:
        user = draw(_NAME)
        home = draw(st.sampled_from([f"/home/{user}", f"/Users/{user}", "/root"]))
        cwd = home + "/" + "/".join(draw(st.lists(_COMPONENT, min_size=1, max_size=3)))
    return cwd, home


@contextmanager
def _home(home: str) -> Iterator[None]:
    previous = os.environ.get("HOME")
    os.environ["HOME"] = home
    try:
        yield
    finally:
        if previous is None:
            del os.environ["HOME"]
        else:
            os.environ["HOME"] = previous


def _join(base: str, relative: list[str]) -> str:
    return "/".join([base, *relative]) if relative else base


@settings(max_examples=200, deadline=None)
@given(
    layout=_layout(),
    paths=st.lists(st.tuples(st.sampled_from(["cwd", "home"]), _RELATIVE), max_size=4),
    label=st.booleans(),
)
# Found by this test once the time masks came: "0/0/0000" in a path is no date.
@example(layout=("/home/0/0/0000", "/home/0"), paths=[], label=False)
def test_masking_is_idempotent_with_home_inside_the_cwd_and_the_cwd_inside_home(
    layout: tuple[str, str], paths: list[tuple[str, list[str]]], label: bool
) -> None:
    cwd, home = layout
    texts = [_join(cwd if base == "cwd" else home, relative) for base, relative in paths]
    if label:
        texts.append(f"Home: {home}")
    live = "Paths: " + " and ".join(texts) + f" (cwd {cwd}, home {home}/.gemini/tmp/x1.json)."
    with _home(home):
        recording = Masks(cwd=cwd)
    masked = recording.text(live)
    assert recording.text(masked) == masked  # the live form, masked twice
    recorded = Normalizer(cwd).text(masked)  # what the fixture holds: {{cwd}} where the cwd was
    # Replay masks the recorded text again at load, on this machine or another one.
    with _home(home):
        assert Masks(cwd=cwd).text(recorded) == recorded
    with _home("/home/someone-else"):
        assert Masks(cwd="/elsewhere/run").text(recorded) == recorded


def test_gemini_clis_home_inside_its_workdir_keeps_the_cwd_token() -> None:
    """The shape Gemini CLI's offline setup wrote (HOME = <workdir>/home)."""
    cwd = "/tmp/agentreel-gemini-run"
    with _home(cwd + "/home"):
        masks = Masks(cwd=cwd)
    live = f"My home is {cwd}/home and I keep notes in {cwd}/home/.gemini/tmp/abc123/notes.md."
    recorded = Normalizer(cwd).text(masks.text(live))
    assert recorded.startswith("My home is {{cwd}}/home and I keep notes in {{cwd}}/home/.gemini")
    assert masks.text(recorded) == recorded
