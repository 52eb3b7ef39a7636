"""Fixtures for the viewer: real bundles written by the real BundleWriter, the app, a client,
and a real threaded WSGI server on 127.0.0.1 for SSE and browser tests."""

from __future__ import annotations

import dataclasses
import os
import shutil
import threading
import types
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from werkzeug.serving import make_server

from otel_session.viewer import create_app
from otel_session.bundle.write import BundleWriter, RunRecorder

BASE_NS = 1_796_000_000_000_000_000  # 2026-11-30T…Z
STEP_NS = 100_000_000  # 100 ms between events

XSS_TEXT = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'


@dataclass(frozen=True)
class Sample:
    """The bundle root the viewer tests read, and the ids in it."""

    root: Path
    session_id: str
    older_run: str
    latest_run: str
    other_session: str
    other_run: str
    broken_session: str
    broken_run: str
    xss_session: str
    xss_run: str
    eval_run: str


def new_run_id() -> str:
    return f"run-{uuid.uuid4()}"


class Script:
    """Appends records with `at` 100 ms apart (deterministic pacing for replay)."""

    def __init__(self, run: RunRecorder, start_ns: int) -> None:
        self.run = run
        self.at_ns = start_ns

    def __call__(self, event_type: str, payload: dict[str, Any] | None = None, **ids: Any) -> None:
        self.run.append(event_type, payload, at_ns=self.at_ns, **ids)
        self.at_ns += STEP_NS

    def message(self, role: str, message_id: str, text: str, *, turn: int, stream: bool = False,
                finished: dict[str, Any] | None = None) -> None:
        """One message; ``finished`` adds to its ``message_finished`` payload (a model call's ``model``, ``usage``)."""
        ids = {"turn_index": turn, "message_id": message_id}
        self("message_started", {"role": role}, **ids)
        if stream:
            for index in range(0, len(text), 4):
                self("assistant_delta", {"index": 0, "kind": "text", "delta": text[index : index + 4]}, **ids)
        self("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": text}], **(finished or {})}, **ids)


# A voice booking (``record_booking(voice=True)``): each turn's latency (turn 1 is slow at the default
# 1.5 s threshold) and each reply's model call.
VOICE_LATENCY = (
    {"user_to_agent_ms": 640, "stt_ms": 180, "llm_ttft_ms": 310, "tts_ttfb_ms": 90},
    {"user_to_agent_ms": 1870, "endpointing_ms": 620, "stt_ms": 240, "llm_ttft_ms": 820, "tts_ttfb_ms": 110},
    {"user_to_agent_ms": 910, "stt_ms": 150, "llm_ttft_ms": 450, "tts_ttfb_ms": 80},
)


