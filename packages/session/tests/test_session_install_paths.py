"""The agent's own install path, a built-in machine fact (SPEC 13) of the normalizer.

The same files of an agent, installed by another package manager on another machine, give
the same text; paths of the workspace (or relative to a placeholder) are never an install.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentreel.llm import GenerateOptions, Message
from agentreel.session import (
    Event,
    Mask,
    Normalizer,
    SessionHeader,
    SessionLog,
    UserMessage,
    UserMessageData,
    build_request_header,
    encode_record,
    mask_install_paths,
)

SKILL = "@qwen-code/qwen-code/bundled/batch/SKILL.md"
# One package's file as npm, pnpm, yarn, bun and npx put it on Linux, macOS and Windows,
# the interop session's local prefix included.
NODE_INSTALLS = [
    f"/usr/lib/node_modules/{SKILL}",
    f"/usr/local/lib/node_modules/{SKILL}",
    f"/opt/homebrew/lib/node_modules/{SKILL}",
    f"/home/ada/.nvm/versions/node/v22.3.0/lib/node_modules/{SKILL}",
    f"/Users/grace/.npm-global/lib/node_modules/{SKILL}",
    f"/root/.npm/_npx/6a1b2c3d4e5f6a7b/node_modules/{SKILL}",
    f"/work/wt-qwen3/.nox/interop-npm/node_modules/{SKILL}",
    f"/work/wt-gemini/.nox/interop-npm/node_modules/{SKILL}",
    f"/home/ada/.local/share/pnpm/global/5/node_modules/.pnpm/@qwen-code+qwen-code@0.24.4/"
    f"node_modules/{SKILL}",
    f"/Users/grace/.bun/install/global/node_modules/{SKILL}",
    "C:\\Users\\grace\\AppData\\Roaming\\npm\\node_modules\\" + SKILL,
]
# Past the install folder a Windows path keeps its own separators.
POSIX_NODE_INSTALLS = [path for path in NODE_INSTALLS if "\\" not in path]
PYTHON_INSTALLS = [
    "/work/wt-a/.nox/interop-py/mistral-vibe/lib/python3.12/site-packages/vibe/core/prompts.py",
    "/Users/grace/.local/pipx/venvs/mistral-vibe/lib/python3.13/site-packages/vibe/core/prompts.py",
    "/usr/lib/python3/dist-packages/vibe/core/prompts.py",
    "C:\\Python313\\Lib\\site-packages\\vibe/core/prompts.py",
]
VENV_SCRIPTS = [
    "/work/wt-a/.nox/interop-py/mistral-vibe/bin/vibe-acp",
    "/work/wt-a/.nox/interop-npm/bin/vibe-acp",
    "/home/ada/.local/share/uv/tools/mistral-vibe/bin/vibe-acp",
    "/Users/grace/.local/pipx/venvs/mistral-vibe/bin/vibe-acp",
    "/home/ada/project/.venv/bin/vibe-acp",
]


@pytest.mark.parametrize(
    ("installs", "expected"),
    [
        (NODE_INSTALLS, "{{node-modules}}/" + SKILL),
        (PYTHON_INSTALLS, "{{site-packages}}/vibe/core/prompts.py"),
        (VENV_SCRIPTS, "{{venv}}/bin/vibe-acp"),
    ],
    ids=["npm", "python", "venv-scripts"],
)
def test_every_install_of_the_same_file_reads_alike(installs: list[str], expected: str) -> None:
    for path in installs:
        said = f'Skill "batch" at {path}. Read {path}.'
        masked = mask_install_paths(said).replace("\\", "/")
        assert masked == f'Skill "batch" at {expected}. Read {expected}.', path
        assert mask_install_paths(masked) == masked


@pytest.mark.parametrize(
    "text",
    [
        "{{cwd}}/node_modules/left-pad/index.js",  # the workspace's own packages
        "{{cwd}}/.venv/bin/python",
        "{{home}}/x",
        "rm -rf ./node_modules",
        "src/node_modules/x and lib/python3.12/site-packages/y",
        "(node_modules/, site-packages/, vendor/)",
        # Relative to a placeholder (Qwen Code's browser-use skill), not an absolute path.
        "Confirm that `<skill-base>/runtime/node_modules/playwright-core/package.json` exists",
        "/srv/node_modules.bak/x",
        "/usr/bin/git",
        "/home/ada/venv-notes/bin.txt",
    ],
)
def test_what_is_not_an_install_path_stays(text: str) -> None:
    assert mask_install_paths(text) == text


def test_a_path_as_a_tags_text_is_one_and_the_tag_stays() -> None:
    # Gemini CLI lists its skills as <location>…</location>.
    said = "<skill>\n <location>/usr/lib/node_modules/@google/gemini-cli/SKILL.md</location>"
    assert mask_install_paths(said) == (
        "<skill>\n <location>{{node-modules}}/@google/gemini-cli/SKILL.md</location>"
    )


_PIECES = st.lists(
    st.sampled_from(
        [
            "/",
            "\\",
            "node_modules",
            "site-packages",
            ".venv",
            ".nox",
            "bin",
            "a",
            " ",
            ".",
            "{{cwd}}",
            "}}",
            "<l>",
            "</l>",
            ">",
            '"',
            "C:",
        ]
    ),
    max_size=14,
)


@settings(max_examples=300, deadline=None)
@given(_PIECES)
def test_masking_masked_text_changes_nothing(pieces: list[str]) -> None:
    once = mask_install_paths("".join(pieces))
    assert mask_install_paths(once) == once


def test_the_normalizer_gives_one_golden_from_any_install() -> None:
    def printed(install: str) -> bytes:
        skills = [{"name": "batch", "filePath": install}]
        return (
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": {
                        "update": {
                            "sessionUpdate": "available_commands_update",
                            "availableCommands": skills,
                            "workspace": "/work/run/node_modules/x",
                        }
                    },
                }
            ).encode()
            + b"\n"
        )

    goldens = {Normalizer("/work/run").transcript_bytes(printed(p)) for p in POSIX_NODE_INSTALLS}
    assert len(goldens) == 1
    (golden,) = goldens
    assert f'"filePath":"{{{{node-modules}}}}/{SKILL}"'.encode() in golden
    assert b'"workspace":"{{cwd}}/node_modules/x"' in golden


def _log(text: str) -> SessionLog:
    header = SessionHeader(id="11111111-1111-4111-8111-111111111111", created_at=5, cwd="/w")
    events: list[Event] = [UserMessage(seq=0, time=7, data=UserMessageData(turn=1, text=text))]
    return SessionLog(path=Path("mem.jsonl"), header=header, events=events)


@pytest.mark.parametrize("install", [NODE_INSTALLS[0], NODE_INSTALLS[-1], PYTHON_INSTALLS[0]])
def test_a_loaded_log_masks_install_paths_like_its_raw_bytes(install: str) -> None:
    # The fast path scans encoded bytes; an install path is read in decoded text.
    log = _log(f"installed at {install}")
    raw = b"".join(encode_record(record) for record in [log.header, *log.events])
    loaded = Normalizer("/w", [log.header.id]).session_log_bytes(log)
    assert loaded == Normalizer("/w", [log.header.id]).session_log_bytes(raw)
    assert b"{{node-modules}}" in loaded or b"{{site-packages}}" in loaded


def test_a_request_header_is_the_same_from_any_install() -> None:
    # In process (no proxy masks), the header's digests: the same on every machine.
    def header(install: str) -> tuple[str, ...]:
        options = GenerateOptions(
            model="m",
            system=f"Skills: {install}",
            messages=(Message.user(f"see {install}"),),
        )
        built = build_request_header(options, turn=0, step=0, cwd="/w")
        return (built.system or "", *(message.digest for message in built.messages))

    assert len({header(install) for install in POSIX_NODE_INSTALLS}) == 1


@pytest.mark.parametrize("token", ["node-modules", "site-packages", "venv"])
def test_a_scenario_mask_cannot_take_an_install_token(token: str) -> None:
    with pytest.raises(ValueError, match="built-in normalizer token"):
        Mask.checked("x", token)
