"""The span exporter is the collector's assembly behind a ``SpanExporter``: same routing, same bundle."""

from __future__ import annotations

import json

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_session.instrument.exporter import SessionBundleExporter
from otel_session.bundle.read import BundleStatus, find_bundles, read_bundle


def test_a_child_exported_before_the_root_that_names_the_session_is_bundled(tmp_path):
    """A model call ends (and is exported) before its agent's root span, which alone carries the
    session: like the collector, the exporter holds it until the root routes the trace."""
    exporter = SessionBundleExporter(tmp_path)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent", attributes={"session.id": "s-1", "gen_ai.agent.name": "bot"}):
        with tracer.start_as_current_span("chat gpt-4o", attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "hello"}]}]),
        }):
            pass
    provider.shutdown()
    (path,) = find_bundles([tmp_path])
    bundle = read_bundle(path)
    assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
    assert bundle.manifest["agent"] == "bot" and bundle.manifest["session_id"] == "s-1"
    roles = [e["payload"]["role"] for e in bundle.events if e["type"] == "message_started"]
    assert roles == ["user", "assistant"]
    assert [e["type"] for e in bundle.events][0] == "run_started"
    assert bundle.capture["order"] == "event_time"
    assert exporter.spans_without_session == 0 and exporter.runs_written == 1
