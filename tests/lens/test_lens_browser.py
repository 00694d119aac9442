"""The lens in a real browser: Debian's Chromium, headless, driven by Selenium's chromedriver.

`byref demo --out DIR` makes the run and `byref lens DIR` serves it, both through the command
line; the browser checks what a person would look at, and saves a screenshot.
"""

from __future__ import annotations

import select
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _lens_rig import BYREF, SCREENSHOTS, DemoRun, artifacts_dir

from _waits import scaled
from byref.demo.data import open_rows

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = ("--headless=new", "--no-sandbox", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-gpu",
         "--window-size=1280,1600")


def lens_command(run_dir: Path) -> Iterator[str]:
    """Start `byref lens DIR` and yield the URL it prints (its first line, within 60 s)."""
    proc = subprocess.Popen([*BYREF, "lens", str(run_dir)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "byref lens printed no URL within 60 s"
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("byref lens: http://127.0.0.1:"), line
        yield line.split()[2]
    finally:
        proc.terminate()
        proc.wait(timeout=scaled(30))


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    webdriver = pytest.importorskip(
        "selenium.webdriver", reason="selenium is not installed: pip install -e '.[lens-test]'")
    for needed in (CHROMIUM, CHROMEDRIVER):
        if not needed.exists():
            pytest.skip(f"{needed} is missing: apt-get install -y chromium chromium-driver "
                        "(scripts/services.sh does this where apt-get is available)")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    from selenium.webdriver.chrome.service import Service

    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(120)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def lens_url(demo_run: DemoRun) -> Iterator[str]:
    yield from lens_command(demo_run.out)


def load(driver: Any, url: str) -> float:
    """Navigate and return the page's load time in seconds (navigation timing, not a clock)."""
    driver.get(url)
    timing = driver.execute_script(
        "const t = performance.getEntriesByType('navigation')[0];"
        "return [t.startTime, t.loadEventEnd];")
    return float(timing[1] - timing[0]) / 1000.0


def test_the_page_shows_the_demo_ledger(browser: Any, lens_url: str, demo_run: DemoRun,
                                        tmp_path_factory: pytest.TempPathFactory,
                                        record_property: Any) -> None:
    from selenium.webdriver.common.by import By

    seconds = load(browser, lens_url)
    record_property("lens_load_seconds", seconds)
    print(f"lens overview load time (demo run): {seconds:.3f} s")
    shot = artifacts_dir() / "lens-overview.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    SCREENSHOTS.append(shot)
    ledger = demo_run.report["byref"]
    for name in ("model_read_chars", "model_read_tokens", "model_written_chars",
                 "model_written_tokens"):
        shown = browser.find_element(By.CSS_SELECTOR, f'[data-figure="{name}"]')
        assert int(shown.get_attribute("data-value")) == ledger[name], name
        assert shown.text == f"{ledger[name]:,}"  # what a person reads, not only the attribute
    bars = browser.find_elements(By.CSS_SELECTOR, "#chart-chars rect.visible")
    assert len(bars) == ledger["requests"] * 2  # a call and its result per request
    request = browser.find_element(By.CSS_SELECTOR, "#call-call_3 details.request")
    assert not request.find_element(By.TAG_NAME, "pre").is_displayed()
    request.find_element(By.TAG_NAME, "summary").click()
    assert "[4 tool tool_result]" in request.find_element(By.TAG_NAME, "pre").text


def test_the_query_result_table_pages_through_all_148_rows(
        browser: Any, lens_url: str, demo_run: DemoRun) -> None:
    from selenium.webdriver.common.by import By

    load(browser, lens_url)
    browser.find_element(By.CSS_SELECTOR, "#call-call_2").find_element(
        By.LINK_TEXT, "view the value").click()
    ids: list[str] = []
    for _ in range(10):  # bounded: 148 rows are 3 pages
        rows = browser.find_elements(By.CSS_SELECTOR, "table.rows tbody tr")
        ids += [r.find_elements(By.TAG_NAME, "td")[1].text for r in rows]
        following = browser.find_elements(By.ID, "next-page")
        if not following:
            break
        following[0].click()
    assert ids == [r["id"] for r in open_rows(demo_run.out / "export.json")]
    assert len(ids) == 148
    total = browser.find_element(By.CSS_SELECTOR, '[data-figure="rows-total"]')
    assert total.text == "148"


def test_the_pdf_preview_renders(browser: Any, lens_url: str,
                                 tmp_path_factory: pytest.TempPathFactory) -> None:
    from selenium.webdriver.common.by import By

    load(browser, lens_url)
    browser.find_element(By.CSS_SELECTOR, "#call-call_3 a[data-ref]").click()
    assert "report/pdf" in browser.find_element(By.ID, "meta").text
    image = browser.find_element(By.ID, "pdf-page")
    width, height = browser.execute_script(
        "return [arguments[0].naturalWidth, arguments[0].naturalHeight]", image)
    assert width > 500 and height > 300  # a decoded page image, not a broken icon
    shot = artifacts_dir() / "lens-pdf.png"
    browser.save_screenshot(str(shot))
    SCREENSHOTS.append(shot)


def test_no_script_runs_in_the_page(browser: Any, lens_url: str) -> None:
    load(browser, lens_url)
    logs = browser.get_log("browser") if hasattr(browser, "get_log") else []
    assert not [entry for entry in logs if "Content Security Policy" in entry.get("message", "")]
    assert browser.title.startswith("run ")
    assert browser.execute_script("return document.scripts.length") == 0


SPILL = """
const out = [];
for (const el of document.querySelectorAll('main table, main pre, main svg, main .card')) {
  const box = el.parentElement.closest('.card, main').getBoundingClientRect();
  const r = el.getBoundingClientRect();
  if (r.right > box.right + 1) out.push([el.tagName, el.id || el.className, r.right, box.right]);
}
return out;"""


def test_nothing_leaves_its_card_and_the_page_never_scrolls_sideways(
        browser: Any, lens_url: str) -> None:
    """Issue 25.9: tables overflowed their cards and the chart spilled past the page. Measured
    by element boxes: at 1280 px every table, pre, chart and card stays inside its card; at
    800 px what cannot fit scrolls inside its card, and the page itself never scrolls
    sideways."""
    from selenium.webdriver.common.by import By

    pages = ["", "result/2/0", "result/4/0"]
    load(browser, lens_url)
    export = browser.find_element(By.CSS_SELECTOR, "#call-call_1 a[data-ref]").get_attribute(
        "href")
    pages.append(export.removeprefix(lens_url) + "?path=%2Fitems")
    try:
        for width in (1280, 800):
            browser.set_window_size(width, 1600)
            for page in pages:
                load(browser, lens_url + page)
                if width == 1280:
                    assert browser.execute_script(SPILL) == [], page
                wide, view = browser.execute_script(
                    "return [document.documentElement.scrollWidth, window.innerWidth]")
                assert wide <= view, (width, page, wide, view)
        load(browser, lens_url + "result/4/0")
        shot = artifacts_dir() / "lens-result-800.png"
        assert browser.save_screenshot(str(shot))
        SCREENSHOTS.append(shot)
    finally:
        browser.set_window_size(1280, 1600)


def test_empty_sections_are_facts_labels_are_whole_and_no_field_is_null(
        browser: Any, lens_url: str) -> None:
    from selenium.webdriver.common.by import By

    load(browser, lens_url)
    empty = [e for e in browser.find_elements(By.CSS_SELECTOR, "main .card")
             if e.text == "Nothing was refused in this run."]
    assert len(empty) == 1 and "gap" not in empty[0].get_attribute("class")
    assert empty[0].value_of_css_property("border-left-width") == "1px"  # not the warning bar
    labels = browser.execute_script(  # the drawn text (each label's <title> repeats it)
        "return [...document.querySelectorAll('#chart-chars text.label')]"
        ".map(t => t.firstChild.nodeValue)")
    rows = browser.find_elements(By.CSS_SELECTOR, "#turns tbody tr")
    whole = [f"seq {r.find_elements(By.TAG_NAME, 'td')[0].text} "
             f"{r.find_elements(By.TAG_NAME, 'td')[1].text}: "
             f"{r.find_elements(By.TAG_NAME, 'td')[2].text}" for r in rows]
    assert labels == whole  # each label whole, as the table names the turn
    assert "tool result export_work_items" in " ".join(labels)  # was cut to "export_work_it"
    trace = browser.find_element(By.ID, "trace").text
    assert "null" not in trace and "ref_type" in trace


def test_a_stored_result_is_drawn_as_its_artifact_page_draws_it(
        browser: Any, lens_url: str) -> None:
    from selenium.webdriver.common.by import By

    load(browser, lens_url + "result/2/0")
    assert not browser.find_elements(By.CSS_SELECTOR, "pre#render")  # no 2 MB wall of text
    browser.find_element(By.CSS_SELECTOR, '#render a[data-pointer="items"]').click()
    total = browser.find_element(By.CSS_SELECTOR, '[data-figure="rows-total"]')
    assert total.text == "3,760"
    assert len(browser.find_elements(By.CSS_SELECTOR, "table.rows tbody tr")) == 50
