"""A run: one trace, its root span ``invoke_agent {agent}`` and its bundle.

Contract::

    with run(agent="booking", kind="live" | "eval", eval_id=None) as handle:   # a Section
        handle.run_id, handle.session_id
    handle.event(type, raw_payload, span_id, turn_index, ...) -> JournalEvent  # now, redacted once
    handle.emit(type, raw_payload)            # a record as a span event on the run's span, and journaled
    events = SpanEvents(handle, span, span_id_hex, turn_index)   # the same on another span (a turn's)
    events.emit(type, raw_payload)
    handle.start_span(name, started, attrs)   # a child span opening with record ``started``
    handle.append(event)                      # journal a redacted record (never raises)

The recorder registers the run when its bundle opens and forgets it when it finishes
(``Recorder.register_run`` / ``finish_run``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from opentelemetry import baggage, context, trace
from opentelemetry.trace import Link

from otel_session.core import semconv as sc
from otel_session.instrument import _clock, _runtime
from otel_session.instrument._context import SCOPE_KEY, Scope, current_session_id, open_run_for
from otel_session.instrument._log import capture_failed, warn_once
from otel_session.instrument._section import Nothing, Section, label
from otel_session.instrument._spans import event_adder, mark_error, span_attributes
from otel_session.core.journal import EventType, RunKind, run_id_from_trace_id
from otel_session.normalize import JournalEvent
from otel_session.normalize.codec import EVENT_NAMES, encode
from otel_session.normalize.labels import run_labels, span_scores

if TYPE_CHECKING:
    from otel_session.instrument._handles import OpenRun, OpenTurn
    from otel_session.instrument._runtime import Recorder
    from otel_session.bundle.recorder import RecordHead
    from otel_session.bundle.write import RunRecorder

__all__ = ["ChildSection", "RunHandle", "SpanEvents", "run"]

_NO_RUN = Nothing(run_id=None, session_id=None, trace_id=None, open=False)
"""What ``run()`` yields when recording could not be configured: ids are None."""

_E = {member: member.value for member in EventType}  # an enum member's ``.value`` is a descriptor call


class RunHandle:
    """One open run: its span, ids and journal. Nothing here raises into the app."""

    def __init__(
        self,
        recorder: Recorder,
        span: trace.Span,
        session_id: str,
        kind: RunKind,
        eval_id: str | None,
        agent: str | None,
    ) -> None:
        span_context = span.get_span_context()
        self.span = span
        self.trace_id = span_context.trace_id
        self.run_id = run_id_from_trace_id(self.trace_id)
        self.session_id = session_id
        self.kind = kind
        self.eval_id = eval_id
        self.agent = agent
        self.trace_id_hex = f"{self.trace_id:032x}"
        self.span_id_hex = f"{span_context.span_id:016x}"
        self.redactor = recorder.redactor
        self._redact_payload = recorder.redactor.redact_payload
        self._recorder = recorder
        self.journal_recorder: RunRecorder | None = None
        self.open = True
        self._closed = False
        self._events = SpanEvents(self, span, self.span_id_hex, None)

    def append(self, event: JournalEvent) -> None:
        """Append one (already redacted) record to this run's bundle, if it records one."""
        recorder = self.journal_recorder
        if recorder is not None:
            recorder.append_events((event,))

    def event(
        self,
        event_type: str,
        payload: dict[str, Any],
        span_id: str | None = None,
        turn_index: int | None = None,
        message_id: str | None = None,
        tool_call_id: str | None = None,
    ) -> JournalEvent:
        """A record of this run, now, its raw ``payload`` redacted once (``span_id``: the run's span)."""
        return JournalEvent(
            event_type,
            _clock.now_ns(),
            self._redact_payload(event_type, payload),
            turn_index,
            message_id,
            tool_call_id,
            self.trace_id_hex,
            span_id or self.span_id_hex,
        )

    def emit(self, event_type: str, payload: dict[str, Any]) -> None:
        """A record on the run's span (a span event) and in its journal."""
        self._events.emit(event_type, payload)

    def start_span(self, name: str, started: JournalEvent, attributes: dict[str, Any]) -> trace.Span:
        """A child span that opens with the (redacted) record ``started``: its fields become the span's
        start attributes, beside ``attributes``; the record gets the span's start time and id."""
        attributes = {**attributes, **encode(started.type, started.payload)}
        span = self._recorder.tracer.start_span(name, attributes=attributes)
        started.at_ns = getattr(span, "start_time", None) or started.at_ns
        started.span_id = f"{span.get_span_context().span_id:016x}"
        return span

    def finish(self, status: str) -> None:
        """Journal ``run_finished`` (and say the status on the span); the span is the caller's to
        end, then ``close``'s (its ``span`` record is journaled as it ends)."""
        if not self.open:
            return
        self.open = False
        event = self.event(_E[EventType.RUN_FINISHED], {"status": status, **span_scores(span_attributes(self.span))})
        self.span.set_attributes(encode(event.type, event.payload))
        self.append(event)

    def close(self) -> None:
        """Stop recording the run: its journal closes, later spans of its trace are reported late."""
        if self._closed:
            return
        self._closed = True
        self._recorder.finish_run(self)
        if self.journal_recorder is not None:
            self.journal_recorder.close()

    def abandon(self) -> None:
        """Finish as interrupted and close (the recorder is shutting down with this run still open)."""
        self.finish("interrupted")
        self.close()


