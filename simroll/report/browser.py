"""A headless Chromium for looking at reports: the README screenshot and the browser tests.

Needs Debian's ``chromium`` and ``chromium-driver`` (``make browser`` installs them) and
``selenium`` (the ``dev`` extra). :func:`missing_browser` says in one sentence what is absent, so
tests can skip with that reason; :func:`headless_chromium` starts a browser that runs as root,
without a GPU, without network side traffic and with a fresh profile, logging console messages.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser")
DRIVER_NAMES = ("chromedriver",)


def _which(names: tuple[str, ...], variable: str) -> str | None:
    if os.environ.get(variable):  # an explicit choice: used only if it exists
        return shutil.which(os.environ[variable])
    return next((path for path in map(shutil.which, names) if path), None)


def chromium_path() -> str | None:
    """The Chromium binary (``$SIMROLL_CHROMIUM`` or on ``PATH``), or None."""
    return _which(CHROMIUM_NAMES, "SIMROLL_CHROMIUM")


def chromedriver_path() -> str | None:
    """The chromedriver binary (``$SIMROLL_CHROMEDRIVER`` or on ``PATH``), or None."""
    return _which(DRIVER_NAMES, "SIMROLL_CHROMEDRIVER")


def missing_browser() -> str | None:
    """Why no headless browser can run here, or None when everything is installed."""
    missing = []
    if chromium_path() is None:
        missing.append("chromium")
    if chromedriver_path() is None:
        missing.append("chromedriver")
    if missing:
        return (
            f"{' and '.join(missing)} not installed (`make browser`, i.e. "
            "`apt-get install -y chromium chromium-driver`, installs them)"
        )
    if importlib.util.find_spec("selenium") is None:
        return "selenium not installed (`pip install -e '.[dev]'`)"
    return None


@contextmanager
def headless_chromium(width: int = 1400, height: int = 1000) -> Iterator[object]:
    """A selenium Chrome driver on headless Chromium; quits and removes its profile on exit."""
    reason = missing_browser()
    if reason is not None:
        raise RuntimeError(f"no headless browser: {reason}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = Path(tempfile.mkdtemp(prefix="simroll-chromium-"))
    options = webdriver.ChromeOptions()
    options.binary_location = chromium_path()
    for argument in (
        "--headless",
        "--no-sandbox",  # needed as root
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--autoplay-policy=no-user-gesture-required",
        "--hide-scrollbars",
        f"--window-size={width},{height}",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(chromedriver_path()))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def save_full_page_screenshot(driver, url: str, path: str | Path, width: int = 1400) -> Path:
    """Open ``url`` and save a PNG of the whole page (the window is grown to the page height)."""
    driver.get(url)
    height = driver.execute_script(
        "return Math.ceil(document.documentElement.scrollHeight || document.body.scrollHeight);"
    )
    driver.set_window_size(width, max(600, int(height)))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    return path
