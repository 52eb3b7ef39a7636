"""The session span processor: stamps session/run ids on every span, journals other spans of a run.

``on_start`` copies ``session.id`` (also as ``gen_ai.conversation.id``), ``otel_session.run.id``
and ``otel_session.turn.index`` from the context onto every span that does not carry them —
including spans of other instrumentors, such as the official openai-v2 instrumentor. The session
id comes from this package's scope, else W3C baggage (``session.id``), else the parent span (its
``session.id``, or the request's session header the official HTTP server instrumentations captured
on it: then the server span is stamped too), else the resource (``OTEL_RESOURCE_ATTRIBUTES``). ``on_end`` journals spans of other instrumentation that belong to a run open
in this process (normalize → redact → append); this project's own spans are skipped there, since
the API journaled their facts when they happened. With the recorder's ``span_records`` on
(``OTEL_SESSION_SPAN_RECORDS``), every span of an open run, its own included, also leaves its
``span`` record (``normalize.span_record``) as it ends; the run's root span too, which ends
after ``run_finished`` and before the run's journal closes.

The session log processor does for the GenAI message events that instrumentors emit as *log
records* what the collector does for OTLP logs: each one emitted in a span of an open run is kept
(``normalize.detached_event``) until that span ends, and journaled as one of its events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from opentelemetry import baggage, context, trace
from opentelemetry.sdk._logs import LogRecordProcessor, ReadWriteLogRecord
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from otel_session.core import semconv as sc
from otel_session.instrument._context import scope_of, span_session_id
from otel_session.instrument._log import warn_once
from otel_session.instrument.live_records import without_live_records
from otel_session.core.log import get_logger
from otel_session.normalize import SdkSpan, detached_event, normalize_span
from otel_session.normalize.genai_repeats import HeldMessages
from otel_session.normalize.span_record import span_record
from otel_session.normalize.toollink import ToolCallLinker

if TYPE_CHECKING:
    from otel_session.bundle.write import BundleWriter
    from otel_session.instrument._handles import OpenRun
    from otel_session.normalize import DetachedEvent, SpanEventData
    from otel_session.redact import Redactor

__all__ = ["ProcessedRecorder", "SessionLogProcessor", "SessionSpanProcessor"]

logger = get_logger(__name__)


class ProcessedRecorder(Protocol):
    """What the processors need of the recorder that owns them (``_runtime.Recorder`` passes itself
    in as it builds them): its state, its open runs and the GenAI log events it holds."""

    active: bool
    span_records: bool
    redactor: Redactor
    writer: BundleWriter
    resource_session_id: str | None

    def open_run(self, trace_id: int) -> OpenRun | None: ...

    def finished_recently(self, trace_id: int) -> bool: ...

    def hold_log_event(self, detached: DetachedEvent) -> None: ...

    def take_log_events(self, trace_id: int, span_id: int) -> list[SpanEventData]: ...


class SessionSpanProcessor(SpanProcessor):
    """Stamps session ids on span start; journals foreign spans of open runs on span end."""

    def __init__(self, recorder: ProcessedRecorder) -> None:
        self._recorder = recorder

    def on_start(self, span: Span, parent_context: context.Context | None = None) -> None:
        if not self._recorder.active:
            return
        try:
            scope = scope_of(parent_context)
            attributes = span.attributes or {}
            if scope is not None:
                session_id = scope.session_id
                run_id = scope.run.run_id if scope.run is not None else None
                turn_index = scope.turn.index if scope.turn is not None else None
            else:
                session_id = baggage.get_baggage(sc.BAGGAGE_SESSION_ID, parent_context)
                run_id = baggage.get_baggage(sc.BAGGAGE_RUN_ID, parent_context)
                turn_index = None
            if not session_id:
                session_id = self._inherited_session_id(parent_context) or self._recorder.resource_session_id
            stamps = {}
            if session_id:
                if sc.SESSION_ID not in attributes:
                    stamps[sc.SESSION_ID] = str(session_id)
                if sc.CONVERSATION_ID not in attributes:
                    stamps[sc.CONVERSATION_ID] = str(session_id)
            if run_id and sc.RUN_ID not in attributes:
                stamps[sc.RUN_ID] = str(run_id)
            if scope is not None and scope.run is not None and scope.run.eval_id and sc.RUN_KIND not in attributes:
                # Spans end (and reach a collector) before their run's root span: each carries the
                # run's kind, so an eval run is filed under evals/ from its first exported span.
                stamps[sc.RUN_KIND] = scope.run.kind.value
                stamps[sc.EVAL_ID] = scope.run.eval_id
            if turn_index is not None and sc.TURN_INDEX not in attributes:
                stamps[sc.TURN_INDEX] = turn_index
            if stamps:
                span.set_attributes(stamps)
        except Exception:  # noqa: BLE001 - never break span creation
            logger.debug("could not stamp session ids", exc_info=True)

    @staticmethod
    def _inherited_session_id(parent_context: context.Context | None) -> str | None:
        """The session id of the parent span, when it is one of this process's. The official HTTP
        server instrumentations set the captured request headers right *after* the server span
        starts: the server span is stamped here, as its first child starts."""
        parent = trace.get_current_span(parent_context)
        session_id = span_session_id(parent)
        if session_id and parent.is_recording() and sc.SESSION_ID not in parent.attributes:
            stamps = {sc.SESSION_ID: session_id}
            if sc.CONVERSATION_ID not in parent.attributes:
                stamps[sc.CONVERSATION_ID] = session_id
            parent.set_attributes(stamps)
        return session_id

    def on_end(self, span: ReadableSpan) -> None:
        recorder = self._recorder
        if not recorder.active:
            return
        scope = span.instrumentation_scope
        if scope is not None and scope.name == sc.SCOPE_NAME:
            recorder.take_log_events(span.context.trace_id, span.context.span_id)  # the API recorded its facts
            if recorder.span_records:
                self._journal_own(span)
            return
        handle = recorder.open_run(span.context.trace_id)
        if handle is None or not handle.open:  # not open: its run_finished is journaled, its root span ends next
            if handle is not None or recorder.finished_recently(span.context.trace_id):
                warn_once(
                    "late-span",
                    "otel_session: span %r ended after its run finished; it is exported but not in the "
                    "run's bundle (end child spans before the run; said once)",
                    span.name,
                )
            return
        if handle.journal_recorder is None:
            return
        try:
            data = SdkSpan(span)
            log_events = recorder.take_log_events(data.trace_id, data.span_id)
            if log_events:
                data = data.with_events(log_events)
            turn_index = data.attributes.get(sc.TURN_INDEX)
            normalized = normalize_span(data)
            events = without_live_records(data, normalized)  # deltas of streams went live
            if recorder.span_records:
                events.append(span_record(data, normalized))
            ToolCallLinker.of(handle).link(events)  # tool spans without a call id answer the model's call
            redacted = recorder.redactor.redact_events(events)
            if isinstance(turn_index, int):
                for event in redacted:
                    if event.turn_index is None:
                        event.turn_index = turn_index
            for event in HeldMessages.of(handle).without_repeats(redacted):  # what the API journaled already
                handle.journal_recorder.append(event.type, event.payload, **event.correlation())
        except Exception:  # noqa: BLE001
            logger.warning("could not journal span %r", span.name, exc_info=True)

    def _journal_own(self, span: ReadableSpan) -> None:
        """The ``span`` record of one of this project's spans (its other records are journaled)."""
        handle = self._recorder.open_run(span.context.trace_id)
        if handle is None or handle.journal_recorder is None:
            return
        try:
            data = SdkSpan(span)
            record = self._recorder.redactor.redact_event(span_record(data, normalize_span(data)))  # the records the API wrote
            handle.journal_recorder.append(record.type, record.payload, **record.correlation())
        except Exception:  # noqa: BLE001
            logger.warning("could not journal the span record of %r", span.name, exc_info=True)

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._recorder.writer.force_flush(timeout_millis)


class SessionLogProcessor(LogRecordProcessor):
    """Keeps GenAI message log events emitted in spans of open runs for their span's ``on_end``."""

    def __init__(self, recorder: ProcessedRecorder) -> None:
        self._recorder = recorder

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        recorder = self._recorder
        if not recorder.active:
            return
        try:
            record = log_record.log_record
            trace_id = record.trace_id or 0
            if recorder.open_run(trace_id) is None:
                return
            event = detached_event(
                trace_id,
                record.span_id or 0,
                record.event_name,
                record.timestamp or record.observed_timestamp or 0,
                dict(record.attributes or {}),
                record.body,
            )
            if event is not None:
                recorder.hold_log_event(event)
        except Exception:  # noqa: BLE001 - never break the app's logging
            logger.debug("could not keep a log event", exc_info=True)

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True
