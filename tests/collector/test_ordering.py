"""Event-time order with deterministic tie-breaks, whatever order spans arrive in."""

from __future__ import annotations

import itertools

import pytest

from otel_session.collector.sink import BundleSink, event_order_key
from otel_session.normalize import SpanData
from otel_session.bundle.read import BundleStatus, iter_runs, read_bundle
from otel_session.bundle.write import BundleWriter

T0 = 1_764_453_121_000_000_000


def make_span(span_id, parent, start, end, **attributes):
    return SpanData(
        trace_id=0xFEED, span_id=span_id, parent_span_id=parent, name=f"span {span_id}",
        start_time_ns=start, end_time_ns=end, attributes={"session.id": "call-order", **attributes},
    )


ROOT = make_span(1, None, T0, T0 + 10_000)
TOOL_A = make_span(2, 1, T0, T0 + 5_000, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "a"})
TOOL_B = make_span(3, 2, T0, T0 + 5_000, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "b"})
TOOL_C = make_span(4, 1, T0 + 5_000, T0 + 10_000, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "c"})


def record(tmp_path, requests, redactor):
    writer = BundleWriter(tmp_path)
    sink = BundleSink(writer, redactor, seal_after_s=3600)
    for spans in requests:
        assert sink.submit(spans).rejected == 0
    (recorder,) = sink.seal_all()
    writer.shutdown()
    result = read_bundle(recorder.path)
    assert result.status is BundleStatus.COMPLETE, result.diagnostics
    names = {"0000000000000002": "a", "0000000000000003": "b", "0000000000000004": "c"}
    return [(event["seq"], event["type"], names.get(event.get("tool_call_id"))) for event in result.events]


EXPECTED = [
    (1, "run_started", None),
    (2, "tool_execution_started", "a"),
    (3, "tool_execution_started", "b"),  # a's child, started in the same µs: after its parent
    (4, "tool_execution_started", "c"),  # at T0+5µs openings first…
    (5, "tool_execution_finished", "b"),  # …then b's end before its parent a's end
    (6, "tool_execution_finished", "a"),
    (7, "tool_execution_finished", "c"),
    (8, "run_finished", None),
]


@pytest.mark.parametrize("order", list(itertools.permutations([ROOT, TOOL_A, TOOL_B, TOOL_C]))[::5])
def test_any_arrival_order_seals_to_the_same_journal(tmp_path, redactor, order):
    one_by_one = record(tmp_path / "a", [[span] for span in order], redactor)
    in_one_request = record(tmp_path / "b", [list(order)], redactor)
    assert one_by_one == in_one_request == EXPECTED


def test_openings_precede_children_and_closings_follow_them_at_equal_times():
    depth = {"root": 0, "turn": 1, "child": 2}.get
    key = event_order_key(lambda span_id: depth(span_id, 0))
    records = [
        {"at": "t", "type": "turn_finished", "span_id": "turn", "seq": 1},
        {"at": "t", "type": "run_finished", "span_id": "root", "seq": 2},
        {"at": "t", "type": "message_started", "span_id": "child", "seq": 3},
        {"at": "t", "type": "turn_started", "span_id": "turn", "seq": 4},
        {"at": "t", "type": "run_started", "span_id": "root", "seq": 5},
    ]
    assert [r["type"] for r in sorted(records, key=key)] == [
        "run_started", "turn_started", "message_started", "turn_finished", "run_finished"]


def test_a_run_whose_root_never_arrives_is_sealed_interrupted_once_quiet_long_enough(tmp_path, redactor, caplog):
    """Its root went to another collector (or was never exported): the run must not stay open for good."""
    now = [0.0]
    writer = BundleWriter(tmp_path)
    sink = BundleSink(writer, redactor, seal_after_s=10, seal_rootless_after_s=600, clock=lambda: now[0])
    assert sink.submit([TOOL_A, TOOL_B]).accepted == 2
    now[0] = 599.0
    assert sink.seal_quiet_runs() == 0  # a root span ends last: long runs send it late
    now[0] = 600.0
    assert sink.seal_quiet_runs() == 1
    assert "sealed without its root span" in caplog.text and "route every span of a trace to one collector" in caplog.text
    writer.shutdown()
    (run,) = iter_runs(tmp_path)
    result = read_bundle(run.path)
    assert result.status is BundleStatus.COMPLETE
    assert result.events[-1]["type"] == "run_finished" and result.events[-1]["payload"] == {
        "status": "interrupted", "reason": "root_span_missing"}
    assert sink.submit([ROOT]).rejected == 1  # the late root is refused, and said so
