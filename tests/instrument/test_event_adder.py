"""The API's own span events (``_spans.event_adder``, the hot path's ``add_event``) are what the SDK's
public ``span.add_event`` makes: same events on the span and in OTLP, refused after the span ends
with the SDK's warning, and validated by the SDK when a limit applies."""

from __future__ import annotations

import logging

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import Event, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_session.instrument._spans import event_adder

ATTRIBUTES = {"otel_session.delta.index": 0, "otel_session.delta.kind": "text", "otel_session.delta.text": "x" * 40}


def _spans(limits: SpanLimits | None = None):
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=limits)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    return exporter, tracer.start_span("own"), tracer.start_span("public")


def test_own_events_are_the_sdks_events_on_the_span_and_in_otlp():
    exporter, own, public = _spans()
    event_adder(own)("otel_session.delta", dict(ATTRIBUTES), 1_000)
    public.add_event("otel_session.delta", dict(ATTRIBUTES), timestamp=1_000)
    own.end()
    public.end()
    finished = {span.name: span for span in exporter.get_finished_spans()}
    (mine,), (theirs,) = finished["own"].events, finished["public"].events
    assert isinstance(mine, Event)
    assert (mine.name, dict(mine.attributes), mine.timestamp, mine.dropped_attributes) == (
        theirs.name, dict(theirs.attributes), theirs.timestamp, theirs.dropped_attributes)
    encoded = {span.name: span.events for rs in encode_spans(list(finished.values())).resource_spans
               for scope in rs.scope_spans for span in scope.spans}
    assert encoded["own"] == encoded["public"]


def test_an_event_on_an_ended_span_is_refused_with_the_sdks_warning(caplog):
    caplog.set_level(logging.WARNING)
    exporter, own, public = _spans()
    add_event = event_adder(own)
    own.end()
    public.end()
    add_event("otel_session.delta", dict(ATTRIBUTES), 1_000)
    public.add_event("otel_session.delta", dict(ATTRIBUTES), timestamp=1_000)
    assert [len(span.events) for span in exporter.get_finished_spans()] == [0, 0]
    warnings = [(record.name, record.getMessage()) for record in caplog.records]
    assert warnings == [("opentelemetry.sdk.trace", "Tried calling _add_event on an ended span.")] * 2


def test_a_span_limit_is_applied_by_the_sdk():
    exporter, own, _ = _spans(SpanLimits(max_attribute_length=8))
    event_adder(own)("otel_session.delta", dict(ATTRIBUTES), 1_000)
    own.end()
    (event,) = exporter.get_finished_spans()[0].events
    assert event.attributes["otel_session.delta.text"] == "x" * 8
