"""A bound deliberately exceeded: the capture fails with the bound's code, the app goes on, nothing is silent."""

from __future__ import annotations

import logging
import random

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

import otel_session
from otel_session.bundle.read import BundleStatus, find_bundles, read_bundle
from otel_session.testing import capture_bundle
from otel_session.bundle.write import WriterLimits

# The writer thread is woken only by the batch thresholds, so the queue fills deterministically.
_NO_TIMED_FLUSH = {"flush_interval_s": 60.0}


@pytest.mark.parametrize(
    ("limits", "chunk", "code"),
    [
        (WriterLimits(max_queue_records=100, **_NO_TIMED_FLUSH), "tok ", "queue_records_exceeded"),
        (WriterLimits(max_queue_bytes=64 * 1024, **_NO_TIMED_FLUSH), "x" * 1000, "queue_bytes_exceeded"),
        (WriterLimits(max_event_bytes=512), "y" * 1000, "event_too_large"),
    ],
)
def test_in_process_bound_fails_the_capture_with_its_code(caplog, limits, chunk, code):
    caplog.set_level(logging.WARNING)
    finished = False
    with capture_bundle(writer_limits=limits) as captured:
        with otel_session.session("bounded"), otel_session.run(agent="load"):
            with otel_session.message("assistant") as m:
                for _ in range(500):
                    m.delta(chunk)
        with otel_session.session("next"), otel_session.run(agent="load"):
            otel_session.slot_write("party_size", 2)
        finished = True
    assert finished  # the app never saw the failure
    bounded, following = captured.bundles
    assert bounded.status is BundleStatus.FAILED
    assert bounded.capture["failure"]["code"] == code
    assert bounded.capture["event_count"] == len(bounded.events)  # what was accepted is all on disk
    assert [e["seq"] for e in bounded.events] == list(range(1, len(bounded.events) + 1))
    assert len(bounded.events) < 500 and "run_finished" not in [e["type"] for e in bounded.events]
    assert following.status is BundleStatus.COMPLETE  # other runs unaffected
    assert any(code in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records)
    assert {s.name for s in captured.spans} >= {"invoke_agent load", "message assistant"}  # the OTLP view goes on


def _chat_trace(trace_id: int, spans: int, content: str) -> list[ReadableSpan]:
    resource = Resource.create({"service.name": "load-agent"})
    rng = random.Random(trace_id)  # random span ids, as SDKs draw them
    root = SpanContext(trace_id, rng.getrandbits(64) | 1, is_remote=False, trace_flags=TraceFlags(1))
    session = {"session.id": f"bounded-{trace_id:x}"}
    chats = [
        ReadableSpan(
            name="chat mock-gpt", context=SpanContext(trace_id, rng.getrandbits(64) | 1, is_remote=False, trace_flags=TraceFlags(1)),
            parent=root, resource=resource, kind=SpanKind.CLIENT, start_time=1_000 + n, end_time=2_000 + n,
            attributes={**session, "gen_ai.operation.name": "chat", "gen_ai.request.model": "mock-gpt",
                        "gen_ai.input.messages": f'[{{"role":"user","parts":[{{"type":"text","content":"{content}"}}]}}]'},
        )
        for n in range(spans - 1)
    ]
    return chats + [ReadableSpan(
        name="invoke_agent booking", context=root, parent=None, resource=resource, kind=SpanKind.SERVER,
        start_time=1_000, end_time=3_000, attributes={**session, "gen_ai.operation.name": "invoke_agent"},
    )]


@pytest.mark.parametrize(
    ("limits", "spans", "content", "code"),
    [
        (WriterLimits(max_event_bytes=4096), 3, "z" * 8000, "event_too_large"),
        (WriterLimits(max_queue_records=32, **_NO_TIMED_FLUSH), 64, "a table for two", "queue_records_exceeded"),
    ],
)
def test_collector_bound_rejects_through_partial_success_with_its_code(
    make_collector, tmp_path, caplog, limits, spans, content, code
):
    caplog.set_level(logging.WARNING)
    collector = make_collector(tmp_path, writer_limits=limits)
    bounded = _chat_trace(0xB0_0000_0000_0000_0000_0000_0000_0001, spans, content)
    fine = _chat_trace(0xF1_0000_0000_0000_0000_0000_0000_0001, 2, "hello")
    with grpc.insecure_channel(f"127.0.0.1:{collector.grpc_port}") as channel:
        response = TraceServiceStub(channel).Export(encode_spans(bounded + fine), timeout=30)
    assert response.partial_success.rejected_spans == spans
    assert code in response.partial_success.error_message
    collector.stop()
    counters = collector.counters.snapshot()
    assert counters["received"] == spans + 2
    assert counters["rejected"] == spans and counters["bundled"] == 2
    by_session = {read.manifest["session_id"]: read for read in map(read_bundle, find_bundles([tmp_path]))}
    failed = by_session[f"bounded-{bounded[0].context.trace_id:x}"]
    assert failed.status is BundleStatus.FAILED and failed.capture["failure"]["code"] == code
    assert failed.capture["event_count"] == len(failed.events)
    assert by_session[f"bounded-{fine[0].context.trace_id:x}"].status is BundleStatus.COMPLETE
    logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any(code in message and "rejected" in message for message in logged)
