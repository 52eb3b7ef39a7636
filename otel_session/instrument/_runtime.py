"""The configured recorder: tracer provider, redactor, bundle writer and the open runs.

``configure()`` builds one :class:`Recorder` (idempotent); the API modules find it with
:func:`current_recorder`. Nothing here raises into the app after configuration.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opentelemetry import _logs, trace
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

from otel_session.core import config
from otel_session._version import __version__
from otel_session.instrument._log import logger, warn_once
from otel_session.instrument.processor import SessionLogProcessor, SessionSpanProcessor
from otel_session.instrument.unopened import unopened_traces
from otel_session.normalize import DetachedEvent, SpanEventData
from otel_session.redact import RedactionPolicy, Redactor
from otel_session.core.semconv import SCOPE_NAME, SESSION_ID
from otel_session.bundle.recovery import weak_atexit
from otel_session.bundle.hooks import chain_hooks
from otel_session.bundle.write import BundleWriter, WriterLimits
from otel_session.catalog import writer_hooks
from otel_session.replay.indexer import seal_indexer

if TYPE_CHECKING:
    from otel_session.instrument._handles import OpenRun

__all__ = ["ENV_SHUTDOWN_ON_SIGTERM", "Recorder", "configure", "current_recorder", "warn_once"]  # warn_once: from _log

ENV_SHUTDOWN_ON_SIGTERM = "OTEL_SESSION_SHUTDOWN_ON_SIGTERM"
_SIGTERM_DRAIN_S = 5.0
_MAX_HELD_LOG_EVENTS = 10_000

_lock = threading.Lock()
_recorder: Recorder | None = None
_auto_configure_allowed = True  # until configure() is called explicitly once
_sigterm_installed = False


class Recorder:
    """The handle ``configure()`` returns: what records runs in this process."""

    def __init__(
        self,
        *,
        bundle_dir: Path,
        redactor: Redactor,
        tracer_provider: TracerProvider,
        writer: BundleWriter,
        logger_provider: LoggerProvider | None = None,
        span_processor: Callable[[Recorder], SpanProcessor] = SessionSpanProcessor,
        log_processor: Callable[[Recorder], LogRecordProcessor] = SessionLogProcessor,
        unopened_processor: Callable[[Recorder], SpanProcessor] | None = unopened_traces,
    ) -> None:
        self.bundle_dir = bundle_dir
        self.redactor = redactor
        self.tracer_provider = tracer_provider
        self.writer = writer
        self.tracer = tracer_provider.get_tracer(SCOPE_NAME, __version__)
        self.runs: dict[int, OpenRun] = {}
        """Open runs by trace id (the span processor journals other spans of these traces); read
        it, change it through ``register_run`` / ``finish_run``."""
        self.finished_traces: deque[int] = deque(maxlen=4096)
        """Recently finished runs: a span of one that ends late is reported, not silently lost."""
        self.active = True
        self.span_records = config.flag(config.ENV_SPAN_RECORDS)
        """Whether every span of an open run leaves its ``span`` record (``OTEL_SESSION_SPAN_RECORDS``)."""
        self.processor = span_processor(self)
        tracer_provider.add_span_processor(self.processor)
        self.unopened = unopened_processor(self) if unopened_processor is not None else None
        """Records the traces no run of this process opened, as the collector would (``unopened``)."""
        if self.unopened is not None:
            tracer_provider.add_span_processor(self.unopened)
            # At exit, before the writer's own drain (atexit runs the later one first): the spans
            # the unopened processor still holds (a short script's, inside its 5 s batch delay)
            # reach the writer while it takes them.
            weak_atexit(self)
        self._log_events: dict[tuple[int, int], list[SpanEventData]] = {}
        self._log_event_count = 0
        self._log_events_lock = threading.Lock()
        self._log_processor = log_processor(self)
        self.logger_provider: LoggerProvider | None = None
        """The SDK logger provider whose GenAI log events join their spans (None: none yet)."""
        self.read_logs_of(logger_provider)
        resource = getattr(tracer_provider, "resource", None)
        resource_attributes = resource.attributes if resource is not None else {}
        self.service_name: str | None = resource_attributes.get("service.name")
        self.resource_attributes: dict[str, Any] = dict(resource_attributes)
        """The tracer provider's resource: its tags and metadata label every run (``normalize.labels``)."""
        session_id = resource_attributes.get(SESSION_ID)
        self.resource_session_id: str | None = session_id if isinstance(session_id, str) and session_id else None
        """``session.id`` of the resource (``OTEL_RESOURCE_ATTRIBUTES``): the session of every span
        and run that has none from its context."""

    def register_run(self, handle: OpenRun) -> None:
        """Record the spans of ``handle``'s trace into its bundle from now on (its bundle is open)."""
        self.runs[handle.trace_id] = handle

    def finish_run(self, handle: OpenRun) -> None:
        """``handle``'s run has finished: its trace's late spans are reported, not journaled."""
        self.runs.pop(handle.trace_id, None)
        self.finished_traces.append(handle.trace_id)

    def open_run(self, trace_id: int) -> OpenRun | None:
        """The open run of trace ``trace_id``, if it is one of this process's."""
        return self.runs.get(trace_id)

    def finished_recently(self, trace_id: int) -> bool:
        """Whether trace ``trace_id`` is a run of this process that finished recently."""
        return trace_id in self.finished_traces

    def read_logs_of(self, logger_provider: LoggerProvider | None = None) -> None:
        """Join the GenAI log events of ``logger_provider`` (default: the global one, when it is the
        SDK's) to their spans, unless a provider is read already. Runs call it as they start, so a
        global provider set after ``configure()`` is read from the next run on."""
        if self.logger_provider is not None:
            return
        provider = logger_provider if logger_provider is not None else _logs.get_logger_provider()
        if not isinstance(provider, LoggerProvider):
            return
        with self._log_events_lock:
            if self.logger_provider is None:
                provider.add_log_record_processor(self._log_processor)
                self.logger_provider = provider

    def hold_log_event(self, detached: DetachedEvent) -> None:
        """Keep a GenAI log event until its span ends (bounded: the oldest span's go first)."""
        with self._log_events_lock:
            self._log_events.setdefault((detached.trace_id, detached.span_id), []).append(detached.event)
            self._log_event_count += 1
            while self._log_event_count > _MAX_HELD_LOG_EVENTS:
                dropped = self._log_events.pop(next(iter(self._log_events)))
                self._log_event_count -= len(dropped)
                warn_once("log-events", "otel_session: GenAI log events dropped: more than %d wait for spans "
                          "that did not end (said once)", _MAX_HELD_LOG_EVENTS)

    def take_log_events(self, trace_id: int, span_id: int) -> list[SpanEventData]:
        """The GenAI log events emitted in this span (at its end; they are no longer kept)."""
        if not self._log_events:
            return []
        with self._log_events_lock:
            events = self._log_events.pop((trace_id, span_id), [])
            self._log_event_count -= len(events)
            return events

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export finished spans and write every journal record enqueued so far."""
        spans_done = self.tracer_provider.force_flush(timeout_millis)
        return self.writer.force_flush(timeout_millis) and spans_done

    def shutdown(self, timeout_millis: int = 30_000) -> None:
        """Finish open runs as interrupted, drain the writer, stop recording. Idempotent."""
        global _recorder
        with _lock:
            if not self.active:
                return
            self.active = False
            if _recorder is self:
                _recorder = None
        for handle in list(self.runs.values()):
            handle.abandon()  # finish_run() forgets it
        if self.unopened is not None:
            self.unopened.shutdown()  # its last spans exported and its runs sealed, into the writer
        self.writer.shutdown(timeout_millis)


def _sdk_logger_provider(explicit: Any) -> LoggerProvider | None:
    if explicit is not None and not isinstance(explicit, LoggerProvider):
        raise TypeError(f"logger_provider must be an SDK LoggerProvider, got {type(explicit).__name__}")
    return explicit


def _sdk_provider(explicit: Any) -> TracerProvider:
    provider = explicit if explicit is not None else trace.get_tracer_provider()
    if isinstance(provider, TracerProvider):
        return provider
    if explicit is not None:
        raise TypeError(f"tracer_provider must be an SDK TracerProvider, got {type(explicit).__name__}")
    provider = TracerProvider()
    trace.set_tracer_provider(provider)
    if trace.get_tracer_provider() is not provider:
        raise RuntimeError("a non-SDK global tracer provider is already set; pass tracer_provider=")
    logger.info("otel_session created the global SDK TracerProvider (no exporter configured)")
    return provider


def configure(
    bundle_dir: str | os.PathLike[str] | None = None,
    redaction: RedactionPolicy | None = None,
    tracer_provider: TracerProvider | None = None,
    *,
    logger_provider: LoggerProvider | None = None,
    writer_limits: WriterLimits | None = None,
    shutdown_on_sigterm: bool | None = None,
) -> Recorder:
    """Set up recording for this process and return its :class:`Recorder`. Idempotent.

    ``bundle_dir`` defaults to ``$OTEL_SESSION_DIR``, else ``./otel-session-data``; ``redaction``
    to the default policy overridden by ``OTEL_SESSION_REDACT_*``; ``tracer_provider`` to the global
    SDK provider (one is created and set globally if none exists). A second call returns the
    recorder already configured (a warning says so when its arguments differ).

    ``logger_provider`` (default: the global one, when it is an SDK ``LoggerProvider``, also when
    it is set after this call: each run looks for it as it starts) gets the session log processor,
    so GenAI message events that instrumentors emit as log records (the openai-v2 instrumentor's
    ``EVENT_ONLY`` content mode, the older conventions) reach the bundle.

    ``shutdown_on_sigterm`` (default ``$OTEL_SESSION_SHUTDOWN_ON_SIGTERM``, else off): a process
    killed by SIGTERM's default action runs no ``atexit`` hook, so its open runs would stay
    ``recording``. When on, and only while SIGTERM has its default action, a handler shuts the
    recorder down (open runs finished as interrupted, journal drained, spans flushed; at most 5 s)
    and then dies of SIGTERM as before. A handler the app installed is left alone: it leads to a
    normal exit, where ``atexit`` drains.
    """
    global _recorder, _auto_configure_allowed
    with _lock:
        _auto_configure_allowed = False
        if _recorder is not None:
            if bundle_dir is not None and Path(bundle_dir) != _recorder.bundle_dir:
                logger.warning(
                    "otel_session is already configured for %s; call shutdown() first to change it",
                    _recorder.bundle_dir,
                )
            return _recorder
        root = config.bundle_dir(bundle_dir)
        redactor = Redactor.from_env(root, redaction)
        provider = _sdk_provider(tracer_provider)
        writer = BundleWriter(root, limits=writer_limits, identifier=redactor.identifier,
                              hooks=chain_hooks(writer_hooks(root), seal_indexer(root)))
        _recorder = Recorder(
            bundle_dir=root, redactor=redactor, tracer_provider=provider, writer=writer,
            logger_provider=_sdk_logger_provider(logger_provider),
        )
        if shutdown_on_sigterm if shutdown_on_sigterm is not None else config.flag(ENV_SHUTDOWN_ON_SIGTERM):
            _install_sigterm_shutdown()
        return _recorder


def _install_sigterm_shutdown() -> None:
    """Shut the current recorder down on SIGTERM when SIGTERM would otherwise kill the process."""
    global _sigterm_installed
    if _sigterm_installed:
        return
    if threading.current_thread() is not threading.main_thread():
        logger.warning("otel_session: shutdown_on_sigterm needs configure() in the main thread; not installed")
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        logger.info("otel_session: SIGTERM already has a handler; atexit drains the recorder on exit")
        return
    signal.signal(signal.SIGTERM, _shutdown_then_die)
    _sigterm_installed = True


def _shutdown_then_die(signum: int, frame: object) -> None:
    # The handler runs between two bytecodes of the main thread, which may hold a lock the
    # shutdown needs: drain in another thread, bounded, then die of the signal as without us.
    global _sigterm_installed
    signal.signal(signum, signal.SIG_DFL)
    _sigterm_installed = False
    recorder = _recorder
    if recorder is not None:
        deadline = time.monotonic() + _SIGTERM_DRAIN_S

        def drain() -> None:
            recorder.shutdown(int(_SIGTERM_DRAIN_S * 1000))
            recorder.tracer_provider.force_flush(max(0, int((deadline - time.monotonic()) * 1000)))

        worker = threading.Thread(target=drain, name="otel-session-sigterm", daemon=True)
        worker.start()
        worker.join(max(0.0, deadline - time.monotonic()))
    os.kill(os.getpid(), signum)


def current_recorder(*, auto: bool = False) -> Recorder | None:
    """The configured recorder; with ``auto``, configure one from the environment if needed.

    Auto-configuration happens only in a process that never called ``configure()``: after an
    explicit ``shutdown()`` nothing is recorded until ``configure()`` is called again.
    """
    recorder = _recorder
    if recorder is None and auto:
        if not _auto_configure_allowed:
            warn_once("shut-down", "otel_session recording was shut down; call configure() to record again")
            return None
        try:
            recorder = configure()
        except Exception:  # noqa: BLE001 - capture failures never reach the app
            warn_once("configure", "otel_session could not configure itself; nothing is recorded", exc_info=True)
            return None
        logger.info("otel_session configured itself from the environment (bundles in %s)", recorder.bundle_dir)
    return recorder
