"""One proxy per harness process (per pytest-xdist worker), a run of its own per scenario.

Two scenarios here send the very same requests and were recorded with different answers,
so a request served by the other scenario's run would show as the other answer in the
transcript (a golden mismatch). The agent writes the base URL it was given to a file: the
runs of one process share a server (one port) and each has its own ``/r/<run>/`` prefix.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from agentreel.snapshot_harness import check_scenario, load_scenario
from agentreel.snapshot_harness._proxied import WORKER_PROXY

pytest_plugins = ["pytester"]

AGENT = Path(__file__).with_name("harness_proxy_agent.py")
SCENARIO = """
timeout = 120
agent = ["{{python}}", "./agent.py"]

[env]
TINY_URL_LOG = "{url_log}"

[[steps]]
type = "initialize"

[[steps]]
type = "new_session"

[[steps]]
type = "prompt"
text = "say hello"

[model]
via = "proxy"
api = "openai"
base_url_env = []
key_env = ["TINY_KEY"]

[[model.files]]
path = ".config/tiny-agent/config.json"
text = '{{"base_url": "{{base_url}}", "home": "{{home}}"}}'
"""
RULES = """
[[rule]]
match = {{ last_user = "say hello" }}
text = "{answer}"
chunk_size = 100
"""
ANSWERS = {"tiny-a": "hello from run a", "tiny-b": "hello from run b"}


def _write_scenario(directory: Path, url_log: Path) -> None:
    (directory / "scenario.toml").write_text(SCENARIO.format(url_log=url_log))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``tiny-a`` and ``tiny-b`` recorded (through the worker proxy) under ``fixtures/``."""
    root = tmp_path_factory.mktemp("worker-proxy") / "fixtures"
    for name, answer in ANSWERS.items():
        directory = root / name
        directory.mkdir(parents=True)
        _write_scenario(directory, root.parent / "record-urls.txt")
        (directory / "stub-rules.toml").write_text(RULES.format(answer=answer))
        shutil.copy(AGENT, directory / "agent.py")
        check_scenario(load_scenario(directory), "record")
        assert answer in (directory / "golden" / "transcript.jsonl").read_text()
    return root


def _copy(recorded: Path, target: Path, names: dict[str, str], url_log: Path) -> Path:
    """The recorded scenarios copied under ``target/fixtures`` as ``names`` (new: old)."""
    fixtures = target / "fixtures"
    for new, old in names.items():
        shutil.copytree(recorded / old, fixtures / new)
        _write_scenario(fixtures / new, url_log)
    return fixtures


def _servers(url_log: Path) -> dict[str, list[str]]:
    """The run tokens each server (host:port) handed out, from the agents' base URLs."""
    servers: dict[str, list[str]] = {}
    for line in url_log.read_text().split():
        url = urlsplit(line)
        parts = url.path.strip("/").split("/")
        assert parts[0] == "r"
        assert parts[2] == "v1"
        servers.setdefault(url.netloc, []).append(parts[1])
    return servers


def test_scenarios_in_one_process_share_one_proxy_each_with_its_own_run(
    recorded: Path, tmp_path: Path
) -> None:
    url_log = tmp_path / "urls.txt"
    fixtures = _copy(recorded, tmp_path, {"tiny-a": "tiny-a", "tiny-b": "tiny-b"}, url_log)
    starts = WORKER_PROXY.starts
    for name in ("tiny-a", "tiny-b", "tiny-a", "tiny-b"):
        # A misrouted request would answer with the other scenario's text: a golden mismatch.
        assert check_scenario(load_scenario(fixtures / name), "replay").sessions == 1
    assert WORKER_PROXY.starts == starts, "the process's proxy was started again"
    servers = _servers(url_log)
    assert len(servers) == 1
    [tokens] = servers.values()
    assert len(tokens) == len(set(tokens)) == 4


def test_the_worker_proxy_flushes_an_open_run_at_exit_and_starts_again_after_close(
    recorded: Path, tmp_path: Path
) -> None:
    report = tmp_path / "report.json"
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from agentreel.llm_proxy import ProxySettings
        from agentreel.snapshot_harness._proxied import WORKER_PROXY
        settings = ProxySettings(
            mode="replay", fixture=Path({str(recorded / "tiny-a")!r}),
            report=Path({str(report)!r}), scenario="left-open",
        )
        run = WORKER_PROXY.open_run(settings, timeout=120)
        print(run.base_url, WORKER_PROXY.starts)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[1] == "1"
    # Never closed by the program: the proxy closed it at exit, writing its report.
    written = json.loads(report.read_text())
    assert written["scenario"] == "left-open"
    assert [script["consumed"] for script in written["scripts"]] == [0]
    # Closed, the next scenario starts a new one.
    url_log = tmp_path / "urls.txt"
    fixtures = _copy(recorded, tmp_path, {"tiny-a": "tiny-a"}, url_log)
    check_scenario(load_scenario(fixtures / "tiny-a"), "replay")
    starts = WORKER_PROXY.starts
    WORKER_PROXY.close()
    check_scenario(load_scenario(fixtures / "tiny-a"), "replay")
    assert WORKER_PROXY.starts == starts + 1


CONFTEST = """
import json
from pathlib import Path

from agentreel.snapshot_harness._proxied import WORKER_PROXY


def pytest_sessionfinish(session):
    # Not PYTEST_XDIST_WORKER: under an outer `pytest -n 2` every process of this inner run
    # inherits the outer worker's name from the environment.
    workerinput = getattr(session.config, "workerinput", None)
    worker = "controller" if workerinput is None else workerinput["workerid"]
    Path({starts!r}, worker + ".json").write_text(json.dumps(WORKER_PROXY.starts))
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist-2"])
def test_pytest_starts_one_proxy_per_worker(
    recorded: Path, pytester: pytest.Pytester, workers: list[str]
) -> None:
    url_log = pytester.path / "urls.txt"
    names = {"tiny-a": "tiny-a", "tiny-b": "tiny-b", "tiny-c": "tiny-a", "tiny-d": "tiny-b"}
    fixtures = _copy(recorded, pytester.path, names, url_log)
    starts_dir = pytester.path / "starts"
    starts_dir.mkdir()
    pytester.makeconftest(CONFTEST.format(starts=str(starts_dir)))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *workers, str(fixtures))
    result.assert_outcomes(passed=4)
    starts = {path.stem: json.loads(path.read_text()) for path in starts_dir.iterdir()}
    servers = _servers(url_log)
    if workers:
        assert starts == {"controller": 0, "gw0": 1, "gw1": 1}
        assert len(servers) == 2, servers  # each worker its own server
    else:
        assert starts == {"controller": 1}
        assert len(servers) == 1
    tokens = [token for runs in servers.values() for token in runs]
    assert len(tokens) == 4
    for runs in servers.values():
        assert len(runs) == len(set(runs))
