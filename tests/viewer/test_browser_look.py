"""The viewer's look in Debian's Chromium: both widths with no sideways page scroll, dark mode
(the system's, and the header's toggle), local times with UTC on hover, and ids copied on click."""

from __future__ import annotations

import pytest

pytest.importorskip("playwright.sync_api")

pytestmark = pytest.mark.browser

WIDTHS = (800, 1440)


def _pages(sample) -> dict[str, str]:
    return {
        "sessions": "/",
        "session": f"/sessions/{sample.session_id}",
        "replay": f"/sessions/{sample.session_id}/runs/{sample.latest_run}",
        "compare": f"/compare?left={sample.session_id}/{sample.older_run}&right={sample.session_id}/{sample.latest_run}",
        "open bundle": "/open",
        "dashboard": "/dashboard?since=2026-11-29T00:00&until=2026-12-02T00:00",
    }


def _context(browser, **options):
    return browser.new_context(viewport={"width": options.pop("width", 1400), "height": 900}, **options)


def _luminance(page, selector: str = "body") -> float:
    """The relative luminance (0 black … 1 white) of ``selector``'s computed background (or the page's)."""
    return page.evaluate("""(selector) => {
        let element = document.querySelector(selector);
        let color = getComputedStyle(element).backgroundColor;
        if (color === "rgba(0, 0, 0, 0)") color = getComputedStyle(document.documentElement).backgroundColor;
        const [r, g, b] = color.match(/[\\d.]+/g).slice(0, 3).map(Number).map((v) => v / 255)
            .map((c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4));
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    }""", selector)


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_fits_its_width_with_no_sideways_page_scroll(browser, serve, sample, width):
    server = serve(sample.root)
    context = _context(browser, width=width)
    try:
        page = context.new_page()
        for name, path in _pages(sample).items():
            page.goto(server.url + path)
            if name != "open bundle":
                page.wait_for_selector("body[data-ready=true]")
            overflow = page.evaluate(
                "() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
            assert overflow <= 0, f"{name} at {width} px scrolls sideways by {overflow} px"
    finally:
        context.close()


@pytest.mark.parametrize("name", ["sessions", "session", "replay", "dashboard"])
def test_dark_mode_follows_the_system(browser, serve, sample, name):
    server = serve(sample.root)
    shades = {}
    for scheme in ("light", "dark"):
        context = _context(browser, color_scheme=scheme)
        try:
            page = context.new_page()
            page.goto(server.url + _pages(sample)[name])
            page.wait_for_selector("body[data-ready=true]")
            shades[scheme] = (_luminance(page), _luminance(page, "table, .conversation, .chart"))
        finally:
            context.close()
    assert shades["light"][0] > 0.8 and shades["dark"][0] < 0.05, shades
    assert shades["dark"][1] < 0.05, shades  # the tables and panels too, not only the page


def test_the_theme_toggle_chooses_and_is_kept_across_pages(browser, serve, sample):
    server = serve(sample.root)
    context = _context(browser, color_scheme="light")
    try:
        page = context.new_page()
        page.goto(server.url + "/")
        page.wait_for_selector("body[data-ready=true]")
        toggle = page.locator("#theme-toggle")
        assert toggle.get_attribute("data-choice") == "auto" and _luminance(page) > 0.8
        toggle.click()
        assert toggle.get_attribute("data-choice") == "dark" and _luminance(page) < 0.05
        page.goto(server.url + _pages(sample)["session"])
        page.wait_for_selector("body[data-ready=true]")
        assert page.locator("html").get_attribute("data-theme") == "dark" and _luminance(page) < 0.05
        page.locator("#theme-toggle").click()  # dark → light, whatever the system says
        assert page.locator("html").get_attribute("data-theme") == "light" and _luminance(page) > 0.8
        page.locator("#theme-toggle").click()  # light → auto: the system's again
        assert page.locator("html").get_attribute("data-theme") is None
    finally:
        context.close()


def test_times_are_local_with_utc_on_hover_and_ids_are_copied_on_click(browser, serve, sample):
    server = serve(sample.root)
    context = _context(browser, timezone_id="Asia/Tokyo")  # UTC+9, no summer time
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    try:
        page = context.new_page()
        page.goto(server.url + _pages(sample)["session"])
        page.wait_for_selector("body[data-ready=true]")
        row = page.locator(f"#runs tbody tr[data-run-id='{sample.latest_run}']")
        shown = row.locator("time")
        utc = shown.get_attribute("datetime")  # 2026-11-29T22:52:01.123456Z
        hours = (int(utc[11:13]) + 9) % 24
        assert shown.inner_text()[11:13] == f"{hours:02d}" and shown.inner_text()[13:19] == utc[13:19]
        assert shown.get_attribute("title").endswith("(UTC)") and utc[11:19] in shown.get_attribute("title")
        run_id = row.locator("code.id")
        assert run_id.get_attribute("data-copy") == sample.latest_run
        run_id.click()
        assert page.evaluate("() => navigator.clipboard.readText()") == sample.latest_run
    finally:
        context.close()


def test_one_capture_column_speaks_only_when_a_run_is_not_the_normal_case(browser, serve, sample):
    server = serve(sample.root)
    context = _context(browser)
    try:
        page = context.new_page()
        page.goto(server.url + "/")
        page.wait_for_selector("body[data-ready=true]")
        headers = page.locator("#sessions thead th").all_inner_texts()
        assert "Capture" in headers and "Integrity" not in headers
        cells = {row.get_attribute("data-run-id"): row.locator("td.capture")
                 for row in page.locator("#sessions tbody tr").all()}
        assert cells[sample.latest_run].inner_text() == ""  # complete and verified: nothing to say
        broken = cells[sample.broken_run].locator(".badge")
        assert broken.inner_text() == "invalid bundle"
        assert "capture: complete" in broken.get_attribute("title") and "integrity: invalid" in broken.get_attribute("title")
        page.select_option("select[name=status]", "capture_failed")
        page.wait_for_function("() => document.querySelectorAll('#sessions tbody tr').length === 1")
        assert page.locator("#sessions tbody tr").get_attribute("data-run-id") == sample.broken_run
        page.goto(server.url + _pages(sample)["session"])
        page.wait_for_selector("body[data-ready=true]")
        assert "Integrity" not in page.locator("#runs thead th").all_inner_texts()
        assert page.locator(f"#runs tbody tr[data-run-id='{sample.latest_run}'] td.capture").inner_text() == ""
    finally:
        context.close()


@pytest.mark.parametrize("name", ["sessions", "replay"])
def test_every_time_shown_is_local_with_utc_on_hover(browser, serve, sample, name):
    server = serve(sample.root)
    context = _context(browser, timezone_id="Asia/Tokyo")  # UTC+9
    try:
        page = context.new_page()
        page.goto(server.url + _pages(sample)[name])
        page.wait_for_selector("body[data-ready=true]")
        scope = "#sessions tbody" if name == "sessions" else "#p-at"
        page.wait_for_selector(f"{scope} time")
        shown = page.locator(f"{scope} time").first
        utc = shown.get_attribute("datetime")
        assert shown.inner_text()[11:13] == f"{(int(utc[11:13]) + 9) % 24:02d}"
        assert shown.get_attribute("title") == f"{utc[:10]} {utc[11:19]}Z (UTC)"
        assert "Z" not in page.inner_text(scope)  # no UTC-only stamp left beside it
    finally:
        context.close()


def test_the_dashboard_s_hours_are_local_and_its_days_say_utc(browser, serve, sample):
    server = serve(sample.root)
    context = _context(browser, timezone_id="Asia/Tokyo")  # UTC+9
    try:
        page = context.new_page()
        for bucket in ("hour", "day"):
            page.goto(server.url + _pages(sample)["dashboard"] + f"&bucket={bucket}")
            page.wait_for_selector("body[data-ready=true]")
            labels = page.evaluate("() => window.Chart.getChart('chart-volume').data.labels")
            answer = page.evaluate(f"() => fetch('/api/dashboard?since=2026-11-29T00:00&until=2026-12-02T00:00"
                                   f"&bucket={bucket}').then((r) => r.json())")
            starts = [entry["start"] for entry in answer["buckets"]]
            if bucket == "hour":
                assert [label[11:13] for label in labels] == [f"{(int(start[11:13]) + 9) % 24:02d}" for start in starts]
            else:
                assert labels == [f"{start} (UTC day)" for start in starts]
    finally:
        context.close()
