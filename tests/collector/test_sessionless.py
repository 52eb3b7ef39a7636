"""A trace that names no session is still recorded: after the hold, a run of a session of its own."""

from __future__ import annotations

import json

import orjson
from click.testing import CliRunner

from otel_session.cli import main
from otel_session.collector.importer import import_files
from otel_session.collector.sink import BundleSink
from otel_session.normalize import SpanData
from otel_session.bundle.read import BundleStatus, iter_runs, read_bundle
from otel_session.bundle.write import BundleWriter

T0 = 1_764_453_121_000_000_000
TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}


def _span(trace_id, span_id, parent, **attributes):
    return SpanData(trace_id=trace_id, span_id=span_id, parent_span_id=parent, name=f"span {span_id}",
                    start_time_ns=T0 + span_id, end_time_ns=T0 + 1_000 + span_id, attributes=attributes)


def test_after_the_hold_a_sessionless_trace_is_a_run_whose_session_is_its_run_id(tmp_path, redactor):
    now = [0.0]
    writer = BundleWriter(tmp_path)
    sink = BundleSink(writer, redactor, seal_after_s=5, hold_unrouted_s=30, clock=lambda: now[0])
    spans = [_span(0xABC, 2, 1, **TOOL), _span(0xABC, 1, None)]
    assert sink.submit(spans).accepted == 0  # held: a later span of the trace may still name one
    now[0] = 29.0
    sink.seal_quiet_runs()
    assert sink.open_run_count == 0
    now[0] = 30.0
    sink.seal_quiet_runs()  # the hold is over: a run of its own
    assert sink.open_run_count == 1
    now[0] = 36.0
    assert sink.seal_quiet_runs() == 1
    writer.shutdown()
    (info,) = iter_runs(tmp_path)
    assert info.session_id == info.run_id == spans[0].run_id
    bundle = read_bundle(info.path)
    assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
    assert bundle.manifest["session_derived"] is True
    assert [e["type"] for e in bundle.events] == [
        "run_started", "tool_execution_started", "tool_execution_finished", "run_finished"]
    counters = sink.counters.snapshot()
    assert counters["no_session"] == 0 and counters["bundled"] == 2 and counters["runs_session_derived"] == 1
    listed = json.loads(CliRunner().invoke(main, ["sessions", "--dir", str(tmp_path), "--json"]).output)
    assert info.run_id in json.dumps(listed)


def test_over_the_hold_bound_a_trace_is_recorded_at_once_not_dropped(tmp_path, redactor):
    writer = BundleWriter(tmp_path)
    sink = BundleSink(writer, redactor, hold_unrouted_s=30, max_held_spans=1)
    assert sink.submit([_span(0x1, 1, None)]).accepted == 0  # held
    result = sink.submit([_span(0x2, 1, None), _span(0x2, 2, 1, **TOOL)])  # over the bound
    assert result.accepted == 2 and result.rejected == 0
    sink.seal_all()  # the held one too, at shutdown
    writer.shutdown()
    runs = list(iter_runs(tmp_path))
    assert len(runs) == 2 and all(run.session_id == run.run_id for run in runs)
    assert sink.counters.snapshot()["no_session"] == 0


def test_import_records_sessionless_traces_as_sessions_of_their_own(tmp_path, redactor):
    line = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "t"}, "spans": [{
        "traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "00f067aa0ba902b7", "name": "job",
        "startTimeUnixNano": str(T0), "endTimeUnixNano": str(T0 + 1000)}]}]}]}
    path = tmp_path / "traces.jsonl"
    path.write_bytes(orjson.dumps(line) + b"\n")
    report = import_files([path], tmp_path / "root", redactor=redactor)
    assert report.ok and report.runs_session_derived == 1
    (info,) = iter_runs(tmp_path / "root")
    assert report.runs_written == [info.run_id] and info.session_id == info.run_id


def test_a_late_sessionless_span_of_a_run_recorded_before_never_makes_a_second_bundle(tmp_path, redactor):
    """After a restart the trace's binding to its session is gone; its run's bundle is not."""
    first_writer = BundleWriter(tmp_path)
    first = BundleSink(first_writer, redactor)
    assert first.submit([_span(0x5, 1, None, **{"session.id": "named"})]).accepted == 1
    first.seal_all()
    first_writer.shutdown()
    writer = BundleWriter(tmp_path)
    sink = BundleSink(writer, redactor)
    assert sink.submit([_span(0x5, 2, 1, **TOOL)]).accepted == 0  # held: no session named
    sink.seal_all()
    writer.shutdown()
    assert [run.session_id for run in iter_runs(tmp_path)] == ["named"]
    assert sink.counters.snapshot()["rejected"] == 1


def test_a_session_named_only_after_the_hold_is_a_warning_naming_the_setting(tmp_path, redactor, caplog):
    """The run stays in the session it was given (its bundle is not moved); the log says why and
    what to change, once, without the session id itself."""
    now = [0.0]
    writer = BundleWriter(tmp_path)
    sink = BundleSink(writer, redactor, seal_after_s=5, hold_unrouted_s=30, clock=lambda: now[0])
    assert sink.submit([_span(0xABC, 2, 1, **TOOL)]).accepted == 0
    now[0] = 30.0
    sink.seal_quiet_runs()
    for span_id in (1, 3):  # the root names the session, and a later span too: one warning
        span = _span(0xABC, span_id, None if span_id == 1 else 1, **{"session.id": "jane.doe@example.com"})
        assert sink.submit([span]).accepted == 1
    sink.seal_all()
    writer.shutdown()
    (info,) = iter_runs(tmp_path)
    assert info.session_id == info.run_id
    warnings = [record.getMessage() for record in caplog.records if "--hold-unrouted" in record.getMessage()]
    assert len(warnings) == 1 and "jane.doe@example.com" not in warnings[0]
