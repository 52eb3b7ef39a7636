"""Screenshots of the demo's own pages, for the README and docs (``make screenshots``).

Usage::

    python -m otel_session.demo.screenshots docs/screenshots    # needs the test extra (Playwright)

Runs the demo stack on free loopback ports into a temporary bundle root, plays its conversations,
waits until every run is sealed, and photographs the viewer's pages in Debian's Chromium (never a
downloaded browser) at 1440 px, light and dark, and at 800 px: the sessions list, the session that
asked twice (its facts), its replay and its span tree, and the dashboard when the viewer has one.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from otel_session.demo.stack import DemoPorts, DemoStack

__all__ = ["CHROMIUM", "main", "take"]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
_ASKED_TWICE = "unparseable-date"  # the demo conversation whose agent asks for the date twice


def _pages(viewer_url: str, conversations: list[dict]) -> dict[str, str]:
    asked_twice = next(c for c in conversations if c["name"].startswith(_ASKED_TWICE))
    session, run = asked_twice["session_id"], asked_twice["run_ids"][-1]
    return {
        "sessions": viewer_url,
        "session": f"{viewer_url}sessions/{session}",
        "spans": f"{viewer_url}sessions/{session}/runs/{run}#spans",  # before the replay: a load, not a jump
        "replay": f"{viewer_url}sessions/{session}/runs/{run}",
        "dashboard": f"{viewer_url}dashboard",
    }


def take(out: Path, viewer_url: str, conversations: list[dict]) -> list[Path]:
    """Photograph the pages into ``out``; returns the files written."""
    from playwright.sync_api import sync_playwright

    written = []
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for suffix, width, scheme in (("", 1440, "light"), ("-dark", 1440, "dark"), ("-800", 800, "light")):
            context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
            page = context.new_page()
            for name, url in _pages(viewer_url, conversations).items():
                response = page.goto(url)
                if response is None or response.status == 404:
                    continue  # a page this viewer does not have
                page.wait_for_selector("body[data-ready=true]", timeout=30_000)
                if url.endswith("#spans"):  # the span tree, its run and first turn opened
                    for node in ("kind-run", "kind-turn"):
                        page.locator(f"#spans details.{node} > summary").first.click(timeout=30_000)
                    page.wait_for_selector("#spans details.kind-turn table.span-records")
                    page.eval_on_selector("#spans-section", "(section) => section.scrollIntoView()")
                target = out / f"demo-{name}{suffix}.png"
                page.screenshot(path=str(target), full_page=False)
                written.append(target)
            context.close()
        browser.close()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="directory for the PNG files (docs/screenshots)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="otel-session-screenshots-") as scratch:
        stack = DemoStack(Path(scratch) / "bundles", ports=DemoPorts(0, 0, 0, 0, 0), log_dir=Path(scratch) / "logs")
        try:
            stack.start()
            conversations = stack.play()
            stack.flush_agent()
            stack.wait_sealed(conversations)
            for path in take(args.out, stack.viewer_url, conversations):
                print(path)
        finally:
            stack.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
