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
``spans_without_session`` at shutdown, or once held ``hold_unrouted_s``), nor are spans that this
process already records with ``configure()`` / the instrumentor, which records every trace (counted
in ``spans_recorded_in_process``), so enabling both never writes a run twice. At shutdown, runs whose
root span never came are sealed as interrupted.
"""

from __future__ import annotations

import os


from otel_session.core import config
from otel_session.collector.sink import BundleSink
from otel_session.instrument._runtime import current_recorder
from otel_session.instrument.unopened import SinkExporter
from otel_session.core.log import get_logger
from otel_session.redact import RedactionPolicy, Redactor, load_or_create_key
from otel_session.bundle.hooks import chain_hooks
from otel_session.bundle.write import BundleWriter, WriterLimits
from otel_session.catalog import writer_hooks
from otel_session.replay.indexer import seal_indexer

__all__ = ["RECORDED_BY", "SessionBundleExporter"]

logger = get_logger(__name__)

RECORDED_BY = "otel-session span exporter"
"""run.json ``recorded_by``: a collector never resumes these runs."""


def _recorded_in_process(trace_id: int) -> bool:
    """True when this process's recorder (configure()/the instrumentor) records that trace already:
    a run it opened, or (with its recording of traces no run opened, ``unopened``) any trace."""
    recorder = current_recorder()
    return recorder is not None and (recorder.unopened is not None or trace_id in recorder.runs
                                     or trace_id in recorder.finished_traces)


class SessionBundleExporter(SinkExporter):
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
        self._writer = BundleWriter(root, limits=writer_limits, identifier=redactor.identifier,
                                    hooks=chain_hooks(writer_hooks(root), seal_indexer(root)))
        super().__init__(BundleSink(self._writer, redactor, seal_after_s=0.0, recorded_by=RECORDED_BY,
                                    derive_sessions=False), _recorded_in_process)

    @property
    def spans_recorded_in_process(self) -> int:
        return self.spans_skipped

    @property
    def spans_without_session(self) -> int:
        return self._sink.counters.snapshot()["no_session"]

    @property
    def runs_written(self) -> int:
        return self._sink.counters.snapshot()["runs_sealed"]

    def shutdown(self) -> None:
        """Seal every open run (as interrupted when its root span never came), then stop the writer."""
        super().shutdown()
        self._writer.shutdown()
