"""The viewer's pages in Debian's Chromium on a 2,000-event run: time to interactive and weight.

Each page marks ``otel-session:ready`` (``performance.mark``) once its data is rendered (the replay
page after its first render: conversation, timeline and state graph). Measured, median of
``REPEATS`` fresh loads: the sessions list, the session page, the replay page (also: bytes
transferred, and one seek to the middle until two frames later), and the offline page from
choosing a downloaded bundle to its first render. Target: every page under 1 s.

Used by ``bench.viewer`` (``page_figures()``); skipped, with a note, where Chromium or Playwright
is missing. Never downloads a browser.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
from pathlib import Path

from werkzeug.serving import make_server

from bench import Figure
from otel_session.viewer import create_app
from otel_session.bundle.write import BundleWriter

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
TURNS = 13
DELTAS = 150
REPEATS = 5
TARGET_MS = 1000
SESSION_ID = "bench-pages"
RUN_ID = "run-00000000-0000-4000-8000-00000000b001"

_READY = "() => performance.getEntriesByName('otel-session:ready')[0]?.startTime ?? null"
_SEEK = """async (seq) => {
    const cursor = document.getElementById('cursor');
    const started = performance.now();
    cursor.value = String(seq);
    cursor.dispatchEvent(new Event('input'));
    await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
    return performance.now() - started;
}"""


def record_pages_run(root: Path) -> int:
    """One sealed run of ~2,100 records: turns with a streamed reply, a tool, a slot write and a verdict."""
    writer = BundleWriter(root)
    run = writer.open_run(session_id=SESSION_ID, run_id=RUN_ID, agent="bench", service="bench")
    at = 1_796_000_000_000_000_000
    count = 0

    def add(kind: str, payload: dict | None = None, **ids) -> None:
        nonlocal at, count
        run.append(kind, payload, at_ns=at, **ids)
        at += 20_000_000
        count += 1

    add("run_started", {"kind": "live", "agent": "bench"})
    states = ["greet", "ask_date", "ask_party", "ask_time", "confirm"]
    for turn in range(TURNS):
        state, after = states[turn % len(states)], states[(turn + 1) % len(states)]
        add("turn_started", {"state": state, "required_slots": ["date"]}, turn_index=turn)
        add("message_started", {"role": "user"}, turn_index=turn, message_id=f"u{turn}")
        add("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": f"user turn {turn}"}]},
            turn_index=turn, message_id=f"u{turn}")
        add("message_started", {"role": "assistant"}, turn_index=turn, message_id=f"a{turn}")
        for index in range(DELTAS):
            add("assistant_delta", {"index": 0, "kind": "text", "delta": f"tok{index} "}, turn_index=turn, message_id=f"a{turn}")
        text = "".join(f"tok{index} " for index in range(DELTAS))
        add("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": text}], "model": "bench-model",
                                 "usage": {"input_tokens": 100, "output_tokens": DELTAS}}, turn_index=turn, message_id=f"a{turn}")
        add("tool_execution_started", {"name": "lookup", "arguments": {"turn": turn}}, turn_index=turn, tool_call_id=f"t{turn}")
        add("tool_execution_finished", {"status": "ok", "result": {"ok": True}}, turn_index=turn, tool_call_id=f"t{turn}")
        add("slot_write", {"slot": "date", "value": "h:0", "previous": None, "source": "nlu"}, turn_index=turn)
        add("transition_verdict", {"from": state, "to": after, "reason": "next", "candidates": [after]}, turn_index=turn)
        add("turn_finished", {"state": after, "required_slots": ["date"], "missing_required_slots": []}, turn_index=turn)
    run.close(run_status="ok")
    writer.shutdown()
    return count + 1  # run_finished


def _ready_ms(page, url: str) -> float:
    page.goto(url)
    page.wait_for_selector("body[data-ready=true]", timeout=30_000)
    return page.evaluate(_READY)


def page_figures() -> tuple[list[Figure], dict]:
    """Figures for the sessions, session, replay and offline pages (empty where no browser runs)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return [], {"pages": "skipped: playwright is not installed"}
    if not os.access(CHROMIUM, os.X_OK):
        return [], {"pages": f"skipped: {CHROMIUM} is missing"}
    with tempfile.TemporaryDirectory(prefix="otel-session-bench-pages-") as tmp:
        root = Path(tmp) / "bundles"
        events = record_pages_run(root)
        server = make_server("127.0.0.1", 0, create_app({"BUNDLE_DIR": str(root)}), threaded=True)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        base = f"http://127.0.0.1:{server.server_port}"
        replay_url = f"{base}/sessions/{SESSION_ID}/runs/{RUN_ID}"
        timings: dict[str, list[float]] = {"sessions": [], "session": [], "replay": [], "offline": [], "seek": []}
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                context = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
                page = context.new_page()
                _ready_ms(page, replay_url)  # warm the server's caches once
                weight = page.evaluate("() => performance.getEntries().filter(e => 'transferSize' in e)"
                                       ".reduce((sum, e) => sum + e.transferSize, 0)")
                with page.expect_download() as download:
                    page.click("#download")
                bundle_file = Path(tmp) / "bundle.tar"
                download.value.save_as(bundle_file)
                for _ in range(REPEATS):
                    timings["sessions"].append(_ready_ms(page, f"{base}/"))
                    timings["session"].append(_ready_ms(page, f"{base}/sessions/{SESSION_ID}"))
                    timings["replay"].append(_ready_ms(page, replay_url))
                    timings["seek"].append(page.evaluate(_SEEK, events // 2))
                    page.goto(f"{base}/open")
                    page.evaluate("() => document.getElementById('bundle-file').addEventListener('change', "
                                  "() => { window.__chosen = performance.now(); }, { capture: true })")
                    page.set_input_files("#bundle-file", str(bundle_file))
                    page.wait_for_selector("body[data-ready=true]", timeout=30_000)
                    timings["offline"].append(page.evaluate(f"() => ({_READY})() - window.__chosen"))
                browser.close()
        finally:
            server.shutdown()
            server.server_close()
    medians = {name: statistics.median(values) for name, values in timings.items()}
    figures = [
        Figure(f"viewer.page_ready_ms_{name}", medians[name], "ms", target=f"< {TARGET_MS} ms", ok=medians[name] < TARGET_MS,
               note=note)
        for name, note in (
            ("sessions", "sessions list, navigation to rendered rows"),
            ("session", "session page: runs, problems, facts, feedback"),
            ("replay", f"replay of {events:,} records: conversation, timeline, state graph"),
            ("offline", "offline page: bundle file chosen to first render"),
        )
    ]
    figures += [
        Figure("viewer.replay_seek_ms", medians["seek"], "ms", note="a seek to the middle, until two frames later"),
        Figure("viewer.replay_page_weight_kb", weight / 1024, "KiB", note="every byte the replay page transferred (HTML, CSS, JS, API)"),
    ]
    return figures, {"pages_events": events, "pages_ms": timings}
