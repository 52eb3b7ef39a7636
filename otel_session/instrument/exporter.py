"""``OTEL_TRACES_EXPORTER=otlp,otel_session``: bundles from finished spans (span-end granularity).

:class:`SessionBundleExporter` is registered under the ``opentelemetry_traces_exporter`` entry point
group as ``otel_session``; the SDK builds it with no arguments and wraps it in a
``BatchSpanProcessor``, so it is configured from ``OTEL_SESSION_DIR`` and ``OTEL_SESSION_REDACT_*``.

It sees spans only when they end and only what the SDK kept of them (128 events per span by
default; the rest are recorded as an ``upstream_drop``), so a run's bundle is written when its
root span is exported: events of the run are buffered, put in event-time order, then written and
sealed. Use the instrumentor (``opentelemetry-instrument``) or ``otel_session.configure()`` for the
lossless, live journal; use this exporter when only exporter configuration is available.
Spans with no session id are not bundled (counted in ``spans_without_session``), nor are spans of
runs that this process already records with ``configure()`` / the instrumentor (counted in
``spans_recorded_in_process``), so enabling both never writes a run twice.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_session import config
from otel_session import semconv as sc
from otel_session.instrument._runtime import current_recorder
from otel_session.journal import RunKind, run_id_from_trace_id
from otel_session.normalize import JournalEvent, SpanData, normalize_span, session_id_of
from otel_session.redact import RedactionPolicy, Redactor, load_or_create_key
from otel_session.write import BundleWriter, WriterLimits

__all__ = ["SessionBundleExporter"]

logger = logging.getLogger(__name__)


@dataclass
class _PendingRun:
    session_id: str
    events: list[JournalEvent] = field(default_factory=list)


def _order_key(event: JournalEvent) -> tuple[int, int]:
    phase = 0 if event.type.endswith("_started") else 2 if event.type.endswith("_finished") else 1
    return event.at_ns, phase


def _recorded_in_process(trace_id: int) -> bool:
    """True when this process's recorder (configure()/the instrumentor) journals that run already."""
    recorder = current_recorder()
    return recorder is not None and (trace_id in recorder.runs or trace_id in recorder.finished_traces)


class SessionBundleExporter(SpanExporter):
    """Writes one bundle per trace (run) whose spans carry a session id."""

    def __init__(
        self,
        bundle_dir: str | os.PathLike[str] | None = None,
        *,
        redaction: RedactionPolicy | None = None,
        writer_limits: WriterLimits | None = None,
    ) -> None:
        root = config.bundle_dir(bundle_dir)
        policy = redaction if redaction is not None else RedactionPolicy.from_env()
        self._redactor = Redactor(policy, key=load_or_create_key(root))
        self._writer = BundleWriter(root, limits=writer_limits)
        self._pending: dict[int, _PendingRun] = {}
        self._roots: dict[int, SpanData] = {}
        self._lock = threading.Lock()
        self.spans_without_session = 0
        self.spans_recorded_in_process = 0
        self.runs_written = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            with self._lock:
                for span in spans:
                    self._take(SpanData.from_readable_span(span))
        except Exception:  # noqa: BLE001 - the export path logs, never raises into the app
            logger.exception("otel_session exporter failed on a batch")
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def _take(self, span: SpanData) -> None:
        if _recorded_in_process(span.trace_id):
            self.spans_recorded_in_process += 1
            return
        session_id = session_id_of(span.attributes)
        pending = self._pending.get(span.trace_id)
        if pending is None:
            if session_id is None:
                self.spans_without_session += 1
                return
            pending = self._pending[span.trace_id] = _PendingRun(session_id)
        pending.events.extend(self._redactor.redact_events(normalize_span(span)))
        if span.parent_span_id is None:
            self._roots[span.trace_id] = span
            self._write_run(span.trace_id, span)

    def _write_run(self, trace_id: int, root: SpanData | None) -> None:
        pending = self._pending.pop(trace_id)
        self._roots.pop(trace_id, None)
        attributes = root.attributes if root is not None else {}
        kind = RunKind(attributes.get(sc.RUN_KIND, "live"))
        eval_id = attributes.get(sc.EVAL_ID)
        first = min(pending.events, key=_order_key, default=None)
        try:
            recorder = self._writer.open_run(
                session_id=pending.session_id,
                run_id=run_id_from_trace_id(trace_id),
                kind=kind if eval_id or kind is RunKind.LIVE else RunKind.LIVE,
                eval_id=eval_id if kind is RunKind.EVAL else None,
                agent=attributes.get(sc.AGENT_NAME),
                service=root.service_name if root is not None else None,
                created_at_ns=root.start_time_ns if root is not None else (first.at_ns if first else None),
            )
        except Exception:  # noqa: BLE001
            logger.exception("otel_session exporter could not open the bundle of trace %032x", trace_id)
            return
        recorder.append_events(sorted(pending.events, key=_order_key))
        recorder.close(run_status=None if root is not None else "interrupted")
        self.runs_written += 1

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._writer.force_flush(timeout_millis)

    def shutdown(self) -> None:
        """Write runs whose root span never came (as interrupted), then stop the writer."""
        with self._lock:
            for trace_id in list(self._pending):
                self._write_run(trace_id, None)
        self._writer.shutdown()
