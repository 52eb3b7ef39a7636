"""An exporter's retry of spans the collector has journaled already: recorded once, answered success.

The official exporters retry a request whose answer they did not get in time (their deadline is
10 s; the collector's own answer waits up to 30 s for the journal write) or that failed on the
way back, with the same spans. A span is immutable once ended, so a span id a run has journaled
already is that span again.
"""

from __future__ import annotations

import orjson
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_session.collector.sink import BundleSink
from otel_session.normalize import SpanData
from otel_session.bundle.write import BundleWriter, WriterLimits

from .conftest import sealed_bundles
from .test_receivers import assert_agent_run_bundle, otlp_json_request, post, record_agent_run

T0 = 1_764_453_121_000_000_000


def finished_agent_run(make_provider) -> list:
    recorded = InMemorySpanExporter()
    record_agent_run(make_provider(recorded).get_tracer("test"))
    return list(recorded.get_finished_spans())


def test_spans_exported_again_by_the_official_exporter_are_journaled_once(make_collector, tmp_path, make_provider):
    spans = finished_agent_run(make_provider)
    children, root = spans[:-1], spans[-1:]
    once = make_collector(tmp_path / "once")
    exporter = GrpcExporter(endpoint=f"127.0.0.1:{once.grpc_port}", insecure=True)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    (expected,) = sealed_bundles(tmp_path / "once")

    retried = make_collector(tmp_path / "retried")
    exporter = GrpcExporter(endpoint=f"127.0.0.1:{retried.grpc_port}", insecure=True)
    for batch in (children, children, spans):  # the children's request sent again, then all of it (the root last)
        assert exporter.export(batch) is SpanExportResult.SUCCESS
    (bundle,) = sealed_bundles(tmp_path / "retried")
    assert_agent_run_bundle(bundle)
    assert bundle.events == expected.events
    counters = retried.counters.snapshot()
    assert (counters["received"], counters["bundled"], counters["duplicate_spans"]) == (7, 3, 4)


def test_a_span_twice_in_one_request_is_journaled_once(collector, bundle_root):
    request = otlp_json_request(attributes={"gen_ai.operation.name": "invoke_agent"})
    spans = request["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans.append(dict(spans[0]))
    response, body = post(collector.http_port, orjson.dumps(request))
    assert response.status == 200, body
    (bundle,) = sealed_bundles(bundle_root)
    assert [event["type"] for event in bundle.events] == ["run_started", "run_finished"]
    assert collector.counters.snapshot()["duplicate_spans"] == 1


def test_a_span_twice_in_a_request_the_capture_refuses_is_refused_twice(tmp_path, redactor):
    """The repeat is answered with its first copy: nothing of it reached the journal."""
    writer = BundleWriter(tmp_path, limits=WriterLimits(max_event_bytes=2048))
    sink = BundleSink(writer, redactor)
    tool = {"session.id": "s", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t",
            "gen_ai.tool.call.arguments": "x" * 5000}  # a record past the bound: the capture stops
    span = SpanData(0xABC, 2, 1, "execute_tool t", T0, T0 + 10, tool)
    try:
        result = sink.submit([span, span])
        assert (result.accepted, result.rejected) == (0, 2)
        counters = sink.counters.snapshot()
        assert (counters["bundled"], counters["duplicate_spans"], counters["rejected"]) == (0, 0, 2)
    finally:
        sink.seal_all()
        writer.shutdown()


def test_log_events_that_waited_for_a_span_the_capture_refuses_are_counted_unmatched(tmp_path, redactor):
    from otel_session.normalize import DetachedEvent, SpanEventData

    writer = BundleWriter(tmp_path, limits=WriterLimits(max_event_bytes=2048))
    sink = BundleSink(writer, redactor)
    chat = {"session.id": "s", "gen_ai.operation.name": "chat", "gen_ai.system": "openai"}
    events = [SpanEventData("gen_ai.user.message", T0 + 1, {"content": "y " * 3000}),  # past the bound
              SpanEventData("gen_ai.choice", T0 + 2, {"index": 0, "message": {"role": "assistant", "content": "ok"}})]
    try:
        assert sink.submit_log_events([DetachedEvent(0xABC, 2, event) for event in events]).accepted == 2
        assert sink.submit([SpanData(0xABC, 2, 1, "chat", T0, T0 + 10, chat)]).rejected == 1
        counters = sink.counters.snapshot()
        assert (counters["log_events_bundled"], counters["log_events_unmatched"]) == (0, 2)
    finally:
        sink.seal_all()
        writer.shutdown()
