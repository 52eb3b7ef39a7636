"""Traces no run of this process opened, recorded in process by the collector's rule (SPEC §8.3).

Contract::

    processor = unopened_traces(recorder)   # a BatchSpanProcessor; configure() adds it to the provider
    recorder.shutdown()                     # shuts it down first: its runs sealed, then the writer

A span whose trace an ``otel_session.run()`` of this process opened is journaled live by the session
span processor. Every other span a framework or instrumentor made on the same provider (Pipecat's
``setup_tracing``, LiveKit's ``set_tracer_provider``, a ``chat`` span with ``session.id``) goes,
when it ends and off the app's thread, through the collector's own assembly
(``collector.sink.BundleSink``) with the recorder's writer and redactor: a trace with a session id
is a run of that session, a trace that names none is, after the collector's hold
(``$OTEL_SESSION_HOLD_UNROUTED``), a run of a session of its own (``run.json``
``"session_derived": true``), and a run seals at the end of the batch that brought its root span.
In process and through the collector, the same spans make the same bundle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from otel_session.collector.sink import BundleSink, Overloaded
from otel_session.core.log import get_logger
from otel_session.instrument.processor import ProcessedRecorder
from otel_session.normalize import SdkSpan

__all__ = ["RECORDED_IN_PROCESS", "SinkExporter", "unopened_traces"]

logger = get_logger(__name__)

RECORDED_IN_PROCESS = "otel-session in process (spans no run opened)"
"""run.json ``recorded_by``: a collector never resumes these runs."""


class SinkExporter(SpanExporter):
    """A ``SpanExporter`` over the collector's assembly: every span whose trace ``skip`` does not
    claim goes through ``sink`` (routed, normalized, redacted, appended) as an OTLP request would;
    a run seals at the end of the batch that brought its root span (``sink``'s ``seal_after_s=0``)."""

    def __init__(self, sink: BundleSink, skip: Callable[[int], bool]) -> None:
        self._sink = sink
        self._skip = skip
        self._stopped = False
        self.spans_skipped = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            taken = [SdkSpan(span) for span in spans if not self._skip(span.context.trace_id)]
            self.spans_skipped += len(spans) - len(taken)
            if taken:
                self._sink.submit(taken)
            self._sink.seal_quiet_runs()
        except Overloaded as exc:
            logger.warning("otel_session: spans not bundled, to be exported again: %s", exc)
            return SpanExportResult.FAILURE
        except Exception:  # noqa: BLE001 - the export path logs, never raises into the app
            logger.exception("otel_session: bundling a batch of spans failed")
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Seal every run it holds (as interrupted when its root span never came). Idempotent."""
        if not self._stopped:
            self._stopped = True
            self._sink.seal_all()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._sink.writer.force_flush(timeout_millis)


def unopened_traces(recorder: ProcessedRecorder) -> BatchSpanProcessor:
    """The processor ``configure()`` adds to the tracer provider (see the module docstring)."""
    sink = BundleSink(recorder.writer, recorder.redactor, seal_after_s=0.0, recorded_by=RECORDED_IN_PROCESS)

    def opened_here(trace_id: int) -> bool:
        return recorder.open_run(trace_id) is not None or recorder.finished_recently(trace_id)

    return BatchSpanProcessor(SinkExporter(sink, opened_here))
