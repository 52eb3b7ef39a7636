"""The collector under faults, as a real process on loopback: disk full, SIGKILL then restart
without the run's root span, two collectors given the same run, SIGTERM."""

from __future__ import annotations

import errno
import http.client
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from otel_session.core import layout
from otel_session.collector.server import Collector
from otel_session.bundle.read import BundleStatus, DiagnosticCode
from otel_session.redact import RedactionPolicy, Redactor

from .conftest import FailingAppends, bundles, complete_lines, viewer_verdict, wait_for

BASE_NS = 1_796_000_000_000_000_000


class HttpClient:
    """OTLP/JSON over HTTP by hand: the answer's ``partialSuccess`` is what these tests check."""

    def __init__(self, port: int) -> None:
        self.port = port

    def post(self, body: bytes) -> tuple[int, dict]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            connection.request("POST", "/v1/traces", body=body, headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            data = response.read()
            return response.status, orjson.loads(data) if data else {}
        finally:
            connection.close()


class CollectorProcess:
    """``otel-session collect`` on a free loopback port, OTLP/HTTP only."""

    def __init__(self, root: Path, seal_after: float = 30, seal_rootless_after: float = 3600, *,
                 program: tuple[str, ...] = ("-m", "otel_session.cli"), options: tuple[str, ...] = (), **env: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, *program, "collect", "--dir", str(root), "--grpc", "off",
             "--http", "127.0.0.1:0", "--seal-after", str(seal_after), "--seal-rootless-after",
             str(seal_rootless_after), "--status-interval", "3600", *options],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "OTEL_SESSION_REDACTION_KEY": "fault-tests", **env},
        )
        banner = self.process.stdout.readline()
        assert "otel-session collector:" in banner, self.process.stderr.read()
        self.port = int(banner.split("http=")[1].split()[0].rsplit(":", 1)[1])

    def post(self, body: bytes) -> tuple[int, dict]:
        return HttpClient(self.port).post(body)

    def terminate(self) -> tuple[str, str]:
        """SIGTERM, then the exit status and output: the collector drains and seals."""
        self.process.send_signal(signal.SIGTERM)
        out, err = self.process.communicate(timeout=300)
        assert self.process.returncode == 0, err
        return out, err

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate(timeout=10)


@pytest.fixture
def start_collector():
    started: list[CollectorProcess] = []

    def start(root: Path, **options: Any) -> CollectorProcess:
        collector = CollectorProcess(root, **options)
        started.append(collector)
        return collector

    yield start
    for collector in started:
        collector.kill()


def trace_hex(number: int) -> str:
    return f"{0x4bf92f3577b34da6a3ce929d0e0e4736 + number:032x}"


