"""The wall clock steps back (and forward) an hour in the middle of a run.

The app's clock is stepped through the API's clock (``otel_session.instrument._clock.now_ns``);
stepping the machine's clock would disturb every other process here. Order must stay ``seq``,
the reducer must replay every position, and the viewer's replay clock (real Chromium) must play to
the end without stalling.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime

import pytest
from werkzeug.serving import make_server

import otel_session
from otel_session.replay import facts, reduce
from otel_session.instrument import _clock
from otel_session.bundle.read import BundleStatus, read_bundle
from otel_session.testing import capture_bundle
from otel_session.viewer import create_app

HOUR_NS = 3600 * 10**9


class SteppedClock:
    """``time.time_ns`` plus an offset the test steps, like an NTP step of the wall clock."""

    def __init__(self) -> None:
        self.offset_ns = 0

    def __call__(self) -> int:
        return time.time_ns() + self.offset_ns


def parse_at(at: str) -> datetime:
    return datetime.fromisoformat(at.replace("Z", "+00:00"))


@pytest.fixture(scope="module")
def stepped_run(tmp_path_factory):
    """One run recorded through the API while the clock steps back an hour, then forward two."""
    clock = SteppedClock()
    root = tmp_path_factory.mktemp("clock") / "bundles"
    patch = pytest.MonkeyPatch()
    patch.setattr(_clock, "now_ns", clock)
    try:
        with capture_bundle(root) as captured:
            with otel_session.session("clock"), otel_session.run(agent="booking") as run:
                with otel_session.turn(0, state="greet") as turn:
                    with otel_session.message("assistant") as message:
                        for index in range(20):
                            message.delta(f"before{index} ")
                        clock.offset_ns -= HOUR_NS  # stepped back mid-message
                        for index in range(20):
                            message.delta(f"after{index} ")
                    with otel_session.tool_execution("lookup", call_id="c1", arguments={"q": 1}) as tool:
                        clock.offset_ns += 2 * HOUR_NS  # and forward, past where it was
                        tool.finish(result={"ok": True})
                    turn.finish(state="done")
                run_id = run.run_id
    finally:
        patch.undo()
    return root, run_id, captured.bundle


def test_order_stays_seq_when_the_clock_steps_back(stepped_run):
    _, _, bundle = stepped_run
    assert bundle.status is BundleStatus.COMPLETE and bundle.diagnostics == []
    seqs = [event["seq"] for event in bundle.events]
    assert seqs == list(range(1, len(seqs) + 1))
    times = [parse_at(event["at"]) for event in bundle.events]
    assert any(later < earlier for earlier, later in zip(times, times[1:])), "the journal saw the step back"
    deltas = [event["payload"]["delta"] for event in bundle.events if event["type"] == "assistant_delta"]
    assert deltas == [f"before{i} " for i in range(20)] + [f"after{i} " for i in range(20)], "seq order, not time order"


def test_the_reducer_replays_every_position(stepped_run):
    _, _, bundle = stepped_run
    replayer = reduce.Replayer(bundle.events)
    texts = []
    for seq in range(0, len(bundle.events) + 1):
        state = replayer.state_at(seq)
        texts.append("".join(state_text(state)))
    assert all(earlier == later[: len(earlier)] for earlier, later in zip(texts, texts[1:])), "text only grows"
    assert texts[-1].startswith("before0 ") and texts[-1].endswith("after19 ")
    built = facts.build_session_facts(bundle)
    (tool,) = built["turns"][0]["tools"]
    assert tool["status"] == "ok"
    assert tool["duration_ms"] >= 3600 * 1000, "facts report what the clock said (the forward step)"


def state_text(state: dict) -> list[str]:
    return [block["text"] for message in state["messages"] for block in message["blocks"]]


@pytest.mark.browser
def test_the_viewer_replay_clock_plays_through_both_steps(stepped_run, browser):
    root, run_id, bundle = stepped_run
    server = make_server("127.0.0.1", 0, create_app({"BUNDLE_DIR": str(root)}), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"http://127.0.0.1:{server.server_port}/sessions/clock/runs/{run_id}")
        page.wait_for_selector("body[data-ready=true]")
        last = len(bundle.events)
        page.eval_on_selector("#cursor", "(el) => { el.value = 0; el.dispatchEvent(new Event('input')); }")
        page.wait_for_function("() => document.getElementById('cursor-label').dataset.seq === '0'")
        page.select_option("#speed", "10")
        started = time.monotonic()
        page.click("#play")
        seen = []
        while time.monotonic() - started < 60:  # generous: the idle cap makes it a few seconds
            seen.append(int(page.get_attribute("#cursor-label", "data-seq")))
            if seen[-1] == last and page.get_attribute("body", "data-playing") == "false":
                break
            time.sleep(0.05)
        page.close()
    finally:
        server.shutdown()
        server.server_close()
    assert seen[-1] == last, f"the replay stalled at seq {seen[-1]} of {last}"
    assert seen == sorted(seen), "the replay clock never runs backwards"
    assert not errors, errors
