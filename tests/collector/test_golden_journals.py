"""Every entry point writes the same journals for the same fixed stream as the reference recorded
in ``golden/`` (made by the collector before its one-pass decode): gRPC and HTTP with the official
OTLP exporters, ``import`` of OTLP JSON lines, and the in-process span exporter.

The stream (``golden_stream``) covers our own conventions, GenAI/OpenInference/Traceloop spans, log
events joined early and late, voice spans, a sessionless trace, deep and oversize values, upstream
drops, hostile ids and personal data. Only what the receiver stamps from the wall clock (seal
times) is left out of the comparison. ``OTEL_SESSION_REGEN_GOLDEN=1`` rewrites the reference.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.trace.export import SpanExportResult

from otel_session.collector.importer import import_files
from otel_session.collector.otlp import to_json_line
from otel_session.instrument.exporter import SessionBundleExporter
from otel_session.bundle.read import find_bundles, read_bundle
from otel_session.redact import Redactor, RedactionPolicy
from otel_session.redact.policy import ENV_REDACTION_KEY
from otel_session.testing import running_collectors

from . import golden_stream as stream
from .conftest import sealed_bundles

GOLDEN = Path(__file__).parent / "golden"
KEY = "golden-journals-key"
COLLECTOR_RUNS = 8  # every trace of the stream, the sessionless one as a derived session
EXPORTER_RUNS = 7  # the span exporter derives no session
_WALL_CLOCK = ("sealed_at", "closed_at", "written_at", "updated_at")


def journals(root: Path) -> dict[str, Any]:
    """Each bundle's manifest, capture and records by run id, minus wall-clock stamps."""
    found = {}
    for path in find_bundles([root]):
        bundle = read_bundle(path)
        found[bundle.manifest["run_id"]] = {
            "status": bundle.status.value,
            "manifest": _without_wall_clock(bundle.manifest),
            "capture": _without_wall_clock(bundle.capture or {}),
            "events": bundle.events,
            "diagnostics": [str(item) for item in bundle.diagnostics],
        }
    return dict(sorted(found.items()))


def _without_wall_clock(document: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in document.items() if key not in _WALL_CLOCK}


def check(name: str, found: dict[str, Any]) -> None:
    path = GOLDEN / f"{name}.json"
    text = json.dumps(found, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    if os.environ.get("OTEL_SESSION_REGEN_GOLDEN"):
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
    expected = json.loads(path.read_text())
    assert found.keys() == expected.keys()
    for run_id, journal in found.items():
        assert journal == expected[run_id], run_id


@pytest.fixture(autouse=True)
def fixed_key(monkeypatch):
    monkeypatch.setenv(ENV_REDACTION_KEY, KEY)


def _collector_paths(transport: str, root: Path) -> None:
    redactor = Redactor(RedactionPolicy(), key=KEY.encode())
    with running_collectors(grpc_address="127.0.0.1:0", http_address="127.0.0.1:0", redactor=redactor,
                            seal_after_s=1.0, hold_unrouted_s=0.3) as make:
        collector = make(root)
        if transport == "grpc":
            endpoint = f"127.0.0.1:{collector.grpc_port}"
            spans, logs = GrpcSpanExporter(endpoint=endpoint, insecure=True), GrpcLogExporter(endpoint=endpoint,
                                                                                              insecure=True)
        else:
            base = f"http://127.0.0.1:{collector.http_port}"
            spans, logs = HttpSpanExporter(endpoint=f"{base}/v1/traces"), HttpLogExporter(endpoint=f"{base}/v1/logs")
        assert logs.export(stream.log_records(stream.early_log_records())) is LogRecordExportResult.SUCCESS
        assert spans.export(stream.spans()) is SpanExportResult.SUCCESS
        assert logs.export(stream.log_records(stream.late_log_records())) is LogRecordExportResult.SUCCESS
        sealed_bundles(root, COLLECTOR_RUNS, timeout=120.0)
        spans.shutdown()
        logs.shutdown()


@pytest.mark.parametrize("transport", ["grpc", "http"])
def test_the_receivers_write_the_reference_journals(tmp_path, transport):
    _collector_paths(transport, tmp_path)
    check("collector", journals(tmp_path))


def test_import_writes_the_reference_journals(tmp_path):
    lines = tmp_path / "otlp.jsonl"
    lines.write_bytes(
        to_json_line(encode_logs(stream.log_records(stream.early_log_records())))
        + to_json_line(encode_spans(stream.spans()))
        + to_json_line(encode_logs(stream.log_records(stream.late_log_records())))
    )
    root = tmp_path / "bundles"
    report = import_files([lines], root, redactor=Redactor(RedactionPolicy(), key=KEY.encode()))
    assert not report.errors and len(report.runs_written) == COLLECTOR_RUNS
    check("collector", journals(root))  # the same journals as the receivers


def test_the_span_exporter_writes_the_reference_journals(tmp_path):
    exporter = SessionBundleExporter(tmp_path)
    assert exporter.export(stream.spans()) is SpanExportResult.SUCCESS
    exporter.shutdown()
    assert exporter.runs_written == EXPORTER_RUNS
    check("exporter", journals(tmp_path))
