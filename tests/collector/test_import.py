"""``otel-session import``: OTLP JSON lines from a real file exporter → bundles, idempotently."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_session.collector.otlp import to_json_line

from otel_session.cli import main
from otel_session.bundle.read import BundleStatus

from .conftest import CANARY_EMAIL, all_bytes, bundles

class OtlpJsonLinesExporter(InMemorySpanExporter):
    """Writes OTLP JSON lines with the official protobuf encoder (when the json-file exporter is absent)."""

    def __init__(self, path):
        super().__init__()
        self.path = path

    def export(self, spans):
        with open(self.path, "ab") as handle:
            handle.write(to_json_line(encode_spans(spans)))
        return SpanExportResult.SUCCESS


def file_exporter(path):
    """``opentelemetry-exporter-otlp-json-file`` (a real producer of the format) when installed."""
    try:
        from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    except ImportError:
        return OtlpJsonLinesExporter(path)
    return FileSpanExporter(path)


@pytest.fixture
def exported_file(tmp_path):
    path = tmp_path / "traces.jsonl"
    provider = TracerProvider(resource=Resource.create({"service.name": "importer-test"}))
    provider.add_span_processor(SimpleSpanProcessor(file_exporter(path)))
    tracer = provider.get_tracer("t")
    for session_id in ("call-1", "call-2"):
        with tracer.start_as_current_span("invoke_agent booking", attributes={"session.id": session_id}):
            with tracer.start_as_current_span("chat mock-gpt", attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": f'[{{"role":"user","parts":[{{"type":"text","content":"I am {CANARY_EMAIL}"}}]}}]',
            }):
                pass
    with tracer.start_as_current_span("GET /health"):  # no session: a session of its own
        pass
    provider.shutdown()
    return path


def test_import_is_idempotent_and_redacted(exported_file, tmp_path):
    root = tmp_path / "bundles"
    runner = CliRunner()
    first = runner.invoke(main, ["import", str(exported_file), "--dir", str(root)], env={"OTEL_SESSION_REDACTION_KEY": "k"})
    assert first.exit_code == 0, first.output
    assert ("5 spans: 3 run(s) written, 0 already imported (1 named no session: each recorded as a session "
            "of its own)") in first.output
    found = bundles(root)
    derived = [bundle for bundle in found if bundle.manifest.get("session_derived")]
    assert [bundle.session_id for bundle in derived] == [bundle.run_id for bundle in derived] and len(derived) == 1
    assert sorted(bundle.session_id for bundle in found if bundle not in derived) == ["call-1", "call-2"]
    for bundle in found:
        assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
        assert [event["type"] for event in bundle.events] == (
            ["run_started", "run_finished"] if bundle in derived
            else ["run_started", "message_started", "message_finished", "run_finished"])
    snapshot = all_bytes(root)
    assert CANARY_EMAIL.encode() not in snapshot

    second = runner.invoke(main, ["import", str(exported_file), "--dir", str(root)], env={"OTEL_SESSION_REDACTION_KEY": "k"})
    assert second.exit_code == 0, second.output
    assert "0 run(s) written, 2 already imported" in second.output
    assert all_bytes(root) == snapshot


def test_a_malformed_line_is_reported_and_the_rest_imported(exported_file, tmp_path):
    lines = exported_file.read_bytes().splitlines(keepends=True)
    exported_file.write_bytes(lines[0] + b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "xyz"}]}]}]}\n' + b"".join(lines[1:]))
    result = CliRunner().invoke(main, ["import", str(exported_file), "--dir", str(tmp_path / "b")],
                                env={"OTEL_SESSION_REDACTION_KEY": "k"})
    assert result.exit_code == 1
    assert f"{exported_file}:2: span traceId is not hex" in result.output
    assert len(bundles(tmp_path / "b")) == 3
