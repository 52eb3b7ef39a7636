"""A restart is invisible to a run (issue 31 §1): kill -9 or SIGTERM at any stage of a run, restart,
and the rest of the run still lands in the one bundle, sealed by the rules of a run that saw no restart."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys

import orjson

from otel_session.bundle.read import BundleStatus

from .conftest import bundles, wait_for

BASE_NS = 1_764_453_121_000_000_000
ROOT_SPAN = "00f067aa0ba902b7"
TRACE = "0af7651916cd43dd8448eb211c80319c"
OTHER_TRACE = "1af7651916cd43dd8448eb211c80319c"


def child(number: int, trace: str = TRACE, session: str = "call-restart") -> dict:
    start = BASE_NS + number * 1_000_000
    return {
        "traceId": trace, "spanId": f"{number + 1:016x}", "parentSpanId": ROOT_SPAN, "name": "execute_tool lookup",
        "kind": 1, "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 500_000),
        "attributes": [
            {"key": "session.id", "value": {"stringValue": session}},
            {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
            {"key": "gen_ai.tool.name", "value": {"stringValue": "lookup"}},
            {"key": "gen_ai.tool.call.arguments", "value": {"stringValue": orjson.dumps({"n": number}).decode()}},
        ],
    }


def root(trace: str = TRACE, session: str = "call-restart") -> dict:
    return {
        "traceId": trace, "spanId": ROOT_SPAN, "name": "invoke_agent booking", "kind": 2,
        "startTimeUnixNano": str(BASE_NS - 1_000), "endTimeUnixNano": str(BASE_NS + 20_000_000_000),
        "attributes": [{"key": "session.id", "value": {"stringValue": session}}],
    }


def body(*spans: dict) -> bytes:
    return orjson.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "t"}, "spans": list(spans)}]}]})


class Collector:
    """``otel-session collect`` as a process, OTLP/HTTP only."""

    def __init__(self, root_dir, *flags: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "otel_session.cli", "collect", "--dir", str(root_dir), "--grpc", "off",
             "--http", "127.0.0.1:0", "--status-interval", "3600", *flags],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "OTEL_SESSION_REDACTION_KEY": "restart-test"},
        )
        banner = self.process.stdout.readline()
        assert "otel-session collector:" in banner, self.process.stderr.read()
        self.port = int(banner.split("http=")[1].split()[0].rsplit(":", 1)[1])

    def post(self, data: bytes) -> tuple[int, dict]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            connection.request("POST", "/v1/traces", body=data, headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            payload = response.read()
            return response.status, orjson.loads(payload) if payload else {}
        finally:
            connection.close()

    def accepted(self, data: bytes) -> None:
        status, answer = self.post(data)
        assert (status, answer.get("partialSuccess")) == (200, None), answer

    def kill9(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def terminate(self) -> str:
        self.process.send_signal(signal.SIGTERM)
        out, err = self.process.communicate(timeout=30)
        assert self.process.returncode == 0, err
        return err


def the_run(root_dir):
    (run,) = [bundle for bundle in bundles(root_dir) if bundle.manifest["session_id"] == "call-restart"]
    return run


def assert_whole(root_dir, numbers: list[int]) -> None:
    """One bundle, complete, every tool span once, one ending: the root's."""
    run = the_run(root_dir)
    assert run.status is BundleStatus.COMPLETE, run.diagnostics
    started = sorted(e["payload"]["arguments"]["n"] for e in run.events if e["type"] == "tool_execution_started")
    assert started == numbers
    assert [e["payload"] for e in run.events if e["type"] == "run_finished"] == [{"status": "ok"}]
    assert [e["seq"] for e in run.events] == list(range(1, len(run.events) + 1))


def quiet_period_passed(collector: Collector, root_dir) -> None:
    """Let more than ``--seal-after`` of quiet pass, seen from outside: another run, its root
    included, sent after the restart, is sealed."""
    collector.accepted(body(child(0, OTHER_TRACE, "other"), root(OTHER_TRACE, "other")))
    wait_for(lambda: any(b.manifest["session_id"] == "other" and b.status is BundleStatus.COMPLETE
                         for b in bundles(root_dir)), timeout=30)