def tool_span(trace: str, number: int, session: str, argument_bytes: int = 10, base_ns: int = BASE_NS) -> dict:
    start = base_ns + number * 1_000_000
    return {
        "traceId": trace, "spanId": f"{number + 1:016x}", "parentSpanId": "00f067aa0ba902b7",
        "name": "execute_tool lookup", "kind": 1,
        "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 500_000),
        "attributes": [
            {"key": "session.id", "value": {"stringValue": session}},
            {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
            {"key": "gen_ai.tool.name", "value": {"stringValue": "lookup"}},
            {"key": "gen_ai.tool.call.arguments",
             "value": {"stringValue": orjson.dumps({"n": number, "pad": "p" * argument_bytes}).decode()}},
        ],
    }


def root_span(trace: str, session: str) -> dict:
    return {
        "traceId": trace, "spanId": "00f067aa0ba902b7", "name": "invoke_agent booking", "kind": 2,
        "startTimeUnixNano": str(BASE_NS - 1_000), "endTimeUnixNano": str(BASE_NS + 60_000_000_000),
        "attributes": [{"key": "session.id", "value": {"stringValue": session}}],
    }


def request(*spans: dict) -> bytes:
    scope_spans = [{"scope": {"name": "t"}, "spans": list(spans)}]
    return orjson.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": scope_spans}]})


def counters(output: str) -> dict[str, int]:
    line = next(line for line in output.splitlines() if "collector stopped:" in line)
    return {key: int(value) for key, value in (item.split("=") for item in line.split(":", 1)[1].split())}


def test_disk_full_in_the_collector_fails_that_run_and_refuses_its_later_spans(tiny_fs, start_collector):
    root = tiny_fs(256) / "bundles"
    collector = start_collector(root, seal_after=0.3)
    sealed_trace = trace_hex(1)
    assert collector.post(request(tool_span(sealed_trace, 1, "before"), root_span(sealed_trace, "before")))[0] == 200
    wait_for(lambda: [b for b in bundles(root) if b.status is BundleStatus.COMPLETE])
    (earlier,) = bundles(root)
    earlier_bytes = (earlier.path / layout.EVENTS_FILE).read_bytes()

    filler = root.parent / "filler"
    free = os.statvfs(root.parent).f_bavail * os.statvfs(root.parent).f_frsize
    filler.write_bytes(b"\0" * (free - 40 * 1024))
    full_trace = trace_hex(2)
    answers = []
    for batch in range(40):  # 40 requests of 10 spans of ~1 KiB each: far more than 40 KiB
        spans = [tool_span(full_trace, batch * 10 + index, "full", argument_bytes=1000) for index in range(10)]
        answers.append(collector.post(request(*spans)))
    assert {status for status, _ in answers} == {200}
    refused = [body["partialSuccess"] for _, body in answers if body.get("partialSuccess")]
    assert refused, "spans the collector could not bundle are refused explicitly"
    assert any("No space left on device" in p["errorMessage"] for p in refused)
    status, late = collector.post(request(root_span(full_trace, "full")))
    assert status == 200 and late["partialSuccess"]["rejectedSpans"] == "1", "later spans are refused"

    out, _ = collector.terminate()
    totals = counters(out)
    assert totals["rejected"] == sum(int(p["rejectedSpans"]) for p in refused) + 1
    assert totals["received"] == totals["bundled"] + totals["rejected"], "every span accounted for"

    failed = next(bundle for bundle in bundles(root) if bundle.manifest["session_id"] == "full")
    assert failed.status is BundleStatus.FAILED and failed.capture["failure"]["code"] == "disk_full"
    lines, _ = complete_lines(failed.path / layout.EVENTS_FILE)
    assert failed.capture["event_count"] == lines == len(failed.events)
    assert {d.code for d in failed.diagnostics} <= {DiagnosticCode.TORN_TAIL}
    assert (earlier.path / layout.EVENTS_FILE).read_bytes() == earlier_bytes, "other runs unaffected"
    entry, integrity = viewer_verdict(root, "full", failed.run_id)
    assert entry["integrity"] == "failed" and integrity["capture"]["failure"]["code"] == "disk_full"


def test_sigkill_then_restart_without_the_root_finishes_the_run_as_interrupted(tmp_path, start_collector):
    """tests/collector/test_crash_restart.py covers the root arriving after the restart; here it never does."""
    root = tmp_path / "bundles"
    trace = trace_hex(3)
    ahead_ns = time.time_ns() + 3600 * 10**9  # the agent's clock runs an hour ahead of the collector's
    collector = start_collector(root)
    for number in range(30):
        assert collector.post(request(tool_span(trace, number, "crash", base_ns=ahead_ns)))[0] == 200
    wait_for(lambda: bundles(root) and len(bundles(root)[0].events) == 60)
    (run_dir,) = [bundle.path for bundle in bundles(root)]
    with open(run_dir / layout.EVENTS_FILE, "ab") as journal:  # the kill caught an append mid-line
        journal.write(b'{"seq":61,"at":"2026-11-30T')
    before = (run_dir / layout.EVENTS_FILE).read_bytes()
    collector.process.send_signal(signal.SIGKILL)
    collector.process.wait(10)

    (crashed,) = bundles(root)
    assert crashed.status is BundleStatus.RECORDING
    assert [d.code for d in crashed.diagnostics] == [DiagnosticCode.TORN_TAIL], "the torn tail is reported"
    entry, _ = viewer_verdict(root, "crash", crashed.run_id)
    assert entry["integrity"] == "recording", "a crashed run is shown, not lost"

    restarted = start_collector(root)
    assert restarted.post(request(tool_span(trace, 500, "crash", base_ns=ahead_ns)))[0] == 200
    out, err = restarted.terminate()
    assert "cut a torn final line of 27 bytes" in err
    assert counters(out)["received"] == counters(out)["bundled"] == 1

    (final,) = bundles(root)
    assert final.status is BundleStatus.COMPLETE and final.diagnostics == []
    # Last in event-time order even though every span is stamped an hour after the collector's now.
    assert final.events[-1]["type"] == "run_finished"
    assert final.events[-1]["payload"] == {"status": "interrupted", "reason": "collector_stopped"}
    assert [event["seq"] for event in final.events] == list(range(1, len(final.events) + 1))
    numbers = [e["payload"]["arguments"]["n"] for e in final.events if e["type"] == "tool_execution_started"]
    assert numbers == [*range(30), 500], "earlier events intact, the new one after them, nothing merged twice"
    kept = [orjson.loads(line) for line in before.splitlines()[:60]]
    assert final.events[:60] == kept, "the 60 records written before the kill are unchanged"


def test_a_second_collector_for_the_same_run_is_refused_and_counts_it(tmp_path, start_collector):
    root = tmp_path / "bundles"
    trace = trace_hex(4)
    first = start_collector(root)
    second = start_collector(root)
    assert first.post(request(tool_span(trace, 1, "shared")))[0] == 200
    wait_for(lambda: bundles(root) and bundles(root)[0].events)
    status, body = second.post(request(tool_span(trace, 2, "shared"), tool_span(trace, 3, "shared")))
    assert status == 200
    assert body["partialSuccess"]["rejectedSpans"] == "2"
    assert "one writer per run" in body["partialSuccess"]["errorMessage"]
    assert first.post(request(tool_span(trace, 4, "shared"), root_span(trace, "shared")))[0] == 200
    second_out, _ = second.terminate()
    first_out, _ = first.terminate()
    assert counters(second_out)["rejected"] == 2 and counters(second_out)["bundled"] == 0
    assert counters(first_out)["bundled"] == 3 and counters(first_out)["rejected"] == 0

    (bundle,) = bundles(root)
    assert bundle.status is BundleStatus.COMPLETE and bundle.diagnostics == []
    numbers = [e["payload"]["arguments"]["n"] for e in bundle.events if e["type"] == "tool_execution_started"]
    assert numbers == [1, 4], "never interleaved: the refused spans are not in the bundle"


def test_a_restarted_collector_finishes_a_run_it_left_open_even_if_no_span_comes_again(tmp_path, start_collector):
    root = tmp_path / "bundles"
    trace = trace_hex(5)
    collector = start_collector(root)
    for number in range(5):
        assert collector.post(request(tool_span(trace, number, "orphan")))[0] == 200
    wait_for(lambda: bundles(root) and len(bundles(root)[0].events) == 10)
    (run_dir,) = [bundle.path for bundle in bundles(root)]
    with open(run_dir / layout.EVENTS_FILE, "ab") as journal:
        journal.write(b'{"seq":11,"at')
    collector.process.send_signal(signal.SIGKILL)
    collector.process.wait(10)

    restarted = start_collector(root, seal_after=0.3, seal_rootless_after=0.3)  # nothing of the trace arrives again
    sealed = wait_for(lambda: [b for b in bundles(root) if b.status is not BundleStatus.RECORDING])
    (final,) = sealed
    assert final.status is BundleStatus.COMPLETE and final.diagnostics == []
    assert final.events[-1]["type"] == "run_finished"
    assert final.events[-1]["payload"] == {"status": "interrupted", "reason": "root_span_missing"}
    started = [e["payload"]["arguments"]["n"] for e in final.events if e["type"] == "tool_execution_started"]
    assert started == [0, 1, 2, 3, 4]
    _, err = restarted.terminate()
    assert "resumed" in err and "13 bytes of a torn line cut" in err


def test_a_restarted_collector_leaves_an_in_process_run_it_did_not_record_alone(tmp_path, start_collector):
    """A crashed app's in-process journal on a shared root keeps its own ``seq`` order: not adopted."""
    root = tmp_path / "bundles"
    script = (
        "import os; from otel_session.bundle.write import BundleWriter\n"
        f"run = BundleWriter({str(root)!r}).open_run(session_id='app', run_id='run-{'0' * 8}-0000-0000-0000-{'0' * 11}1')\n"
        "run.append('run_started', {'kind': 'live'}); run._writer.force_flush(); os._exit(9)\n"
    )
    assert subprocess.run([sys.executable, "-c", script], timeout=300).returncode == 9
    (crashed,) = bundles(root)
    assert crashed.status is BundleStatus.RECORDING
    collector = start_collector(root, seal_after=0.2, seal_rootless_after=0.2)
    time.sleep(1.0)  # several seal periods: a resumed run would have been sealed by now
    _, err = collector.terminate()
    (after,) = bundles(root)
    assert after.status is BundleStatus.RECORDING and "resumed" not in err
    assert (after.path / layout.EVENTS_FILE).read_bytes() == (crashed.path / layout.EVENTS_FILE).read_bytes()


@pytest.mark.parametrize("error,code", [(errno.EIO, "io_error"), (errno.EACCES, "permission_denied")])
def test_an_append_error_in_the_collector_fails_one_run_and_refuses_its_later_spans(tmp_path, error, code):
    """In process, for the writer's ``_write`` seam (real EIO on demand does not exist here)."""
    root = tmp_path / "bundles"
    collector = Collector(root, grpc_address=None, http_address="127.0.0.1:0", seal_after_s=30,
                          redactor=Redactor(RedactionPolicy(), key=b"fault-tests"))
    collector.start()
    client = HttpClient(collector.http_port)
    try:
        faulty, healthy = trace_hex(6), trace_hex(7)
        assert client.post(request(tool_span(faulty, 0, "faulty"), tool_span(healthy, 0, "healthy")))[0] == 200
        (target,) = [run for run in collector.writer.open_runs if run.session_id == "faulty"]
        seam = FailingAppends(collector.writer, error)
        seam.target(target)
        collector.writer._write = seam
        for number in range(1, 40):
            client.post(request(tool_span(faulty, number, "faulty"), tool_span(healthy, number, "healthy")))
        wait_for(lambda: target.failure is not None)
        status, late = client.post(request(root_span(faulty, "faulty"), root_span(healthy, "healthy")))
        assert status == 200 and late["partialSuccess"]["rejectedSpans"] == "1", "later spans refused"
        assert os.strerror(error) in late["partialSuccess"]["errorMessage"], "the reason is named"
    finally:
        collector.stop()
    totals = collector.counters.snapshot()
    assert totals["received"] == totals["bundled"] + totals["rejected"] and totals["rejected"] >= 1
    assert seam.calls == 2, "half a batch, then the error; never an append again"
    by_session = {bundle.manifest["session_id"]: bundle for bundle in bundles(root)}
    failed = by_session["faulty"]
    assert failed.status is BundleStatus.FAILED and failed.capture["failure"]["code"] == code
    lines, torn = complete_lines(failed.path / layout.EVENTS_FILE)
    assert failed.capture["event_count"] == lines == len(failed.events)
    assert [d.code for d in failed.diagnostics] == ([DiagnosticCode.TORN_TAIL] if torn else []), "at most one torn line"
    ok = by_session["healthy"]
    assert ok.status is BundleStatus.COMPLETE and ok.diagnostics == []
    assert sum(1 for e in ok.events if e["type"] == "tool_execution_started") == 40
    entry, _ = viewer_verdict(root, "faulty", failed.run_id)
    assert entry["integrity"] == "failed"


def test_a_listener_that_cannot_stop_still_lets_the_collector_seal_and_drain(tmp_path, monkeypatch, caplog):
    """The OTLP/HTTP listener's wake-up pipe failing at shutdown (EBADF, as seen once in CI) is
    logged; the collector still stops its loop, seals every run it acknowledged and drains."""
    import threading

    from waitress.trigger import trigger

    root = tmp_path / "bundles"
    threads_before = set(threading.enumerate())  # other tests' threads are not this collector's
    collector = Collector(root, grpc_address=None, http_address="127.0.0.1:0", seal_after_s=3600,
                          redactor=Redactor(RedactionPolicy(), key=b"stop"))
    collector.start()
    trace = trace_hex(7)
    status, _ = HttpClient(collector.http_port).post(request(root_span(trace, "s-stop"), tool_span(trace, 1, "s-stop")))
    assert status == 200

    def pipe_gone(self) -> None:
        raise OSError(errno.EBADF, "Bad file descriptor")

    monkeypatch.setattr(trigger, "_physical_pull", pipe_gone)
    collector.stop(grace_s=1)

    (bundle,) = bundles(root)
    assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
    assert [event["type"] for event in bundle.events].count("tool_execution_started") == 1
    assert "could not be woken" in caplog.text
    left = set(threading.enumerate()) - threads_before
    assert not [thread for thread in left if thread.name in ("otlp-http", "otel-session-writer")]


STUCK_DISK = str(Path(__file__).with_name("stuck_disk_collector.py"))


def test_sigterm_ends_the_collector_within_its_shutdown_timeout_when_the_disk_hangs(tmp_path, start_collector):
    """Issue 31: told to stop while the disk did not answer, the collector waited for the writer's
    drain (up to 10 minutes), and in the descriptor-exhaustion state kept going for 15+ minutes.
    Now SIGTERM ends it within --shutdown-timeout; the run it could not seal is left recording with
    every acknowledged span, one log line says so, and the next collector resumes and seals it."""
    root = tmp_path / "bundles"
    marker = tmp_path / "disk-hangs"
    trace = trace_hex(11)
    collector = start_collector(root, program=(STUCK_DISK,), STUCK_DISK_MARKER=str(marker),
                                OTEL_SESSION_SHUTDOWN_TIMEOUT="2")
    assert collector.post(request(tool_span(trace, 1, "stuck")))[0] == 200  # acknowledged: in the journal
    marker.touch()  # from now on, journal writes never return

    def unanswered() -> None:
        try:
            collector.post(request(tool_span(trace, 2, "stuck")))
        except OSError:
            pass  # its answer never comes: the write it waits for is stuck

    import threading

    threading.Thread(target=unanswered, daemon=True).start()
    collector.process.send_signal(signal.SIGTERM)
    out, err = collector.process.communicate(timeout=60)  # today: the writer's 600 s drain, at least
    assert collector.process.returncode == 1, err
    assert "shutdown timed out" in out
    (line,) = [line for line in err.splitlines() if "shutdown did not finish within 2 s" in line]
    assert "left recording" in line and "resumes them" in line

    (left,) = bundles(root)
    assert left.status is BundleStatus.RECORDING, "left resumable, not sealed half-way"
    restarted = start_collector(root)
    out, _ = restarted.terminate()
    (final,) = bundles(root)
    assert final.status is BundleStatus.COMPLETE, final.diagnostics
    numbers = [e["payload"]["arguments"]["n"] for e in final.events if e["type"] == "tool_execution_started"]
    assert numbers[0] == 1, "the acknowledged span is kept"
    assert final.events[-1]["type"] == "run_finished"


def test_the_collector_raises_its_open_files_limit_to_the_hard_limit(tmp_path):
    """Each connection and open run is a descriptor; the host's default soft limit (often 1,024)
    is not the collector's."""
    import resource

    def low_soft_limit() -> None:
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    process = subprocess.Popen(
        [sys.executable, "-m", "otel_session.cli", "collect", "--dir", str(tmp_path / "bundles"), "--grpc", "off",
         "--http", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=low_soft_limit,
        env={**os.environ, "OTEL_SESSION_REDACTION_KEY": "fault-tests"},
    )
    try:
        assert "otel-session collector:" in process.stdout.readline()
        limits = Path(f"/proc/{process.pid}/limits").read_text()
        soft, hard = next(line for line in limits.splitlines() if line.startswith("Max open files")).split()[3:5]
        assert soft == hard != "256"
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert f"open files limit raised from 256 to {hard}" in err
