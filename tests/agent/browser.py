"""Headless Chromium for the ``rods view`` tests (Debian's chromium and chromedriver).

selenium drives Debian's ``chromedriver``, which comes in the same package version as the
browser, so nothing is downloaded (selenium's own driver manager is never asked: the
driver's path is given). Chromium starts with the flags that keep it off the network, and
an empty profile.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


def available() -> bool:
    """Whether Chromium, its driver and selenium are installed."""
    try:
        import selenium  # noqa: F401 - only whether it imports
    except ImportError:
        return False
    return bool(CHROMIUM and CHROMEDRIVER)


@contextmanager
def chromium(width: int = 1400, height: int = 900) -> Iterator[Any]:
    """A selenium driver of headless Chromium with an empty profile (removed afterwards)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    with tempfile.TemporaryDirectory(prefix="rods-chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
        try:
            yield driver
        finally:
            driver.quit()


def open_page(driver: Any, page: Path, timeout: float = 60) -> None:
    """Open a ``rods view`` page and wait until its data is read."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(page.resolve().as_uri())
    WebDriverWait(driver, timeout).until(
        lambda d: d.execute_script("return document.body.dataset.ready === '1'")
    )
