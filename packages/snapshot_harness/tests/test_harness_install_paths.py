"""The agent's own install path is a built-in machine fact (SPEC 13), in requests and goldens.

Qwen Code prints its npm folder into the transcript (each bundled skill's ``filePath``) and
Gemini CLI into its prompt (each skill's ``<location>``): where npm, pnpm or pip put the
agent differs between machines and installs. A scenario recorded from one install replays
from another — another prefix, another package manager's layout — with the same goldens and
no scenario mask, while the workspace's own ``node_modules`` stays a workspace path.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentreel.session import Mask, Normalizer
from agentreel.snapshot_harness import check_scenario, load_scenario

ROOT = Path(__file__).resolve().parents[3]
INTEROP = ROOT / "interop" / "fixtures"

# An agent like Qwen Code and Gemini CLI: its system prompt lists its bundled skills by
# absolute path, and it prints them (and a path inside the workspace) on stdout.
AGENT = """\
import json, os, sys
from openai import OpenAI

here = os.path.dirname(os.path.abspath(__file__))
skill = os.path.join(here, "bundled", "batch", "SKILL.md")
with OpenAI(max_retries=0) as client:
    reply = client.chat.completions.create(
        model="stub-model",
        messages=[
            {"role": "system", "content": f"Skills:\\n<location>{skill}</location>"},
            {"role": "user", "content": sys.argv[1]},
        ],
    )
print(json.dumps({
    "answer": reply.choices[0].message.content,
    "filePath": skill,
    "workspace": os.path.join(os.getcwd(), "node_modules", "left-pad", "index.js"),
}))
"""

# Where the agent's files lie, per machine and install: recorded from the first folder,
# replayed from the second (more shapes: packages/session/tests/test_session_install_paths.py).
INSTALLS = {
    "npm-global-then-pnpm-under-the-interop-prefix": (
        "usr/lib/node_modules/@acme/agent",
        "work/wt-other/.nox/interop-npm/node_modules/.pnpm/@acme+agent@1.2.0/node_modules/"
        "@acme/agent",
    ),
    "venv-then-pipx": (
        "work/wt-a/.nox/interop-py/acme/lib/python3.12/site-packages/acme_agent",
        "Users/grace/.local/pipx/venvs/acme/lib/python3.13/site-packages/acme_agent",
    ),
}


def _install(root: Path, folder: str) -> Path:
    script = root / folder / "cli.py"
    script.parent.mkdir(parents=True)
    script.write_text(AGENT)
    return script


def _scenario(directory: Path, script: Path) -> None:
    (directory / "scenario.toml").write_text(
        'protocol = "command"\ntimeout = 120\n'
        f'agent = ["{{python}}", {json.dumps(str(script))}, "{{prompt}}"]\n'
        '[[steps]]\ntype = "prompt"\ntext = "Which skills?"\n'
        '[model]\nvia = "proxy"\napi = "openai"\n'
    )


@pytest.mark.slow
@pytest.mark.parametrize("installs", INSTALLS.values(), ids=INSTALLS.keys())
def test_a_scenario_recorded_from_one_install_replays_from_another(
    tmp_path: Path, installs: tuple[str, str]
) -> None:
    recorded_from, replayed_from = installs
    directory = tmp_path / "agent-skills"
    directory.mkdir()
    (directory / "stub-rules.toml").write_text('[[rule]]\ntext = "batch"\n')
    _scenario(directory, _install(tmp_path / "machine-a", recorded_from))
    check_scenario(directory, "record")
    transcript = (directory / "golden" / "transcript.jsonl").read_text()
    token = (
        "{{site-packages}}/acme_agent"
        if "site-packages" in recorded_from
        else ("{{node-modules}}/@acme/agent")
    )
    assert f'"filePath":"{token}/bundled/batch/SKILL.md"' in transcript
    # The workspace's own node_modules is the workspace's, not an install path.
    assert '"workspace":"{{cwd}}/node_modules/left-pad/index.js"' in transcript
    assert str(tmp_path) not in transcript
    recording = (directory / "session.jsonl").read_text()
    assert f"<location>{token}/bundled/batch/SKILL.md</location>" in recording
    assert str(tmp_path) not in recording

    # Another machine: the same agent installed elsewhere, by another package manager.
    _scenario(directory, _install(tmp_path / "machine-b", replayed_from))
    check_scenario(directory, "replay")
    assert (directory / "golden" / "transcript.jsonl").read_text() == transcript


def _normalizer(fixture: Path) -> Normalizer:
    scenario = load_scenario(fixture)
    assert not [mask for mask in scenario.golden_masks if isinstance(mask, Mask)], (
        f"{fixture.name}: no golden mask is needed for the agent's install path"
    )
    return Normalizer(
        "/work/elsewhere",
        unordered=scenario.unordered,
        merge=scenario.merge,
    )


OTHER_INSTALLS = (
    "/Users/grace/.npm-global/lib/node_modules",
    "/work/wt-other/.nox/interop-npm/node_modules",
    "C:\\Users\\grace\\AppData\\Roaming\\npm\\node_modules",
)


@pytest.mark.parametrize("fixture", ["qwen-code-read", "qwen-code-subagent"])
def test_qwen_codes_golden_is_the_same_from_any_install(fixture: str) -> None:
    # The committed golden, its install token written back as another machine's npm
    # folder (what Qwen Code prints there), normalizes to the committed golden again.
    committed = (INTEROP / fixture / "golden" / "transcript.jsonl").read_bytes()
    assert committed.count(b'"filePath":"{{node-modules}}/@qwen-code/qwen-code/bundled/') >= 10
    for prefix in OTHER_INSTALLS:
        printed = committed.replace(b"{{node-modules}}", json.dumps(prefix)[1:-1].encode())
        assert printed != committed
        assert _normalizer(INTEROP / fixture).transcript_bytes(printed) == committed, prefix
