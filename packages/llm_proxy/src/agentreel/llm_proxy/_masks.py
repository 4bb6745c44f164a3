"""The proxy's request masks (SPEC 11): agentreel's built-in masks (``agentreel.session``,
their one owner: machine facts, time, the numbered mask sets) after the scenario's own
regexes, checked as the ``[replay] masks`` setting is."""

from __future__ import annotations

from collections.abc import Sequence

from agentreel.llm_proxy.exceptions import ProxyConfigError
from agentreel.llm_replay import ReplaySettings
from agentreel.session import MASK_SETS, MASKS_VERSION, BuiltInMasks, mask_set_fingerprint

__all__ = ["MASK_SETS", "Masks", "mask_set_fingerprint"]


class Masks(BuiltInMasks):
    """The built-in rules plus the scenario's regexes (each replaced by ``{{mask:N}}``).

    ``cwd``: the run's working directory, left to the session normalizer (``{{cwd}}``).
    ``version``: which built-in mask set (``MASK_SETS``; default the newest,
    ``MASKS_VERSION``). A bad regex or an unknown set is a ``ProxyConfigError``."""

    def __init__(
        self, extra: Sequence[str] = (), *, cwd: str | None = None, version: int = MASKS_VERSION
    ) -> None:
        try:  # checked as the setting is (``ReplaySettings.masks``)
            extra = ReplaySettings(masks=tuple(extra)).masks
            super().__init__(extra, cwd=cwd, version=version, sets=MASK_SETS)
        except ValueError as exc:
            raise ProxyConfigError(str(exc)) from None
