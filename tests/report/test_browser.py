"""report.html in a real headless Chromium: no console errors, tables, sorting, filtering, video.

Marked ``browser``; skipped, naming what is absent, only when chromium, chromedriver or selenium
cannot be found (``make browser`` installs the first two). One browser serves the whole module.
"""

from __future__ import annotations

import struct

import pytest

from simroll.report import write_comparison_report, write_html_report
from simroll.report.browser import headless_chromium, missing_browser, save_full_page_screenshot

from .conftest import CERTIFY_SPECS, FAST_FAILURES, SPECS, write_certify_run, write_eval_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(missing_browser() is not None, reason=f"no browser: {missing_browser()}"),
]


@pytest.fixture(scope="module")
def browser():
    with headless_chromium() as driver:
        driver.set_script_timeout(20)
        yield driver


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    root = tmp_path_factory.mktemp("pages")
    eval_run = write_eval_run(root / "eval", videos=2)
    certify_run = write_certify_run(root / "certify")
    corrupt = write_eval_run(root / "corrupt", videos=0)
    lines = (corrupt / "records.jsonl").read_text().splitlines(keepends=True)
    (corrupt / "records.jsonl").write_text("".join(lines[:-3]) + "not json\n" + lines[-1][:20])
    return {
        "eval": write_html_report(eval_run),
        "certify": write_html_report(certify_run),
        "corrupt": write_html_report(corrupt),
        "compare": write_comparison_report(eval_run, corrupt),
    }


def open_page(browser, path) -> list[dict]:
    """Load ``path``; return the console messages it logged (our script sets data-ready last)."""
    browser.get_log("browser")  # drop messages of earlier pages
    browser.get(path.as_uri())
    assert browser.execute_script("return document.body.dataset.ready") == "true"
    return browser.get_log("browser")


def visible_rows(browser, table_id: str) -> list:
    return [
        row
        for row in browser.find_elements("css selector", f"#{table_id} tbody tr")
        if row.is_displayed()
    ]


@pytest.mark.parametrize("name", ["eval", "certify", "corrupt", "compare"])
def test_pages_load_without_console_errors(browser, pages, name):
    messages = open_page(browser, pages[name])
    assert [m for m in messages if m["level"] == "SEVERE"] == []


def test_console_errors_are_seen_at_all(browser, tmp_path):
    # Without this, "no console errors" above could pass because no log was collected.
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><body><script>console.error('boom'); no_such();</script>")
    browser.get_log("browser")
    browser.get(page.as_uri())
    messages = [m["message"] for m in browser.get_log("browser") if m["level"] == "SEVERE"]
    assert any("boom" in m for m in messages) and any("no_such" in m for m in messages)


def test_eval_tables_have_the_expected_rows(browser, pages):
    open_page(browser, pages["eval"])
    assert len(visible_rows(browser, "episodes-table")) == len(SPECS)
    assert len(visible_rows(browser, "scores-table")) == 5  # 4 groups + the task's "all" row
    assert browser.find_element("id", "tolerance-plot").find_element("css selector", "svg")


def test_sorting_and_filtering_the_episode_table(browser, pages):
    open_page(browser, pages["eval"])
    headers = browser.find_elements("css selector", "#episodes-table thead th")
    seed_column = [h.text for h in headers].index("seed")
    headers[seed_column].click()
    seeds = [
        int(row.find_elements("css selector", "td")[seed_column].text)
        for row in visible_rows(browser, "episodes-table")
    ]
    assert seeds == sorted(seeds)
    headers[seed_column].click()
    assert headers[seed_column].get_attribute("aria-sort") == "descending"
    tools = browser.find_element("css selector", ".table-tools[data-table=episodes-table]")
    select = tools.find_element("css selector", "select")
    select.find_element("css selector", "option[value=tsr-fail]").click()
    assert len(visible_rows(browser, "episodes-table")) == 2  # the failure and the crash
    assert tools.find_element("css selector", ".count").text == f"showing 2 of {len(SPECS)}"
    select.find_element("css selector", "option[value='']").click()
    tools.find_element("css selector", "input[type=search]").send_keys("stiff_x2")
    assert len(visible_rows(browser, "episodes-table")) == len(SPECS) // 2


def test_a_video_loads_and_plays(browser, pages):
    open_page(browser, pages["eval"])
    assert len(browser.find_elements("css selector", "video")) == 2
    result = browser.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        const video = document.querySelector("video");
        const codec = video.canPlayType('video/mp4; codecs="avc1.64001E"');
        function report(stage) {
          done({stage, codec, readyState: video.readyState, duration: video.duration,
                time: video.currentTime,
                error: video.error && [video.error.code, video.error.message]});
        }
        video.addEventListener("error", () => report("error"));
        function play() {
          video.play().then(() => setTimeout(() => report("played"), 400))
                      .catch((e) => report("play rejected: " + e));
        }
        if (video.readyState >= 1) play(); else video.addEventListener("loadedmetadata", play);
        """
    )
    if result["error"] or result["stage"] != "played":
        if result["codec"] == "" or (result["error"] and result["error"][0] == 4):
            pytest.xfail(
                "this Chromium build cannot decode H.264 (proprietary codecs off): "
                f"canPlayType(avc1)={result['codec']!r}, MediaError={result['error']}"
            )
        pytest.fail(f"video did not play: {result}")
    assert result["readyState"] >= 1 and result["duration"] > 0
    assert result["time"] > 0


def test_corrupt_run_page_shows_the_problems_and_no_record_rows(browser, pages):
    open_page(browser, pages["corrupt"])
    problems = browser.find_element("id", "problems")
    assert problems.is_displayed()
    assert "corrupted line(s) not counted" in problems.text
    assert "truncated last line" in problems.text
    rows = visible_rows(browser, "episodes-table")
    assert len(rows) == len(SPECS)
    assert sum("no record" in row.text for row in rows) == 3  # 2 dropped, 1 truncated


def test_certification_outcomes_filter_to_the_losses(browser, pages):
    open_page(browser, pages["certify"])
    assert len(visible_rows(browser, "outcomes-table")) == len(CERTIFY_SPECS)
    tools = browser.find_element("css selector", ".table-tools[data-table=outcomes-table]")
    tools.find_element("css selector", "option[value=loss]").click()
    assert len(visible_rows(browser, "outcomes-table")) == len(FAST_FAILURES)
    assert browser.find_element("id", "candidates-table").is_displayed()


def test_screenshot_of_the_page(browser, pages, tmp_path):
    path = save_full_page_screenshot(browser, pages["eval"].as_uri(), tmp_path / "report.png")
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", header[16:24])
    assert width >= 1000 and height >= 1500  # the whole page, not just the first screen
    assert path.stat().st_size > 50_000
