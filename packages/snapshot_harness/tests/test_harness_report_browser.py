"""The HTML report in a real headless Chromium (Debian's ``chromium`` + ``chromium-driver``,
driven by Selenium through that chromedriver; nothing downloads a browser).

One report of three committed scenarios, replayed from scratch copies: ``subagent-mixed``
(its tree must show every session), ``subagent-parallel`` (its timeline must show the two
children's calls overlapping, as their recorded times do) and ``plain-turn`` with a
tweaked golden (it must fail and show its diff).
"""

from __future__ import annotations

import io
import json
import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from agentreel.snapshot_harness._cli import main

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
TWEAK = '{"tweaked":"golden line the live run lacks"}\n'
BROWSER_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1600",
)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.skip(
            "no headless browser on this machine: the report tests need Debian's chromium "
            "and chromium-driver (`apt-get install -y chromium chromium-driver`, which "
            ".ci/run does as root)"
        )
    options = Options()
    options.binary_location = chromium
    for flag in BROWSER_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    # Both paths given: Selenium Manager has nothing to look up or download.
    session = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    try:
        yield session
    finally:
        session.quit()


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Scratch copies of four committed scenarios, one made to fail on its transcript."""
    target = tmp_path_factory.mktemp("report-fixtures")
    for name in ("subagent-mixed", "subagent-parallel", "plain-turn", "mcp-tools"):
        shutil.copytree(FIXTURES / name, target / name, symlinks=True)
    golden = target / "plain-turn" / "golden" / "transcript.jsonl"
    golden.write_text(TWEAK + golden.read_text())
    return target


@pytest.fixture(scope="module")
def report(fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "report.html"
    out = io.StringIO()
    code = main(["report", "--fixtures", str(fixtures), "--html", str(path)], out=out)
    assert code == 1, out.getvalue()  # plain-turn fails; the page is written anyway
    assert path.is_file()
    return path


@pytest.fixture
def page(browser: webdriver.Chrome, report: Path) -> webdriver.Chrome:
    browser.get(report.as_uri())
    WebDriverWait(browser, 30).until(
        lambda b: b.execute_script("return document.body.dataset.ready") == "1"
    )
    return browser


def section(page: webdriver.Chrome, name: str) -> WebElement:
    return page.find_element(By.CSS_SELECTOR, f'details.scenario[data-scenario="{name}"]')


def header(path: Path) -> dict[str, Any]:
    with path.open() as file:
        value: dict[str, Any] = json.loads(file.readline())
    return value


def test_the_tree_shows_every_session_of_subagent_mixed(
    page: webdriver.Chrome, fixtures: Path
) -> None:
    recorded = [header(p) for p in sorted((fixtures / "subagent-mixed").glob("session*.jsonl"))]
    assert len(recorded) == 3
    nodes = section(page, "subagent-mixed").find_elements(By.CSS_SELECTOR, "ul.tree li.node")
    assert sorted(str(n.get_attribute("data-session")) for n in nodes) == sorted(
        h["id"] for h in recorded
    )
    assert all(n.is_displayed() for n in nodes)
    by_id = {n.get_attribute("data-session"): n for n in nodes}
    main_id = next(h["id"] for h in recorded if h["parent_session"] is None)
    for child in (h for h in recorded if h["parent_session"] is not None):
        node = by_id[child["id"]]
        # Drawn inside its parent's node, labelled with how it was made.
        parent = node.find_element(By.XPATH, "ancestor::li[1]")
        assert parent.get_attribute("data-session") == child["parent_session"] == main_id
        assert node.text.startswith(f"{child['origin']} #{child['spawn_index']}")
    assert {n.get_attribute("data-kind") for n in nodes} == {"main", "spawn", "fork"}


def _bars(page: webdriver.Chrome, scenario: str, session_id: str) -> list[dict[str, float]]:
    row = section(page, scenario).find_element(
        By.CSS_SELECTOR, f'.timeline .row[data-session="{session_id}"]'
    )
    bars: list[dict[str, float]] = page.execute_script(
        "return Array.from(arguments[0].querySelectorAll('.bar')).map(function(b){"
        "var r=b.getBoundingClientRect();return {left:r.left,right:r.right,"
        "start:+b.dataset.start,end:+b.dataset.end};});",
        row,
    )
    return bars


def test_the_timeline_shows_the_parallel_children_overlapping(
    page: webdriver.Chrome, fixtures: Path
) -> None:
    directory = fixtures / "subagent-parallel"
    children = [header(directory / f"session.{n}.jsonl") for n in (1, 2)]
    first, second = (_bars(page, "subagent-parallel", c["id"]) for c in children)
    assert len(first) == len(second) == 2  # each child: read_file, then its answer

    def overlapping(key_start: str, key_end: str) -> list[tuple[int, int]]:
        return [
            (i, j)
            for i, a in enumerate(first)
            for j, b in enumerate(second)
            if a[key_start] < b[key_end] and b[key_start] < a[key_end]
        ]

    # The recorded times overlap, and so do the drawn bars, pixel for pixel.
    assert overlapping("start", "end"), (first, second)
    assert overlapping("left", "right") == overlapping("start", "end")
    # A call drawn after another in time is drawn to its right.
    for bars in (first, second):
        assert bars[0]["right"] <= bars[1]["left"] + 1


def test_dragging_across_the_timeline_zooms_into_that_range(
    page: webdriver.Chrome, fixtures: Path
) -> None:
    child = header(fixtures / "subagent-parallel" / "session.1.jsonl")
    before = _bars(page, "subagent-parallel", child["id"])
    track = section(page, "subagent-parallel").find_element(
        By.CSS_SELECTOR, f'.timeline .row[data-session="{child["id"]}"] .track'
    )
    left = before[0]["left"] - track.rect["x"]
    right = before[-1]["right"] - track.rect["x"]
    width = track.rect["width"]
    # Drag from just before the child's first call to just after its last one.
    drag = ActionChains(page).move_to_element_with_offset(track, int(left - width / 2) - 4, 0)
    drag.click_and_hold().move_by_offset(int(right - left) + 8, 0).release().perform()
    axis = section(page, "subagent-parallel").find_element(By.CSS_SELECTOR, ".timeline .axis .who")
    assert "zoomed" in axis.text
    after = _bars(page, "subagent-parallel", child["id"])
    widths = [b["right"] - b["left"] for b in before], [b["right"] - b["left"] for b in after]
    assert all(new > 5 * old for old, new in zip(*widths, strict=True)), widths
    ActionChains(page).double_click(axis).perform()
    assert _bars(page, "subagent-parallel", child["id"]) == before


def test_a_failing_scenario_shows_its_diff(page: webdriver.Chrome) -> None:
    failing = section(page, "plain-turn")
    assert failing.get_attribute("data-status") == "failed"
    assert failing.find_element(By.CSS_SELECTOR, ".badge").text == "FAIL"
    diff = failing.find_element(By.CSS_SELECTOR, ".failure pre.diff")
    assert diff.is_displayed()
    assert "+++ live/transcript.jsonl" in diff.text
    removed = [e.text for e in diff.find_elements(By.CSS_SELECTOR, "span.del")]
    assert any("golden line the live run lacks" in line for line in removed), removed
    passing = section(page, "subagent-parallel")
    assert passing.get_attribute("data-status") == "passed"
    assert not passing.find_elements(By.CSS_SELECTOR, ".failure")


def test_clicking_a_session_draws_its_story_and_the_transcript_opens(
    page: webdriver.Chrome, fixtures: Path
) -> None:
    child = header(fixtures / "subagent-parallel" / "session.2.jsonl")
    scenario = section(page, "subagent-parallel")
    scenario.find_element(By.CSS_SELECTOR, f'.row[data-session="{child["id"]}"] .who').click()
    story = scenario.find_element(By.CSS_SELECTOR, ".detail .story")
    assert story.get_attribute("data-session") == child["id"]
    assert "List the TODO comments in beta.py." in story.text  # its user message
    assert "read_file" in story.text  # its tool call
    assert not scenario.find_elements(By.CSS_SELECTOR, ".transcript .item")  # drawn lazily
    scenario.find_element(By.CSS_SELECTOR, "details.transcript-box > summary").click()
    entries = WebDriverWait(page, 10).until(
        lambda _: scenario.find_elements(By.CSS_SELECTOR, ".transcript .item")
    )
    agent_text = " ".join(e.text for e in entries if "agent" in (e.get_attribute("class") or ""))
    # The parent's streamed chunks, merged into one readable message.
    assert "beta.py has two TODOs (empty text, punctuation)." in agent_text


def test_mcp_calls_are_on_each_sessions_timeline_and_in_its_story(
    page: webdriver.Chrome, fixtures: Path
) -> None:
    scenario = section(page, "mcp-tools")
    for name in ("session.jsonl", "session.1.jsonl"):  # the parent and its helper
        session = header(fixtures / "mcp-tools" / name)
        row = scenario.find_element(By.CSS_SELECTOR, f'.row[data-session="{session["id"]}"]')
        ticks = row.find_elements(By.CSS_SELECTOR, ".mcp-tick")
        assert len(ticks) == 2, name  # one calc and one web call each
        assert all("MCP call" in (t.get_attribute("title") or "") for t in ticks)
    child = header(fixtures / "mcp-tools" / "session.1.jsonl")
    scenario.find_element(By.CSS_SELECTOR, f'.row[data-session="{child["id"]}"] .who').click()
    story = scenario.find_element(By.CSS_SELECTOR, ".detail .story")
    items = [e.text for e in story.find_elements(By.CSS_SELECTOR, ".item.mcp")]
    # The kind badge ("mcp") and the call: server, tool, arguments and the recorded answer.
    assert [item.removeprefix("mcp").strip() for item in items] == [
        'calc: add({"a": 40, "b": 2}) → 42',
        'web: echo({"text": "child"}) → child',
    ]


def test_the_page_loads_nothing_from_anywhere(page: webdriver.Chrome, report: Path) -> None:
    assert page.execute_script("return performance.getEntriesByType('resource').length") == 0
    html = report.read_text()
    assert "<link" not in html
    assert " src=" not in html


def test_a_screenshot_of_the_report_is_not_blank(page: webdriver.Chrome, tmp_path: Path) -> None:
    section(page, "subagent-parallel").find_element(By.CSS_SELECTOR, ".timeline")
    png = page.get_screenshot_as_png()
    (tmp_path / "report.png").write_bytes(png)
    image = Image.open(io.BytesIO(png)).convert("L")
    width, height = image.size
    assert width >= 800
    assert height >= 600
    histogram = image.histogram()  # pixels per grey level 0..255
    count = sum(histogram)
    mean = sum(level * n for level, n in enumerate(histogram)) / count
    variance = sum(n * (level - mean) ** 2 for level, n in enumerate(histogram)) / count
    assert math.sqrt(variance) > 10  # a blank or single-colour page is ~0
    assert sum(1 for n in histogram if n) > 20  # text, bars, badges: many shades
