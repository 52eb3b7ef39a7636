"""A run the collector got in one request is sealed without the rewrite, and is in the same order."""

from __future__ import annotations

import random

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

from otel_session.collector.sink import event_order_key
from otel_session.bundle.read import BundleStatus, find_bundles, read_bundle


def _trace(trace_id: int) -> list[ReadableSpan]:
    """A run root, chats and tools, many at the same instant (ties the order key must break)."""
    resource = Resource.create({"service.name": "order"})
    rng = random.Random(trace_id)  # random span ids, as SDKs draw them
    root = SpanContext(trace_id, rng.getrandbits(64) | 1, is_remote=False, trace_flags=TraceFlags(1))
    spans = [ReadableSpan(name="invoke_agent booking", context=root, parent=None, resource=resource, kind=SpanKind.SERVER,
                          start_time=1_000, end_time=9_000,
                          attributes={"session.id": f"order-{trace_id >> 64:x}", "gen_ai.operation.name": "invoke_agent"})]
    for n in range(12):
        context = SpanContext(trace_id, rng.getrandbits(64) | 1, is_remote=False, trace_flags=TraceFlags(1))
        attributes = (
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup", "gen_ai.tool.call.result": "ok"}
            if n % 3 == 0 else
            {"gen_ai.operation.name": "chat", "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"hi"}]}]'}
        )
        spans.append(ReadableSpan(name="span", context=context, parent=root, resource=resource, kind=SpanKind.CLIENT,
                                  start_time=1_000 + (n // 4) * 1_000, end_time=2_000 + (n // 4) * 1_000, attributes=attributes))
    random.Random(trace_id).shuffle(spans)  # the same arrival order as with numbered ids
    return spans


def _depth_of(records):
    parents = {}
    for record in records:
        if record["type"] == "run_started":
            parents[record["span_id"]] = None
    return lambda span_id: 0 if span_id in parents or not span_id else 1


def test_one_request_runs_skip_the_rewrite_and_match_the_sealed_order(make_collector, tmp_path):
    collector = make_collector(tmp_path)
    one_request, two_requests = _trace(0xA1 << 64 | 1), _trace(0xA2 << 64 | 1)
    collector.receiver.export(encode_spans(one_request + two_requests[:5]))
    collector.receiver.export(encode_spans(two_requests[5:]))
    inode = {path.parent.parent.name: path.stat().st_ino for path in tmp_path.rglob("events.ndjson")}
    collector.stop()
    bundles = {read.manifest["session_id"]: read for read in map(read_bundle, find_bundles([tmp_path]))}
    assert len(bundles) == 2
    rewritten = {path.parent.parent.name: path.stat().st_ino != inode[path.parent.parent.name]
                 for path in tmp_path.rglob("events.ndjson")}
    assert rewritten == {"order-a1": False, "order-a2": True}
    for read in bundles.values():
        assert read.status is BundleStatus.COMPLETE and read.capture["order"] == "event_time"
        records = read.events
        assert records == sorted(records, key=event_order_key(_depth_of(records)))
        assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert not list(tmp_path.rglob(".events.ndjson.reorder.tmp"))
