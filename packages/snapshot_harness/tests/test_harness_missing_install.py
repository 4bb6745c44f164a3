"""An agent that dies for a module it cannot import names what to install.

The reference agent comes with the harness's ``[agent]`` extra; an example agent's
dependencies with the dependency group (or extra) of the project around the scenario that
names them. Both are run for real: a scenario whose agent process cannot import the module.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agentreel.snapshot_harness import AgentCrashError, load_scenario, run_scenario
from agentreel.snapshot_harness._runner import missing_module_hint

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
STEPS = '[[steps]]\ntype = "initialize"\n\n[[steps]]\ntype = "new_session"\n'
# Makes `agentreel.acp_agent` unimportable in the agent's process, as where the harness was
# installed without [agent]: its folder leaves sys.path (an editable install), and where it
# is installed into site-packages, the import system is told there is no such module.
BLOCKER = """\
import importlib.util
import sys

sys.path[:] = [p for p in sys.path if not p.rstrip("/").endswith("packages/acp_agent/src")]


class _Blocked:
    def find_spec(self, name, path=None, target=None):
        if name == "agentreel.acp_agent" or name.startswith("agentreel.acp_agent."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


if importlib.util.find_spec("agentreel.acp_agent") is not None:
    sys.meta_path.insert(0, _Blocked())
"""


def crash(scenario: Path) -> str:
    with pytest.raises(AgentCrashError) as caught:
        run_scenario(load_scenario(scenario), "replay")
    return str(caught.value)


def test_the_reference_agent_missing_names_the_agent_extra(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCKER)
    scenario = tmp_path / "fixtures" / "no-agent"
    scenario.mkdir(parents=True)
    (scenario / "scenario.toml").write_text(
        f'timeout = 60\nenv = {{ PYTHONPATH = "{blocker}" }}\n\n{STEPS}'
    )
    message = crash(scenario)
    assert "No module named" in message  # the agent really could not import it
    assert "the agent went away during step 1 (initialize)" in message
    assert "The reference agent (agentreel.acp_agent) is not installed" in message
    assert 'pip install "agentreel-snapshot-harness[agent]"' in message


def test_an_example_agents_dependency_names_its_group(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[dependency-groups]\ndev = ["pytest>=8"]\nexamples = ["fancy-widgets-slim[x]>=1,<2"]\n'
    )
    scenario = tmp_path / "fixtures" / "example"
    scenario.mkdir(parents=True)
    (scenario / "agent.py").write_text("import fancy_widgets\n")
    (scenario / "scenario.toml").write_text(
        f'timeout = 60\nagent = ["{{python}}", "./agent.py"]\n\n{STEPS}'
    )
    message = crash(scenario)
    assert "No module named 'fancy_widgets'" in message
    assert (
        "The agent cannot import 'fancy_widgets': 'fancy-widgets-slim[x]>=1,<2' brings it, in "
        f"the dependency group 'examples' of {tmp_path / 'pyproject.toml'}"
    ) in message
    assert f"`uv sync --group examples` in {tmp_path}" in message
    assert sys.executable in message


def test_the_repositorys_pydantic_example_names_the_examples_group() -> None:
    scenario = load_scenario(REPO / "fixtures" / "example-pydantic-ai")
    stderr = "Traceback ...\nModuleNotFoundError: No module named 'pydantic_ai'\n"
    hint = missing_module_hint(scenario, stderr)
    assert hint is not None
    assert "in the dependency group 'examples' of" in hint
    assert "pydantic-ai-slim[openai]" in hint
    assert "uv sync --group examples" in hint


def test_a_module_no_project_names_is_still_named() -> None:
    scenario = load_scenario(REPO / "fixtures" / "example-pydantic-ai")
    hint = missing_module_hint(scenario, "ModuleNotFoundError: No module named 'zzz_nowhere'")
    assert hint is not None
    assert "The agent cannot import 'zzz_nowhere': install the package" in hint
