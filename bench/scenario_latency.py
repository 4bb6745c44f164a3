"""2. Scenario latency: a 3-session scenario replayed end to end vs the bare agent floor.

Both sides are ``check_scenario(..., "replay")`` — agent subprocess started, driven over
ACP, logs harvested, consumption checked, normalized and diffed with the goldens:

- scenario: a parent delegating to two children in sequence (3 sessions, 5 model calls);
- floor: the same agent command doing initialize → new session → one prompt, answered
  from a one-call recording (no model, no network): what any replayed scenario costs.

Then one replay with ``python -X importtime`` as the agent command: what the agent imports
in replay mode, and proof that no provider SDK (openai, anthropic, httpx) is among it.
"""

from __future__ import annotations

import resource
import sys
import tempfile
from functools import partial
from pathlib import Path

from agentreel.snapshot_harness import check_scenario, load_scenario, run_scenario
from bench._common import BenchResult, Settings, timed
from bench._scenarios import scenario_pair, with_agent

SDKS = ("openai", "anthropic", "httpx", "httpx2", "httpcore")


def _cpu_with_children() -> float:
    """CPU seconds of this process plus every child it waited for (the agent)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def _imports(stderr: str) -> list[tuple[str, int, int]]:
    """(module, self µs, cumulative µs) for each ``-X importtime`` line."""
    found: list[tuple[str, int, int]] = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "imported package" in line:
            continue
        fields = line[len("import time:") :].split("|")
        if len(fields) != 3:
            continue
        own, cumulative, module = fields
        found.append((module.strip(), int(own), int(cumulative)))
    return found


def run(settings: Settings) -> BenchResult:
    result = BenchResult("scenario", "2. Scenario latency (agent subprocess, end to end)")
    repeats = settings.scaled(9, 3)
    with tempfile.TemporaryDirectory(prefix="agentreel-bench-scenario-") as tmp_text:
        tmp = Path(tmp_text)
        multi, plain, notes = scenario_pair(tmp)
        result.notes.extend(notes)
        multi_scenario = load_scenario(multi)
        plain_scenario = load_scenario(plain)
        sessions = check_scenario(multi_scenario, "replay").sessions
        check_scenario(plain_scenario, "replay")  # warm-up: bytecode, page cache
        samples: dict[str, list[float]] = {"multi": [], "plain": []}
        cpu: dict[str, list[float]] = {"multi": [], "plain": []}
        for _ in range(repeats):  # interleaved, so drift hits both sides alike
            for key, scenario in (("multi", multi_scenario), ("plain", plain_scenario)):
                cpu_before = _cpu_with_children()
                samples[key].append(timed(partial(check_scenario, scenario, "replay")))
                cpu[key].append(_cpu_with_children() - cpu_before)
        multi_time = result.median("scenario_s", samples["multi"])
        plain_time = result.median("floor_s", samples["plain"])
        result.figure(f"{sessions}-session scenario, replay end to end", multi_time, "s")
        result.figure("floor: one prompt, no model, end to end", plain_time, "s")
        result.figure(
            f"{sessions}-session scenario: CPU, harness + agent",
            result.median("scenario_cpu_s", cpu["multi"]),
            "s",
        )
        result.figure(
            "floor: CPU, harness + agent", result.median("floor_cpu_s", cpu["plain"]), "s"
        )
        result.target(f"{sessions}-session scenario / floor", multi_time / plain_time, 1.3)

        traced = with_agent(
            multi,
            tmp,
            "bench-importtime",
            [sys.executable, "-X", "importtime", "-m", "agentreel.acp_agent"],
        )
        run_result = run_scenario(load_scenario(traced), "replay")
        imports = _imports(run_result.stderr)
        modules = {module for module, _, _ in imports}
        top_level = {module.split(".")[0] for module in modules}
        sdks = sorted(name for name in SDKS if name in top_level)
        total = sum(own for _, own, _ in imports) / 1e6
        result.figure("agent import time in replay mode (sum of self times)", total, "s")
        result.figure("modules the agent imports in replay mode", len(modules), "count")
        result.figure("provider SDK modules among them", len(sdks), "count", ", ".join(sdks))
        heaviest = sorted(
            ((cumulative, module) for module, _, cumulative in imports if "." not in module),
            reverse=True,
        )[:6]
        result.notes.append(
            "heaviest top-level imports (cumulative): "
            + ", ".join(f"{module} {cumulative / 1000:.0f} ms" for cumulative, module in heaviest)
        )
        if sdks:
            result.notes.append(f"replay mode imported provider SDK(s): {', '.join(sdks)}")
    return result
