"""report.html in a real headless Chromium (Debian's chromium and chromium-driver, driven by selenium): the
page loads without a console error, its first 1280x800 view names every regressed case, and nothing runs off
the page sideways. Each check has a negative control: a page that breaks it must fail it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib", reason="plots need matplotlib: pip install -e '.[test]'")
webdriver = pytest.importorskip("selenium.webdriver",
                                reason="the browser test needs selenium: pip install -e '.[test]'")

from tests.plots.test_report_html import regressed_report  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip("the browser test needs Debian's chromium and chromium-driver on PATH "
                "(apt-get install chromium chromium-driver; .ci/run installs them)", allow_module_level=True)

VIEW = (1280, 800)

VISIBLE_TEXT = """
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
const seen = [];
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.textContent.trim()) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const rect of range.getClientRects()) {
        if (rect.width > 0 && rect.top >= 0 && rect.bottom <= window.innerHeight && rect.left >= 0
                && rect.right <= window.innerWidth) { seen.push(node.textContent); break; }
    }
}
return seen.join("\\n");
"""
"""The text of every text node with a line wholly inside the first view (the page is not scrolled)."""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 f"--window-size={VIEW[0]},{VIEW[1]}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": VIEW[0], "height": VIEW[1], "deviceScaleFactor": 1, "mobile": False})
    yield driver
    driver.quit()


def opened(browser: Any, page: Path) -> list[dict[str, Any]]:
    """Load ``page`` and return the console entries it logged at error level."""
    browser.get_log("browser")  # drop what earlier pages logged
    browser.get(page.as_uri())
    assert browser.execute_script("return document.readyState") == "complete"
    assert browser.execute_script("return [window.innerWidth, window.innerHeight]") == list(VIEW)
    return [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


def first_view(browser: Any) -> str:
    browser.execute_script("window.scrollTo(0, 0)")
    return str(browser.execute_script(VISIBLE_TEXT))


def overflows_sideways(browser: Any) -> bool:
    return bool(browser.execute_script(
        "return document.documentElement.scrollWidth > window.innerWidth"))


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    return regressed_report(tmp_path_factory.mktemp("browser"))


def test_report_loads_without_console_errors_and_opens_on_the_regressions(
        browser: Any, report: tuple[Path, list[str]], tmp_path: Path) -> None:
    page, regressed = report
    assert len(regressed) == 4
    assert opened(browser, page) == []
    view = first_view(browser)
    assert "4 case(s) regressed" in view
    missing = [nodeid for nodeid in regressed if nodeid not in view]
    assert not missing, f"not in the first {VIEW[0]}x{VIEW[1]} view: {missing}"
    assert not overflows_sideways(browser), "something on the page is wider than the window"
    browser.save_screenshot(str(tmp_path / "first-view.png"))


def test_first_view_check_fails_when_the_regressions_follow_the_figures(
        browser: Any, report: tuple[Path, list[str]], tmp_path: Path) -> None:
    """Negative control: the same report with the verdict list moved after the figures (the former layout)."""
    page, regressed = report
    text = page.read_text(encoding="utf-8")
    start, figures = text.index('<h2 id="verdicts">'), text.index("<h2>Figures</h2>")
    table = text.index("<h2>Cases and verdicts</h2>")
    moved = text[:start] + text[figures:table] + text[start:figures] + text[table:]
    late = tmp_path / "late.html"
    late.write_text(moved, encoding="utf-8")
    assert opened(browser, late) == []
    view = first_view(browser)
    assert not [nodeid for nodeid in regressed if nodeid in view]


def test_console_check_catches_an_error_and_sideways_check_a_pre(browser: Any, tmp_path: Path) -> None:
    """Negative controls: a script error is logged at error level; a long line in <pre> overflows."""
    broken = tmp_path / "broken.html"
    broken.write_text("<!DOCTYPE html><html><body><pre>" + "x" * 400 + "</pre>"
                      "<script>undefinedFunction()</script></body></html>", encoding="utf-8")
    errors = opened(browser, broken)
    assert errors and "undefinedFunction" in errors[0]["message"]
    assert overflows_sideways(browser)
