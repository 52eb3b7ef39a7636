"""``OTEL_TRACES_EXPORTER=otlp,otel_session``: bundles from finished spans (span-end granularity).

:class:`SessionBundleExporter` is registered under the ``opentelemetry_traces_exporter`` entry point
group as ``otel_session``; the SDK builds it with no arguments and wraps it in a
``BatchSpanProcessor``, so it is configured from ``OTEL_SESSION_DIR`` and ``OTEL_SESSION_REDACT_*``.

A thin ``SpanExporter`` over the collector's assembly (``otel_session.collector.sink.BundleSink``):
each exported batch is routed, normalized, redacted and appended exactly as an OTLP request
would be, and a run is sealed (in event-time order) once its root span was exported. It sees spans
only when they end and only what the SDK kept of them (128 events per span by default; the rest
are recorded as an ``upstream_drop``). Use the instrumentor (``opentelemetry-instrument``) or
``otel_session.configure()`` for the lossless, live journal; use this exporter when only exporter
configuration is available. Spans with no session id are not bundled (counted in
``spans_without_session`` at shutdown, or once held ``hold_unrouted_s``), nor are spans of runs
that this process already records with ``configure()`` / the instrumentor (counted in
``spans_recorded_in_process``), so enabling both never writes a run twice. At shutdown, runs whose
root span never came are sealed as interrupted.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_session.core import config
from otel_session.collector.sink import BundleSink, Overloaded
from otel_session.instrument._runtime import current_recorder
from otel_session.core.log import get_logger
from otel_session.normalize import SdkSpan
from otel_session.redact import RedactionPolicy, Redactor, load_or_create_key
from otel_session.bundle.write import BundleWriter, WriterLimits
from otel_session.catalog import writer_hooks

__all__ = ["RECORDED_BY", "SessionBundleExporter"]

logger = get_logger(__name__)

RECORDED_BY = "otel-session span exporter"
"""run.json ``recorded_by``: a collector never resumes these runs."""


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
        redactor = Redactor(policy, key=load_or_create_key(root))
        self._writer = BundleWriter(root, limits=writer_limits, identifier=redactor.identifier, hooks=writer_hooks(root))
        # seal_after_s=0: a run seals at the end of the batch that brought its root span.
        self._sink = BundleSink(self._writer, redactor, seal_after_s=0.0,
                                recorded_by=RECORDED_BY, derive_sessions=False)
        self.spans_recorded_in_process = 0

    @property
    def spans_without_session(self) -> int:
        return self._sink.counters.snapshot()["no_session"]

    @property
    def runs_written(self) -> int:
        return self._sink.counters.snapshot()["runs_sealed"]

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            taken = [SdkSpan(span) for span in spans
                     if not _recorded_in_process(span.context.trace_id)]
            self.spans_recorded_in_process += len(spans) - len(taken)
            if taken:
                self._sink.submit(taken)
            self._sink.seal_quiet_runs()
        except Overloaded as exc:
            logger.warning("otel_session exporter: %s", exc)
            return SpanExportResult.FAILURE
        except Exception:  # noqa: BLE001 - the export path logs, never raises into the app
            logger.exception("otel_session exporter failed on a batch")
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._writer.force_flush(timeout_millis)

    def shutdown(self) -> None:
        """Seal every open run (as interrupted when its root span never came), then stop the writer."""
        self._sink.seal_all()
        self._writer.shutdown()
