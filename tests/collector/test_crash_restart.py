"""A collector process killed with SIGKILL mid-stream, then restarted on the same directory."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import threading

import orjson
import pytest

from otel_session.bundle.read import BundleStatus, DiagnosticCode

from .conftest import bundles, wait_for

TRACE_HEX = "0af7651916cd43dd8448eb211c80319c"
ROOT_SPAN = "00f067aa0ba902b7"
BASE_NS = 1_764_453_121_000_000_000


def tool_request(number: int) -> bytes:
    span = {
        "traceId": TRACE_HEX,
        "spanId": f"{number + 1:016x}",
        "parentSpanId": ROOT_SPAN,
        "name": "execute_tool lookup",
        "kind": 1,
        "startTimeUnixNano": str(BASE_NS + number * 1_000_000),
        "endTimeUnixNano": str(BASE_NS + number * 1_000_000 + 500_000),
        "attributes": [
            {"key": "session.id", "value": {"stringValue": "call-crash"}},
            {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
            {"key": "gen_ai.tool.name", "value": {"stringValue": "lookup"}},
            {"key": "gen_ai.tool.call.arguments", "value": {"stringValue": orjson.dumps({"n": number}).decode()}},
        ],
    }
    return _request(span)


def root_request() -> bytes:
    return _request({
        "traceId": TRACE_HEX, "spanId": ROOT_SPAN, "name": "invoke_agent booking", "kind": 2,
        "startTimeUnixNano": str(BASE_NS - 1_000), "endTimeUnixNano": str(BASE_NS + 20_000_000_000),
        "attributes": [{"key": "session.id", "value": {"stringValue": "call-crash"}}],
    })


def _request(span: dict) -> bytes:
    return orjson.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "t"}, "spans": [span]}]}]})


def post(port: int, body: bytes) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("POST", "/v1/traces", body=body, headers={"Content-Type": "application/json"})
        return connection.getresponse().status
    finally:
        connection.close()


def start_collector(root) -> tuple[subprocess.Popen, int]:
    process = subprocess.Popen(
        [sys.executable, "-m", "otel_session.cli", "collect", "--dir", str(root), "--grpc", "off",
         "--http", "127.0.0.1:0", "--seal-after", "30"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "OTEL_SESSION_REDACTION_KEY": "crash-test"},
    )
    banner = process.stdout.readline()
    assert "otel-session collector:" in banner, process.stderr.read()
    port = int(banner.split("http=")[1].split()[0].rsplit(":", 1)[1])
    return process, port


def journal_lines(root) -> int:
    found = bundles(root)
    return len(found[0].events) if found else 0


@pytest.mark.slow
def test_sigkill_mid_stream_then_restart_loses_nothing_written(tmp_path):
    root = tmp_path / "bundles"
    process, port = start_collector(root)
    try:
        for number in range(20):
            assert post(port, tool_request(number)) == 200
        wait_for(lambda: journal_lines(root) == 40)  # two records per tool span, on disk

        stop_streaming = threading.Event()

        def stream():
            number = 20
            while not stop_streaming.is_set():
                try:
                    post(port, tool_request(number))
                except OSError:
                    return
                number += 1

        streamer = threading.Thread(target=stream)
        streamer.start()
        wait_for(lambda: journal_lines(root) > 60)
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        stop_streaming.set()
        streamer.join(10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    (crashed,) = bundles(root)
    assert crashed.status is BundleStatus.RECORDING
    assert {d.code for d in crashed.diagnostics} <= {DiagnosticCode.TORN_TAIL}
    written = len(crashed.events)
    assert [event["seq"] for event in crashed.events] == list(range(1, written + 1))
    first_args = [e["payload"]["arguments"]["n"] for e in crashed.events if e["type"] == "tool_execution_started"]
    assert first_args[:20] == list(range(20))

    process, port = start_collector(root)
    try:
        assert post(port, tool_request(10_000)) == 200
        assert post(port, root_request()) == 200
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert "stopped: received=2 bundled=2" in out

    (final,) = bundles(root)
    assert final.status is BundleStatus.COMPLETE, final.diagnostics
    assert final.capture["order"] == "event_time"
    started = [e["payload"]["arguments"]["n"] for e in final.events if e["type"] == "tool_execution_started"]
    assert started[:20] == list(range(20)) and started[-1] == 10_000
    assert set(first_args) <= set(started)
    types = [event["type"] for event in final.events]
    assert types[0] == "run_started" and types[-1] == "run_finished"
    assert [event["seq"] for event in final.events] == list(range(1, len(final.events) + 1))


def killed_after(root, bodies: list[bytes], lines: int) -> None:
    """A collector on ``root`` that answered ``bodies`` (``lines`` journal lines on disk), then SIGKILL-ed."""
    process, port = start_collector(root)
    try:
        for body in bodies:
            assert post(port, body) == 200
        wait_for(lambda: journal_lines(root) == lines)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(10)


def restarted_with(root, bodies: list[bytes]) -> str:
    """A collector restarted on ``root``, sent ``bodies``, then stopped (SIGTERM); what it printed."""
    process, port = start_collector(root)
    try:
        for body in bodies:
            assert post(port, body) == 200
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    return out


def test_a_span_cut_with_the_torn_tail_is_journaled_whole_when_the_exporter_sends_it_again(tmp_path):
    """A kill -9 in the middle of a batch's write (or an OS crash before the seal's fsync) leaves a
    span's records half on disk; its request was never answered, so the exporter sends it again
    to the restarted collector, which journals it whole (at least once, never lost)."""
    root = tmp_path / "bundles"
    killed_after(root, [tool_request(0), tool_request(1)], lines=4)
    (crashed,) = bundles(root)
    journal = crashed.path / "events.ndjson"
    lines = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(b"".join(lines[:3]) + lines[3][:20])  # span 1's second record torn
    restarted_with(root, [tool_request(1), root_request()])
    (final,) = bundles(root)
    assert final.status is BundleStatus.COMPLETE, final.diagnostics
    finished = [e["payload"] for e in final.events if e["type"] == "tool_execution_finished"]
    assert len(finished) == 2


def test_a_run_whose_root_came_before_the_kill_ends_once_with_its_roots_status(tmp_path):
    """Resumed after a restart, a run whose ``run_finished`` is journaled already is sealed as it is:
    no second, ``interrupted`` ending after it."""
    root = tmp_path / "bundles"
    killed_after(root, [tool_request(0), root_request()], lines=4)
    restarted_with(root, [])
    (final,) = bundles(root)
    assert final.status is BundleStatus.COMPLETE, final.diagnostics
    endings = [e["payload"] for e in final.events if e["type"] == "run_finished"]
    assert endings == [{"status": "ok"}]


def test_spans_journaled_whole_before_the_kill_and_sent_again_after_the_restart_are_journaled_once(tmp_path):
    """The usual kill -9: the records written, the answer never sent, the exporter's retry."""
    root = tmp_path / "bundles"
    killed_after(root, [tool_request(0), root_request()], lines=4)
    out = restarted_with(root, [tool_request(0), root_request()])
    assert "received=2 bundled=0" in out and "duplicate_spans=2" in out
    (final,) = bundles(root)
    assert [e["type"] for e in final.events] == [
        "run_started", "tool_execution_started", "tool_execution_finished", "run_finished"]
