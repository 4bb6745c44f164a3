"""Reference MCP servers from PyPI under the harness (SPEC 19), driven by the reference
agent: it calls ``mcp-server-fetch`` on a page of an HTTP server this test starts on
127.0.0.1 and ``mcp-server-git`` on a repository this test makes (a subagent's own
connections are covered with the test server: test_harness_mcp_reference_agent.py).
Both are test dependencies of this package (installed with the tests, never fetched while
they run). Recorded once; replayed with neither command on ``PATH``, the page's server
stopped and the repository gone."""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agentreel.snapshot_harness import check_scenario

pytestmark = pytest.mark.slow

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
# The servers' console scripts live beside this venv's python.
RECORD_PATH = f"{Path(sys.executable).parent}:{SYSTEM_PATH}"
PAGE = "<html><body><h1>Release</h1><p>The release is on Friday.</p></body></html>"

RULES = """\
[[rule]]
name = "fetch the page and log the repository"
match = { last_user = "Read the release page" }
tool_calls = [
  { id = "fetch", name = "mcp__fetch__fetch", arguments = { url = "URL" } },
  { id = "log", name = "mcp__git__git_log", arguments = { repo_path = "REPO", max_count = 1 } },
]

[[rule]]
name = "sum up"
match = { last_tool_result = "Add the release notes" }
text = "The release is on Friday; the last commit adds the release notes."
"""

SCENARIO = """\
timeout = 120
env = { PATH = "SEARCH_PATH", NO_PROXY = "127.0.0.1,localhost" }

[[mcp_servers]]
name = "fetch"
command = "mcp-server-fetch"
args = ["--allow-private-ips", "--ignore-robots-txt"]

[[mcp_servers]]
name = "git"
command = "mcp-server-git"
args = ["--repository", "REPO"]

[[steps]]
type = "initialize"

[[steps]]
type = "new_session"

[[steps]]
type = "prompt"
text = "Read the release page and the repository's last commit"

[record]
provider = "stub"
model = "stub-model"
"""


@contextmanager
def site(root: Path) -> Iterator[str]:
    """The release page over HTTP on 127.0.0.1, in a thread, while recording."""
    (root / "release.html").write_text(PAGE)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/release.html"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Recorded with the page served and the repository made; both gone afterwards."""
    repo = tmp_path_factory.mktemp("repo")
    (repo / "NOTES.md").write_text("Release: Friday\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "NOTES.md"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "Add the release notes"], check=True)
    directory = tmp_path_factory.mktemp("fixtures") / "mcp-real-servers"
    directory.mkdir()
    (directory / "scenario.toml").write_text(
        SCENARIO.replace("SEARCH_PATH", RECORD_PATH).replace("REPO", str(repo))
    )
    with site(tmp_path_factory.mktemp("site")) as url:
        (directory / "stub-rules.toml").write_text(
            RULES.replace("URL", url).replace("REPO", str(repo))
        )
        assert check_scenario(directory, "record").sessions == 1
    shutil.rmtree(repo)  # replay needs none of it
    return directory


def calls(directory: Path) -> dict[tuple[str, str], list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    for path in sorted((directory / "mcp").iterdir()):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        header = lines[0]
        found[(header["server"], header["session"])] = [
            line["message"]["params"]["name"]
            for line in lines[1:]
            if line["message"].get("method") == "tools/call"
        ]
    return found


def test_fetch_and_git_servers_from_pypi_replay_with_their_commands_off_path(
    recorded: Path, tmp_path: Path
) -> None:
    assert calls(recorded) == {
        ("fetch", "main"): ["fetch"],
        ("git", "main"): ["git_log"],
    }
    transcript = (recorded / "golden" / "transcript.jsonl").read_text()
    assert "The release is on Friday." in transcript  # the page, as the fetch server read it
    assert "Add the release notes" in transcript  # the commit, as the git server logged it

    copy = tmp_path / recorded.name
    shutil.copytree(recorded, copy)
    toml = copy / "scenario.toml"
    toml.write_text(toml.read_text().replace(RECORD_PATH, SYSTEM_PATH))
    for command in ("mcp-server-fetch", "mcp-server-git"):
        assert shutil.which(command, path=SYSTEM_PATH) is None, command
    assert check_scenario(copy, "replay").sessions == 1