def test_a_run_cut_by_kill9_before_its_root_continues_after_the_seal_after_time(tmp_path):
    """The issue's repro: one child, kill -9, restart, quiet past --seal-after, a child and the root.
    Before: sealed ``interrupted`` after --seal-after, then the rest refused "already sealed"."""
    first = Collector(tmp_path, "--seal-after", "1")
    first.accepted(body(child(0)))
    wait_for(lambda: bundles(tmp_path) and len(the_run(tmp_path).events) == 2)
    first.kill9()

    restarted = Collector(tmp_path, "--seal-after", "1")
    try:
        quiet_period_passed(restarted, tmp_path)
        assert the_run(tmp_path).status is BundleStatus.RECORDING, "a rootless run waits for the rootless timeout"
        restarted.accepted(body(child(1), root()))
        wait_for(lambda: the_run(tmp_path).status is not BundleStatus.RECORDING, timeout=30)
    finally:
        restarted.terminate()
    assert_whole(tmp_path, [0, 1])


def test_a_resumed_run_without_its_root_is_sealed_by_the_rootless_rule(tmp_path):
    """Resumed and rootless: sealed ``interrupted`` once quiet for --seal-rootless-after, counted
    from the resume, as a run that never saw a restart."""
    first = Collector(tmp_path, "--seal-after", "0.5")
    first.accepted(body(child(0)))
    wait_for(lambda: bundles(tmp_path) and len(the_run(tmp_path).events) == 2)
    first.kill9()

    restarted = Collector(tmp_path, "--seal-after", "0.5", "--seal-rootless-after", "3")
    try:
        quiet_period_passed(restarted, tmp_path)
        assert the_run(tmp_path).status is BundleStatus.RECORDING
        wait_for(lambda: the_run(tmp_path).status is not BundleStatus.RECORDING, timeout=30)
    finally:
        restarted.terminate()
    run = the_run(tmp_path)
    assert run.events[-1]["payload"] == {"status": "interrupted", "reason": "root_span_missing"}


def test_a_run_sealed_interrupted_at_a_sigterm_restart_reopens_for_its_later_spans(tmp_path):
    """SIGTERM seals every open run ``interrupted`` (``collector_stopped``); a span of it that comes
    after the restart reopens it: the collector's own ending goes, the run goes on in the same bundle.
    Before: refused, ``partial_success`` "already sealed"."""
    first = Collector(tmp_path, "--seal-after", "1")
    first.accepted(body(child(0), child(1)))
    first.terminate()
    stopped = the_run(tmp_path)
    assert stopped.status is BundleStatus.COMPLETE
    assert stopped.events[-1]["payload"] == {"status": "interrupted", "reason": "collector_stopped"}

    restarted = Collector(tmp_path, "--seal-after", "1")
    try:
        restarted.accepted(body(child(2)))
        assert the_run(tmp_path).status is BundleStatus.RECORDING
        restarted.accepted(body(child(3), root()))
        wait_for(lambda: the_run(tmp_path).status is not BundleStatus.RECORDING, timeout=30)
    finally:
        err = restarted.terminate()
    assert "reopened" in err
    assert_whole(tmp_path, [0, 1, 2, 3])


def test_a_kill9_in_the_middle_of_a_sigterm_seal_loses_nothing_and_ends_once(tmp_path):
    """kill -9 after the SIGTERM seal journaled its ``interrupted`` ending but before the terminal
    capture: the restart resumes a run whose last record is the collector's own ending; that ending
    is cut, and the rest of the run continues as if it never stopped."""
    first = Collector(tmp_path, "--seal-after", "1")
    first.accepted(body(child(0)))
    wait_for(lambda: bundles(tmp_path) and len(the_run(tmp_path).events) == 2)
    first.kill9()
    run = the_run(tmp_path)
    ending = {"seq": 3, "at": "2025-11-29T22:00:00.000000Z", "type": "run_finished", "session_id": run.events[0]["session_id"],
              "run_id": run.events[0]["run_id"], "payload": {"status": "interrupted", "reason": "collector_stopped"}}
    with open(run.path / "events.ndjson", "ab") as journal:
        journal.write(orjson.dumps(ending) + b"\n")

    restarted = Collector(tmp_path, "--seal-after", "1")
    try:
        restarted.accepted(body(child(1), root()))
        wait_for(lambda: the_run(tmp_path).status is not BundleStatus.RECORDING, timeout=30)
    finally:
        restarted.terminate()
    assert_whole(tmp_path, [0, 1])