def _voice(voice: bool, turn: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a voice booking adds to turn ``turn``'s reply and to its ``turn_finished``."""
    if not voice:
        return {}, {}
    call = {"model": "gpt-4o-mini", "usage": {"input_tokens": 412 + 40 * turn, "output_tokens": 18 + turn}}
    return call, {"latency": VOICE_LATENCY[turn]}


def record_booking(script: Script, *, user_texts: tuple[str, str, str] = ("table for 2", "sometime soon", "Friday"),
                   voice: bool = False) -> None:
    """Three turns: party size given, the date asked twice (a repeated ask), then a tool and a verdict.
    ``voice``: with each turn's latency and each reply's model call (``_voice``)."""
    required = ["date", "party_size"]
    (call0, voice0), (call1, voice1), (call2, voice2) = (_voice(voice, turn) for turn in range(3))
    script("run_started", {"kind": "live", "agent": "booking"})
    # Turn 0: the user gives the party size; the date is still missing.
    script("turn_started", {"state": "ask_date", "required_slots": required}, turn_index=0)
    script.message("user", "m-u0", user_texts[0], turn=0)
    script("slot_write", {"slot": "party_size", "value": "2", "previous": None, "source": "nlu"}, turn_index=0)
    script("guard_evaluated", {"name": "date_present", "passed": False}, turn_index=0)
    script.message("assistant", "m-a0", "Which day would you like?", turn=0, stream=True, finished=call0)
    script("turn_finished", {"state": "ask_date", "required_slots": required, "missing_required_slots": ["date"], **voice0}, turn_index=0)
    # Turn 1: an unparseable date; the agent asks again.
    script("turn_started", {"state": "ask_date", "required_slots": required}, turn_index=1)
    script.message("user", "m-u1", user_texts[1], turn=1)
    script("guard_evaluated", {"name": "date_present", "passed": False}, turn_index=1)
    script.message("assistant", "m-a1", "Sorry, which day exactly?", turn=1, stream=True, finished=call1)
    script("turn_finished", {"state": "ask_date", "required_slots": required, "missing_required_slots": ["date"], **voice1}, turn_index=1)
    # Turn 2: the date arrives by direct mutation (unattributed), a tool runs, the state moves on.
    script("turn_started", {"state": "ask_date", "required_slots": required}, turn_index=2)
    script.message("user", "m-u2", user_texts[2], turn=2)
    script("slot_diff", {"slot": "date", "value": "h:1f2e", "previous": None}, turn_index=2)
    script("guard_evaluated", {"name": "date_present", "passed": True}, turn_index=2)
    ids = {"turn_index": 2, "message_id": "m-a2"}
    script("message_started", {"role": "assistant"}, **ids)
    script("assistant_delta", {"index": 0, "kind": "thinking", "delta": "check the calendar"}, **ids)
    script("tool_execution_started", {"name": "check_availability", "arguments": {"date": "h:1f2e"}}, turn_index=2, tool_call_id="c1")
    script("tool_execution_updated", {}, turn_index=2, tool_call_id="c1")
    script("tool_execution_finished", {"status": "error", "error": "timeout"}, turn_index=2, tool_call_id="c1")
    script("tool_execution_started", {"name": "check_availability", "arguments": {"date": "h:1f2e"}}, turn_index=2, tool_call_id="c2")
    script("tool_execution_finished", {"status": "ok", "result": {"free": True}}, turn_index=2, tool_call_id="c2")
    for chunk in ("Friday ", "is ", "free."):
        script("assistant_delta", {"index": 1, "kind": "text", "delta": chunk}, **ids)
    script(
        "message_finished",
        {"settled": True, "content": [{"index": 0, "kind": "thinking", "text": "check the calendar"},
                                      {"index": 1, "kind": "text", "text": "Friday is free."}], **call2},
        **ids,
    )
    script("transition_verdict", {"from": "ask_date", "to": "confirm", "reason": "slots filled", "candidates": ["confirm"]}, turn_index=2)
    script("turn_finished", {"state": "confirm", "required_slots": required, "missing_required_slots": [], **voice2}, turn_index=2)


def write_booking_run(
    writer: BundleWriter, session_id: str, run_id: str, created_ns: int, *, close: bool = True, **kwargs: Any
) -> RunRecorder:
    run = writer.open_run(session_id=session_id, run_id=run_id, agent="booking", service="tests", created_at_ns=created_ns)
    script = Script(run, created_ns)
    record_booking(script, **kwargs)
    if close:
        script("run_finished", {"status": "ok"})  # on the script's clock, like every other record
        run.close()
    return run


@pytest.fixture(scope="session")
def sample_template(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    """The sample bundles, written once per test session by the real writer."""
    root = tmp_path_factory.mktemp("template") / "bundles"
    ids = {name: new_run_id() for name in ("older", "latest", "other", "broken", "xss", "eval")}
    writer = BundleWriter(root)
    try:
        write_booking_run(writer, "call-42", ids["older"], BASE_NS)
        write_booking_run(writer, "call-42", ids["latest"], BASE_NS + 60 * 10**9)
        write_booking_run(writer, "call-7", ids["other"], BASE_NS + 30 * 10**9)
        write_booking_run(writer, "broken", ids["broken"], BASE_NS + 10 * 10**9)
        write_booking_run(writer, "xss", ids["xss"], BASE_NS + 20 * 10**9, user_texts=(XSS_TEXT, XSS_TEXT, XSS_TEXT))
        evaluation = writer.open_run(session_id="call-42", run_id=ids["eval"], kind="eval", eval_id="nightly", created_at_ns=BASE_NS + 90 * 10**9)
        script = Script(evaluation, BASE_NS + 90 * 10**9)
        record_booking(script)
        script("run_finished", {"status": "ok"})
        evaluation.close()
        assert writer.force_flush()
    finally:
        writer.shutdown()
    # Break one bundle: a garbage line in the middle of its journal.
    events = root / "sessions" / "broken" / ids["broken"] / "events.ndjson"
    lines = events.read_bytes().split(b"\n")
    events.write_bytes(b"\n".join([*lines[:3], b"{not json", *lines[3:]]))
    return Sample(root, "call-42", ids["older"], ids["latest"], "call-7", ids["other"], "broken", ids["broken"], "xss", ids["xss"], ids["eval"])


@pytest.fixture
def sample(sample_template: Sample, tmp_path: Path) -> Sample:
    """A private copy of the sample bundles (tests may add feedback, break files, plant symlinks)."""
    root = tmp_path / "bundles"
    shutil.copytree(sample_template.root, root, symlinks=True)
    return dataclasses.replace(sample_template, root=root)


@pytest.fixture
def app(sample: Sample):
    return create_app({"BUNDLE_DIR": str(sample.root), "TESTING": True, "STREAM_POLL_SECONDS": 0.01})


@pytest.fixture
def client(app):
    return app.test_client()


@dataclass
class LiveServer:
    url: str
    app: Any


@pytest.fixture
def serve() -> Iterator[Callable[..., LiveServer]]:
    """Start the viewer on a free 127.0.0.1 port in a thread (werkzeug's threaded server)."""
    servers = []

    def start(root: Path, **config: Any) -> LiveServer:
        app = create_app({"BUNDLE_DIR": str(root), "STREAM_POLL_SECONDS": 0.02, **config})
        server = make_server("127.0.0.1", 0, app, threaded=True)
        thread = threading.Thread(target=server.serve_forever, name="viewer-test-server", daemon=True)
        thread.start()
        servers.append((server, thread))
        return LiveServer(f"http://127.0.0.1:{server.server_port}", app)

    yield start
    for server, thread in servers:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def journal():
    """The journal helpers above, for test modules (importlib mode cannot import conftest)."""
    return types.SimpleNamespace(Script=Script, XSS_TEXT=XSS_TEXT, record_booking=record_booking, BASE_NS=BASE_NS)


@pytest.fixture
def live_writer(tmp_path: Path) -> Iterator[BundleWriter]:
    writer = BundleWriter(tmp_path / "live")
    yield writer
    writer.shutdown()


# -- the page: Debian's Chromium (the ``browser`` fixture of tests/conftest.py) --------------------

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.on("console", lambda message: page.errors.append(message.text) if message.type == "error" else None)
    yield page
    context.close()


@pytest.fixture
def ui(tmp_path: Path) -> types.SimpleNamespace:
    """Page helpers: ``screenshot(page, name)`` (into docs/screenshots with
    OTEL_SESSION_UPDATE_SCREENSHOTS=1), ``cursor(page)`` (the replay cursor's seq), ``seek_to(page, seq)``."""

    def screenshot(page, name: str) -> None:
        target = SCREENSHOTS if os.environ.get("OTEL_SESSION_UPDATE_SCREENSHOTS") == "1" else tmp_path
        target.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(target / f"{name}.png"), full_page=False)

    def cursor(page) -> int:
        return int(page.get_attribute("#cursor-label", "data-seq"))

    def seek_to(page, seq: int) -> None:
        page.eval_on_selector("#cursor", "(el, v) => { el.value = v; el.dispatchEvent(new Event('input')); }", seq)
        page.wait_for_function(f"() => document.getElementById('cursor-label').dataset.seq === '{seq}'")

    return types.SimpleNamespace(screenshot=screenshot, cursor=cursor, seek_to=seek_to)
