"""Versioned built-in mask sets (SPEC 15): every set agentreel ever applied is kept, frozen,
so a recording that keeps digests of texts masked with an older set is compared with the
live request masked with that same set. A released set never changes: its rules are pinned
here by fingerprint, and a new or better mask is a new set."""

from __future__ import annotations

import pytest

from agentreel.llm_proxy import MASK_SETS, Masks, ProxyConfigError, mask_set_fingerprint
from agentreel.session import MASKS_HISTORY, MASKS_VERSION

# Never edit a released set's line: a change here strands every recording made with it.
# A new set adds its line (and MASKS_VERSION, MASKS_HISTORY in agentreel.session).
RELEASED = {
    1: "b5cf001b77c28a51",
    2: "496e84adafd52c27",
    3: "ff1687eb5ea06075",
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


def test_an_unknown_mask_set_names_what_this_agentreel_knows() -> None:
    with pytest.raises(ProxyConfigError, match=r"mask set 9 is unknown .* knows 1, 2, 3"):
        Masks(version=9)
