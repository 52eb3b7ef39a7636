"""Import OTLP JSON lines (the OpenTelemetry Collector file exporter's format) into bundles.

Contract::

    report = import_files([path, ...], root, redactor=redactor, progress=callback)
    report.runs_written, report.runs_already_imported, report.errors

Each line is one ``ExportTraceServiceRequest`` (or ``ExportLogsServiceRequest``: GenAI message log
events join their spans, wherever their lines are) in OTLP JSON. Lines go through the collector's own
decode → normalize → redact → write path; at the end every run is sealed in event-time order.
Importing the same file again changes nothing: its runs are sealed, so they are reported as
already imported (an idempotent step, not an error). A malformed line, or a JSON line that is not
an OTLP export request (``{"foo": 1}``), is reported with its file and line number and skipped;
the rest of the file is still imported.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from otel_session.collector.otlp import OtlpDecodeError, log_events_of, parse_json, spans_of
from otel_session.collector.counters import RetryReason
from otel_session.collector.sink import BundleSink, EventRedactor, Overloaded, RejectReason
from otel_session.bundle.write import BundleWriter
from otel_session.catalog import writer_hooks

__all__ = ["ImportReport", "import_files"]

_RETRY_WAIT_S = 0.05
_WAIT_FOR_WRITER = (RetryReason.WRITER_BEHIND, RetryReason.QUEUE_BYTES)


@dataclass
class ImportReport:
    spans: int = 0
    spans_already_imported: int = 0
    runs_written: list[str] = field(default_factory=list)
    runs_already_imported: set[str] = field(default_factory=set)
    runs_session_derived: int = 0
    """Runs of traces that named no session, recorded as sessions of their own."""
    log_events: int = 0
    log_events_unmatched: int = 0
    rejected: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors and not self.rejected


def import_files(
    paths: Iterable[str | os.PathLike[str]],
    root: str | os.PathLike[str],
    *,
    redactor: EventRedactor,
    progress: Callable[[int], None] = lambda size: None,
) -> ImportReport:
    """Import every line of every file in ``paths``; ``progress`` gets the bytes read so far."""
    report = ImportReport()
    writer = BundleWriter(root, identifier=getattr(redactor, "identifier", None), hooks=writer_hooks(root))
    sink = BundleSink(writer, redactor, seal_after_s=float("inf"), hold_logs_s=float("inf"), ack_after_write=False,
                      repeats_expected=True)
    try:
        for path in map(Path, paths):
            with open(path, "rb") as handle:
                for number, line in enumerate(handle, start=1):
                    progress(len(line))
                    if line.strip():
                        _import_line(sink, writer, line, f"{path}:{number}", report)
    finally:
        sealed = sink.seal_all()
        writer.shutdown()
    report.runs_written = sorted(recorder.run_id for recorder in sealed)
    counters = sink.counters.snapshot()
    report.runs_session_derived = counters["runs_session_derived"]
    report.log_events_unmatched = counters["log_events_unmatched"]
    return report


def _import_line(sink: BundleSink, writer: BundleWriter, line: bytes, where: str, report: ImportReport) -> None:
    try:
        request = parse_json(line, signal=None)
    except OtlpDecodeError as exc:
        report.errors.append(f"{where}: {exc}")
        return
    if not request.ListFields() and not _names_otlp(line):
        report.errors.append(f"{where}: not an OTLP export request (no resourceSpans or resourceLogs)")
        return
    if isinstance(request, ExportLogsServiceRequest):
        events, _ = log_events_of(request)  # other log records have no place in a bundle
        report.log_events += len(events)
        result = sink.submit_log_events(events)
        result.rejected_by.pop(RejectReason.SEALED, 0)  # their run was imported before, with them
    else:
        spans = list(spans_of(request))
        report.spans += len(spans)
        while True:
            try:
                result = sink.submit(spans)
                break
            except Overloaded as exc:
                if exc.reason not in _WAIT_FOR_WRITER:  # out of disk or descriptors: no use waiting here
                    report.rejected.append(f"{where}: {exc}")
                    return
                writer.force_flush()  # the writer is behind: let it catch up, then retry the same line
                time.sleep(_RETRY_WAIT_S)
        sealed = result.rejected_by.pop(RejectReason.SEALED, 0)
        if sealed:
            report.spans_already_imported += sealed
            report.runs_already_imported.update({span.run_id for span in spans})
    if result.rejected_by:
        report.rejected.append(f"{where}: {result.error_message}")


_OTLP_KEYS = frozenset({"resourceSpans", "resource_spans", "resourceLogs", "resource_logs"})


def _names_otlp(line: bytes) -> bool:
    """Whether a line that decoded to an empty request says it is one (``{"resourceSpans": []}``)
    rather than being some other JSON object (``{"foo": 1}``, whose unknown fields OTLP ignores)."""
    value = orjson.loads(line)
    return isinstance(value, dict) and not _OTLP_KEYS.isdisjoint(value)
