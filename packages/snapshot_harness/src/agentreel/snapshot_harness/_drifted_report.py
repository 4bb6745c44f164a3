"""The report of a drifted recording (SPEC 20): per session kept / re-recorded from call k
/ new / dropped, then calls, tokens and — with a price table — money not spent. Printed by
``agentreel record --drifted``, the fixture's terminal summary and the proxy, and written
into the HTML report."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from agentreel.llm_replay import SessionFate, Status, usage_sum
from agentreel.snapshot_harness._prices import Prices


@dataclass(frozen=True, slots=True)
class DriftedSummary:
    """The report of one ``--drifted`` run: each session's fate and the totals."""

    scenario: str
    sessions: list[SessionFate]
    upstream_calls: int
    prices: Prices | None = None

    @property
    def saved_calls(self) -> int:
        return sum(fate.calls - fate.live_calls for fate in self.sessions if fate.file)

    @property
    def saved_tokens(self) -> tuple[int, int]:
        return usage_sum(fate.saved_tokens for fate in self.sessions if fate.file)

    @property
    def live_tokens(self) -> tuple[int, int]:
        return usage_sum(fate.live_tokens for fate in self.sessions if fate.file)

    def money_saved(self) -> float | None:
        """What the replayed calls would have cost at ``prices`` (``None`` without them,
        or when a model they name has no price)."""
        if self.prices is None:
            return None
        total = 0.0
        for fate in self.sessions:
            if not fate.file or fate.calls == fate.live_calls:
                continue
            cost = self.prices.cost(fate.model, *fate.saved_tokens)
            if cost is None:
                return None
            total += cost
        return total

    def text(self) -> str:
        counts = {s: sum(f.status == s for f in self.sessions) for s in _STATUSES}
        lines = [
            f"{self.scenario}: re-recorded only what drifted — "
            + ", ".join(f"{counts[s]} {s}" for s in _STATUSES)
        ]
        lines += [f"  {fate.line()}" for fate in self.sessions]
        saved_in, saved_out = self.saved_tokens
        live_in, live_out = self.live_tokens
        lines.append(
            f"  calls: {self.saved_calls} replayed, {self.upstream_calls} to the upstream; "
            f"tokens not spent again: {saved_in} prompt + {saved_out} completion "
            f"(spent: {live_in} + {live_out})"
        )
        money = self.money_saved()
        if money is not None and self.prices is not None:
            lines.append(f"  money not spent: {money:.4f} {self.prices.currency}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, object]:
        return {
            "scenario": self.scenario,
            "sessions": [dataclasses.asdict(fate) for fate in self.sessions],
            "upstream_calls": self.upstream_calls,
            "saved_calls": self.saved_calls,
            "saved_tokens": list(self.saved_tokens),
            "live_tokens": list(self.live_tokens),
            "money_saved": self.money_saved(),
            "currency": self.prices.currency if self.prices is not None else None,
        }


_STATUSES: tuple[Status, ...] = ("kept", "re-recorded", "new", "dropped")