class SpanEvents:
    """Records that travel as events of one span (the run's, a turn's) and are journaled: each
    record type's shared fields (type, turn, trace and span ids) are encoded once, on first use."""

    def __init__(self, run_handle: OpenRun, span: trace.Span, span_id_hex: str, turn_index: int | None) -> None:
        self._run = run_handle
        self._redact_payload = run_handle.redactor.redact_payload
        self._add_event = event_adder(span)
        self._span_id = span_id_hex
        self._turn_index = turn_index
        self._heads: dict[str, RecordHead] = {}

    def emit(self, event_type: str, payload: dict[str, Any]) -> None:
        """One record, now: redacted once, added to the span as an event and journaled."""
        run_handle = self._run
        at_ns = _clock.now_ns()
        redacted = self._redact_payload(event_type, payload)
        self._add_event(EVENT_NAMES[event_type], encode(event_type, redacted), at_ns)  # type: ignore[arg-type]
        journal = run_handle.journal_recorder
        if journal is not None:
            head = self._heads.get(event_type)
            if head is None:
                head = self._heads[event_type] = journal.head(
                    event_type, turn_index=self._turn_index, trace_id=run_handle.trace_id_hex, span_id=self._span_id
                )
            journal.append_to(head, redacted, at_ns)


class run(Section):  # noqa: N801
    """One run (one trace): the root span ``invoke_agent {agent}`` and the run's bundle.

    ``kind="eval"`` with ``eval_id`` records under ``evals/<eval_id>/``. The session is
    ``session_id``, else the context's (``current_session_id``), else the resource's ``session.id``;
    with none, the run is its own session (its session id is its run id), said once.
    """

    def __init__(
        self,
        agent: str | None = None,
        *,
        kind: RunKind | str = RunKind.LIVE,
        eval_id: str | None = None,
        session_id: str | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(agent, kind=kind, eval_id=eval_id, session_id=session_id, attributes=attributes)
        self.agent = label(agent)
        self.kind = RunKind(kind)
        if self.kind is RunKind.EVAL and not eval_id:
            raise ValueError("an eval run needs an eval_id")
        self.eval_id = eval_id
        self._session_id = session_id
        self._attributes = dict(attributes or {})
        self.handle: RunHandle | None = None
        self._token: object | None = None

    @property
    def run_id(self) -> str | None:
        return self.handle.run_id if self.handle is not None else None

    def __enter__(self) -> RunHandle | Nothing:
        recorder = _runtime.current_recorder(auto=True)
        if recorder is None:
            return _NO_RUN
        recorder.read_logs_of()  # a global logger provider set since configure()
        ctx = context.get_current()
        session_id = self._session_id or current_session_id() or recorder.resource_session_id
        parent_span = trace.get_current_span(ctx)
        links = [Link(parent_span.get_span_context())] if parent_span.get_span_context().is_valid else None
        payload: dict[str, Any] = {"kind": self.kind.value}
        if self.agent:
            payload["agent"] = self.agent
        if self.eval_id:
            payload["eval_id"] = self.eval_id
        payload.update(run_labels(self._attributes, recorder.resource_attributes))  # tags, metadata
        started = recorder.redactor.redact_event(JournalEvent(_E[EventType.RUN_STARTED], 0, payload))
        agent = started.payload.get("agent")  # redacted, like every name this span carries
        name = f"invoke_agent {agent}" if agent else "invoke_agent"
        attributes = {**self._attributes, sc.OPERATION_NAME: "invoke_agent", **encode(started.type, started.payload)}
        root_ctx = trace.set_span_in_context(trace.INVALID_SPAN, ctx)  # the run span is a trace root
        span = recorder.tracer.start_span(name, context=root_ctx, attributes=attributes, links=links)
        run_id = run_id_from_trace_id(span.get_span_context().trace_id)
        if not session_id:
            session_id = run_id
            warn_once("run-without-session", "otel_session.run() outside a session: each such run is its own session")
        span.set_attributes({sc.SESSION_ID: session_id, sc.CONVERSATION_ID: session_id, sc.RUN_ID: run_id})
        handle = RunHandle(recorder, span, session_id, self.kind, self.eval_id, self.agent)
        self.handle = handle
        try:
            start_ns = getattr(span, "start_time", None) or _clock.now_ns()
            handle.journal_recorder = recorder.writer.open_run(
                session_id=session_id,
                run_id=run_id,
                kind=self.kind,
                eval_id=self.eval_id,
                agent=self.agent,
                service=recorder.service_name,
                created_at_ns=start_ns,
            )
            recorder.register_run(handle)
            started.at_ns, started.trace_id, started.span_id = start_ns, handle.trace_id_hex, handle.span_id_hex
            handle.append(started)
        except Exception:  # noqa: BLE001 - the run goes on untraced on disk, traced in OTLP
            capture_failed("a run's bundle")
        ctx = context.set_value(SCOPE_KEY, Scope(session_id=session_id, run=handle), root_ctx)
        ctx = baggage.set_baggage(sc.BAGGAGE_SESSION_ID, session_id, ctx)
        ctx = baggage.set_baggage(sc.BAGGAGE_RUN_ID, run_id, ctx)
        self._token = context.attach(trace.set_span_in_context(span, ctx))
        return handle

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        handle = self.handle
        if self._token is not None:
            context.detach(self._token)
            self._token = None
        if handle is None:
            return
        try:
            if exc is not None:
                mark_error(handle.span, exc, handle.redactor)
            handle.finish(_run_status(exc))
        except Exception:  # noqa: BLE001
            capture_failed("the end of a run")
        finally:
            handle.span.end()
            try:
                handle.close()
            except Exception:  # noqa: BLE001
                capture_failed("the end of a run")


class ChildSection(Section):
    """A section inside the open run that opens a child span (a turn, a message, a tool execution).

    Subclasses say how their handle opens (``_open``) and closes (``_close``); an exception inside
    marks the span as an error (redacted) before it closes. Outside an open run, or when recording
    fails, the section yields ``null`` and records nothing.
    """

    api: ClassVar[str]
    """The API's name, in the warning said once outside a run."""
    what: ClassVar[str]
    """What failed to record, in the capture failure warning."""
    null: ClassVar[Any]
    handle: Any = None
    _token: object | None = None

    def _open(self, run_handle: OpenRun, turn_handle: OpenTurn | None) -> Any:
        raise NotImplementedError

    def _close(self, handle: Any, exc: BaseException | None) -> None:
        raise NotImplementedError

    def _context(self, handle: Any) -> context.Context:
        """The context the section's body runs in: its span current."""
        return trace.set_span_in_context(handle.span)

    def __enter__(self) -> Any:
        found = open_run_for(self.api)
        if found is None:
            return self.null
        try:
            handle = self._open(*found)
        except Exception:  # noqa: BLE001
            capture_failed(self.what)
            return self.null
        self.handle = handle
        self._token = context.attach(self._context(handle))
        return handle

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if self._token is not None:
            context.detach(self._token)
            self._token = None
        handle = self.handle
        if handle is None:
            return
        if exc is not None and not handle.finished:
            mark_error(handle.span, exc, handle.run.redactor)
        self._close(handle, exc)


def _run_status(exc: BaseException | None) -> str:
    """``ok``; ``interrupted`` when the process is being stopped (SystemExit, KeyboardInterrupt); else ``error``."""
    if exc is None:
        return "ok"
    return "interrupted" if isinstance(exc, (SystemExit, KeyboardInterrupt)) else "error"


