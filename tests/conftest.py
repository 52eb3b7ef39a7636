"""Fixtures every area shares: Debian's Chromium driven by Playwright (never a downloaded browser).

The suite runs on parallel workers (``make test``: pytest-xdist, ``--dist loadfile``), so a worker
runs whole test files in any order: a fixture here must leave nothing behind for the next file.
On workers the files marked ``slow`` (venv builds, real frameworks, kill -9 loops) are handed out
first, so that no worker is left with one of them while the others have finished.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: every worker sorts alike
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: file order kept


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium, launched once per test file. Not once per session: Playwright's sync API keeps an
    asyncio loop running in the main thread while it is open, and a later file's ``asyncio.run``
    on the same worker would fail with "cannot be called from a running event loop"."""
    playwright_sync = pytest.importorskip("playwright.sync_api")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is missing (make browser installs Debian's chromium)")
    with playwright_sync.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()
