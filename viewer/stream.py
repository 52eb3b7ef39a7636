"""Live tail of a run over Server-Sent Events (``GET …/runs/<rid>/stream``).

Protocol (one HTTP response, ``text/event-stream``):

* each journal record is one message with ``id: <seq>`` and the record as JSON ``data``;
  records polled together go out in one write, but never merged into one message;
* ``event: capture`` carries ``{"status", "capture"}`` whenever the capture status changes
  (the first one right away);
* ``event: diagnostic`` reports a garbage line found while tailing;
* ``event: end`` follows the last record once the capture is terminal (complete or failed),
  then the response ends; just before it, ``event: resequenced`` says the seal rewrote the
  journal in event-time order (``capture.json`` ``"resequenced": true``, a collector run fed by
  several requests): the records sent had other ``seq``s, so the client reloads the snapshot;
* a comment line every ``STREAM_HEARTBEAT_SECONDS`` keeps idle connections alive.

A client resumes with ``Last-Event-ID`` (the browser sends it on reconnect) or ``?after_seq=``;
only records with a greater ``seq`` are sent. A client that sees a seq gap must drop its state
and reload the snapshot from ``…/events``: partial recovery is not supported.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import orjson
from flask import Blueprint, Response, current_app, request

from otel_session.core import layout
from otel_session.core.journal import CaptureStatus
from otel_session.bundle.read import JournalTail

from .api import store
from .errors import ApiError

__all__ = ["bp"]

bp = Blueprint("stream", __name__, url_prefix="/api")

_TERMINAL = {CaptureStatus.COMPLETE.value, CaptureStatus.FAILED.value}


def _resume_after() -> int:
    raw = request.headers.get("Last-Event-ID") or request.args.get("after_seq") or "0"
    if not raw.isdigit() or len(raw) > 12:
        raise ApiError(400, "bad_parameter", "Last-Event-ID / after_seq must be a non-negative integer")
    return int(raw)


def _capture(path: Path) -> dict | None:
    try:
        value = orjson.loads((path / layout.CAPTURE_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def _message(data: object, *, event: str | None = None, event_id: int | None = None) -> bytes:
    head = (f"event: {event}\n" if event else "") + (f"id: {event_id}\n" if event_id is not None else "")
    return head.encode() + b"data: " + orjson.dumps(data) + b"\n\n"


def _tail(path: Path, after_seq: int, poll_seconds: float, heartbeat_seconds: float) -> Iterator[bytes]:
    tail = JournalTail(path / layout.EVENTS_FILE)
    reported_diagnostics = 0
    last_status: object = object()
    last_write = time.monotonic()
    yield b"retry: 1000\n\n"
    while True:
        # Capture first: a terminal status read before polling means every line is already on disk,
        # so once a poll after it makes no progress the journal is fully sent.
        capture = _capture(path)
        status = capture.get("status") if capture else None
        offset = tail.offset
        chunk = [_message(record, event_id=record["seq"]) for record in tail.poll() if record["seq"] > after_seq]
        progressed = tail.offset != offset
        chunk += [_message(d.as_json(), event="diagnostic") for d in tail.diagnostics[reported_diagnostics:]]
        reported_diagnostics = len(tail.diagnostics)
        if status != last_status:
            chunk.append(_message({"status": status, "capture": capture}, event="capture"))
            last_status = status
        if status in _TERMINAL and not progressed:
            if capture.get("resequenced"):  # the seal renumbered the journal: what was sent is stale
                chunk.append(_message({"status": status}, event="resequenced"))
            chunk.append(_message({"status": status}, event="end"))
            yield b"".join(chunk)
            return
        if not chunk and time.monotonic() - last_write >= heartbeat_seconds:
            chunk.append(b": keep-alive\n\n")
        if chunk:
            yield b"".join(chunk)
            last_write = time.monotonic()
        if not progressed:
            time.sleep(poll_seconds)


@bp.get("/sessions/<path:session_id>/runs/<run_id>/stream")
def stream(session_id: str, run_id: str) -> Response:
    """Tail the run's journal as Server-Sent Events until its capture is terminal."""
    after_seq = _resume_after()
    run = store().resolve(session_id, run_id)
    config = current_app.config
    return Response(
        _tail(run.path, after_seq, config["STREAM_POLL_SECONDS"], config["STREAM_HEARTBEAT_SECONDS"]),
        mimetype="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
