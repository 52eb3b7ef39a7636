"""Sessions, runs, turns, messages, slot writes, guards, verdicts and tools as spans and journal records.

Every call here does two things at once: it adds to the OpenTelemetry span (the OTLP view, subject
to the SDK's limits) and journals the same fact through the run's ``RunRecorder`` when it happens
(the lossless, live view). Values are redacted once, before either sees them. State lives in the
OpenTelemetry context (contextvars), so threads started with a copied context and asyncio tasks see
the session, run and turn they were started in. Capture failures are logged, never raised.
"""

from __future__ import annotations

import functools
import inspect
import threading
import time
import traceback
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from types import MappingProxyType
from typing import Any, TypeVar

import orjson
from opentelemetry import baggage, context, trace
from opentelemetry.sdk.trace import Event as _SdkEvent
from opentelemetry.trace import Link, Status, StatusCode

from otel_session import semconv as sc
from otel_session.instrument import reconcile
from otel_session.instrument._runtime import Recorder, current_recorder, warn_once
from otel_session.journal import EventType, RunKind, run_id_from_trace_id
from otel_session.redact import DeltaStream, Redactor
from otel_session.write import RunRecorder

__all__ = [
    "MessageHandle",
    "RunHandle",
    "ToolHandle",
    "TurnHandle",
    "current_run",
    "current_session_id",
    "guard",
    "message",
    "run",
    "session",
    "slot_write",
    "tool",
    "tool_execution",
    "transition",
    "turn",
]

F = TypeVar("F", bound=Callable[..., Any])

_SCOPE_KEY = context.create_key("otel_session.scope")
_time_ns = time.time_ns


_dumps = orjson.dumps
_NON_STR_KEYS = orjson.OPT_NON_STR_KEYS


def _json(value: Any) -> str:
    return _dumps(value, default=repr, option=_NON_STR_KEYS).decode()


def _label(value: Any) -> Any:
    """A state, name, role or source as text (Enum members by their value); None stays None."""
    if value is None or type(value) is str:
        return value
    if isinstance(value, Enum):
        value = value.value
    return str(value)


def _labels(values: Sequence[Any] | None) -> list[str]:
    return [_label(value) for value in values or ()]


def _capture_failed(what: str) -> None:
    warn_once(f"capture:{what}", "otel_session: recording %s failed; the app goes on", what, exc_info=True)


def _event_adder(span: trace.Span) -> Callable[[str, dict[str, Any], int], None]:
    """``span.add_event`` for attributes this module built itself (known types, few keys).

    The SDK's ``add_event`` re-validates every attribute into a ``BoundedAttributes``; that is most
    of its cost. For our own events the values are already valid, so the event is appended as an
    immutable mapping directly. Falls back to the public ``add_event`` when the SDK's internals
    differ or an attribute length/count limit would have to be applied.
    """
    append = getattr(span, "_add_event", None)
    limits = getattr(span, "_limits", None)
    if (
        append is None
        or limits is None
        or limits.max_attribute_length is not None
        or (limits.max_event_attributes is not None and limits.max_event_attributes < 8)
    ):
        return lambda name, attributes, timestamp: span.add_event(name, attributes, timestamp=timestamp)

    def add_event(name: str, attributes: dict[str, Any], timestamp: int) -> None:
        append(_SdkEvent(name, MappingProxyType(attributes), timestamp))

    return add_event


@dataclass(frozen=True)
class _Scope:
    """What the current context is inside of."""

    session_id: str | None = None
    run: RunHandle | None = None
    turn: TurnHandle | None = None


def _scope(ctx: context.Context | None = None) -> _Scope | None:
    return context.get_value(_SCOPE_KEY, ctx)  # type: ignore[return-value]


def current_session_id() -> str | None:
    """The session id of the current context (from ``session()`` or the ``session.id`` baggage)."""
    scope = _scope()
    if scope is not None and scope.session_id:
        return scope.session_id
    value = baggage.get_baggage(sc.BAGGAGE_SESSION_ID)
    return str(value) if value else None


def current_run() -> RunHandle | None:
    """The run of the current context, if any."""
    scope = _scope()
    return scope.run if scope is not None else None


def _current_run_for(api: str) -> tuple[RunHandle, TurnHandle | None] | None:
    scope = _scope()
    if scope is None or scope.run is None or not scope.run.open:
        warn_once(f"outside:{api}", "otel_session.%s called outside a run: nothing recorded (said once)", api)
        return None
    return scope.run, scope.turn


class _Section:
    """A context manager that is also a decorator (sync or async); each call gets a fresh section."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._init_args = (args, kwargs)

    def _fresh(self) -> _Section:
        args, kwargs = self._init_args
        return type(self)(*args, **kwargs)

    def __call__(self, function: F) -> F:
        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                with self._fresh():
                    return await function(*args, **kwargs)

            return run_async  # type: ignore[return-value]

        @functools.wraps(function)
        def run_sync(*args: Any, **kwargs: Any) -> Any:
            with self._fresh():
                return function(*args, **kwargs)

        return run_sync  # type: ignore[return-value]


# -- session ----------------------------------------------------------------------------------


class session(_Section):  # noqa: N801 - used like a function: ``with otel_session.session("call-42"):``
    """Put the code inside into session ``session_id`` (``session.id`` in context and W3C baggage)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(session_id)
        self.session_id = str(session_id)
        self._token: object | None = None

    def __enter__(self) -> session:
        ctx = context.get_current()
        previous = _scope(ctx) or _Scope()
        ctx = context.set_value(_SCOPE_KEY, _Scope(session_id=self.session_id), ctx)
        ctx = baggage.set_baggage(sc.BAGGAGE_SESSION_ID, self.session_id, ctx)
        if previous.run is not None:
            ctx = baggage.remove_baggage(sc.BAGGAGE_RUN_ID, ctx)
        self._token = context.attach(ctx)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None:
            context.detach(self._token)
            self._token = None


# -- run --------------------------------------------------------------------------------------


class RunHandle:
    """One open run: its span, ids and journal. ``journal()`` never raises."""

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
        self._recorder = recorder
        self.journal_recorder: RunRecorder | None = None
        self.open = True

    def journal(self, event_type: str, payload: dict[str, Any], at_ns: int, **correlation: Any) -> None:
        """Append one (already redacted) record to this run's bundle, if it records one."""
        recorder = self.journal_recorder
        if recorder is not None:
            recorder.append(event_type, payload, at_ns=at_ns, trace_id=self.trace_id_hex, **correlation)

    def finish(self, status: str) -> None:
        if not self.open:
            return
        self.open = False
        now = _time_ns()
        self.journal(EventType.RUN_FINISHED.value, {"status": status}, now, span_id=self.span_id_hex)
        self._recorder.runs.pop(self.trace_id, None)
        self._recorder.finished_traces.append(self.trace_id)
        if self.journal_recorder is not None:
            self.journal_recorder.close()

    def abandon(self) -> None:
        """Finish as interrupted (the recorder is shutting down with this run still open)."""
        self.finish("interrupted")


class run(_Section):  # noqa: N801
    """One run (one trace): the root span ``invoke_agent {agent}`` and the run's bundle.

    ``kind="eval"`` with ``eval_id`` records under ``evals/<eval_id>/``. Outside a session, the
    run is its own session (its session id is its run id) and a warning says so once.
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
        self.agent = _label(agent)
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

    def __enter__(self) -> RunHandle | _NoRun:
        recorder = current_recorder(auto=True)
        if recorder is None:
            return _NO_RUN
        recorder.read_logs_of()  # a global logger provider set since configure()
        ctx = context.get_current()
        session_id = self._session_id or current_session_id()
        parent_span = trace.get_current_span(ctx)
        links = [Link(parent_span.get_span_context())] if parent_span.get_span_context().is_valid else None
        name = f"invoke_agent {self.agent}" if self.agent else "invoke_agent"
        attributes: dict[str, Any] = {
            **self._attributes,
            sc.OPERATION_NAME: "invoke_agent",
            sc.RUN_KIND: self.kind.value,
        }
        if self.agent:
            attributes[sc.AGENT_NAME] = self.agent
        if self.eval_id:
            attributes[sc.EVAL_ID] = self.eval_id
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
            start_ns = getattr(span, "start_time", None) or _time_ns()
            handle.journal_recorder = recorder.writer.open_run(
                session_id=session_id,
                run_id=run_id,
                kind=self.kind,
                eval_id=self.eval_id,
                agent=self.agent,
                service=recorder.service_name,
                created_at_ns=start_ns,
            )
            recorder.runs[handle.trace_id] = handle
            payload: dict[str, Any] = {"kind": self.kind.value}
            if self.agent:
                payload["agent"] = self.agent
            if self.eval_id:
                payload["eval_id"] = self.eval_id
            handle.journal(EventType.RUN_STARTED.value, payload, start_ns, span_id=handle.span_id_hex)
        except Exception:  # noqa: BLE001 - the run goes on untraced on disk, traced in OTLP
            _capture_failed("a run's bundle")
        ctx = context.set_value(_SCOPE_KEY, _Scope(session_id=session_id, run=handle), root_ctx)
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
            _end_span(handle.span, exc, handle.redactor)
            handle.finish(_run_status(exc))
        except Exception:  # noqa: BLE001
            _capture_failed("the end of a run")


def _run_status(exc: BaseException | None) -> str:
    """``ok``; ``interrupted`` when the process is being stopped (SystemExit, KeyboardInterrupt); else ``error``."""
    if exc is None:
        return "ok"
    return "interrupted" if isinstance(exc, (SystemExit, KeyboardInterrupt)) else "error"


class _NoRun:
    """What ``run()`` yields when recording could not be configured: ids are None."""

    run_id = None
    session_id = None
    trace_id = None
    open = False


_NO_RUN = _NoRun()


def _mark_error(span: trace.Span, exc: BaseException, redactor: Redactor) -> None:
    """Like ``span.record_exception``, but the message and stack trace are redacted first."""
    error_type = type(exc).__qualname__
    span.add_event(
        "exception",
        {
            "exception.type": error_type,
            "exception.message": redactor.text(str(exc)),
            "exception.stacktrace": redactor.text("".join(traceback.format_exception(exc))),
        },
    )
    span.set_attribute(sc.ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, error_type))


def _end_span(span: trace.Span, exc: BaseException | None, redactor: Redactor) -> None:
    if exc is not None:
        _mark_error(span, exc, redactor)
    span.end()


# -- turn -------------------------------------------------------------------------------------


class TurnHandle:
    """One open turn: its span, the slot snapshot before, attributed writes and per-turn caps."""

    def __init__(
        self,
        run_handle: RunHandle,
        span: trace.Span,
        index: int,
        state: str | None,
        required_slots: Sequence[str],
        slots: Mapping[str, Any] | None,
    ) -> None:
        self.run = run_handle
        self.span = span
        self.index = index
        self.state = state
        self.required_slots = list(required_slots)
        self.slots = slots
        self.writable_slots = slots if isinstance(slots, MutableMapping) else None
        self.span_id_hex = f"{span.get_span_context().span_id:016x}"
        self.before = reconcile.snapshot(slots)
        self.writes: list[reconcile.AttributedWrite] = []
        self.guards_recorded = 0
        self.guards_truncated = 0
        self.finished = False
        self._lock = threading.Lock()
        self._add_event = _event_adder(span)
        self._journal = run_handle.journal_recorder
        self._correlation = {"turn_index": index, "trace_id": run_handle.trace_id_hex, "span_id": self.span_id_hex}

    def _event(self, name: str, attributes: dict[str, Any], event_type: str, payload: dict[str, Any]) -> None:
        now = _time_ns()
        self._add_event(name, attributes, now)
        journal = self._journal
        if journal is not None:
            journal.append(event_type, payload, at_ns=now, **self._correlation)

    def finish(
        self,
        state: str | None = None,
        *,
        required_slots: Sequence[str] | None = None,
        missing_required_slots: Sequence[str] | None = None,
        slots: Mapping[str, Any] | None = None,
        interrupted: bool = False,
    ) -> None:
        """Close the turn with the post-transition snapshot: state, required and missing slots.

        ``missing_required_slots`` is what the caller says; without it, it is read from the
        post-transition ``slots`` (given here, or the mapping passed to ``turn()``): the required
        slots that are absent or None. With neither, it is left out rather than guessed.
        """
        with self._lock:
            if self.finished:
                return
            self.finished = True
        try:
            self._finish(state, required_slots, missing_required_slots, slots, interrupted)
        except Exception:  # noqa: BLE001
            _capture_failed("the end of a turn")
        finally:
            self.span.end()

    def _finish(
        self,
        state: str | None,
        required_slots: Sequence[str] | None,
        missing: Sequence[str] | None,
        slots: Mapping[str, Any] | None,
        interrupted: bool,
    ) -> None:
        after = reconcile.snapshot(slots if slots is not None else self.slots)
        redactor = self.run.redactor
        if after is not None:
            for diff in reconcile.reconcile_slot_diff(self.before or {}, after, self.writes):
                value = redactor.slot_value(diff.slot, _plain(diff.value))
                previous = redactor.slot_value(diff.slot, _plain(diff.previous))
                self._event(
                    sc.EVENT_SLOT_DIFF,
                    {sc.SLOT_NAME: diff.slot, sc.SLOT_VALUE: _json(value), sc.SLOT_PREVIOUS: _json(previous)},
                    EventType.SLOT_DIFF.value,
                    {"slot": diff.slot, "value": value, "previous": previous},
                )
        final_state = _label(state) if state is not None else self.state
        required = _labels(required_slots) if required_slots is not None else self.required_slots
        if missing is not None:
            missing = _labels(missing)
        elif after is not None:
            missing = [slot for slot in required if after.get(slot) is None]
        payload: dict[str, Any] = {"state": final_state, "required_slots": required}
        attributes: dict[str, Any] = {sc.REQUIRED_SLOTS_AFTER: required}
        if final_state is not None:
            attributes[sc.STATE] = final_state
        if missing is not None:
            payload["missing_required_slots"] = list(missing)
            attributes[sc.MISSING_REQUIRED_SLOTS] = list(missing)
        if interrupted:
            payload["interrupted"] = True
            attributes[sc.TURN_INTERRUPTED] = True
        if self.guards_truncated:
            payload["guards_truncated"] = self.guards_truncated
            attributes[sc.GUARDS_TRUNCATED] = self.guards_truncated
        self.span.set_attributes(attributes)
        self.run.journal(
            EventType.TURN_FINISHED.value, payload, _time_ns(), turn_index=self.index, span_id=self.span_id_hex
        )


def _plain(value: Any) -> Any:
    return None if value is reconcile.MISSING or value is reconcile.UNKNOWN else value


class turn(_Section):  # noqa: N801
    """One user→agent exchange: span ``turn {index}``, ``turn_started``/``turn_finished`` records.

    ``slots`` is the live slot mapping: it is snapshotted now and at the end, and every change not
    made through :func:`slot_write` is recorded as an unattributed ``slot_diff``.
    """

    def __init__(
        self,
        index: int,
        *,
        state: str | None = None,
        required_slots: Sequence[str] = (),
        slots: Mapping[str, Any] | None = None,
        source: str | None = None,
    ) -> None:
        super().__init__(index, state=state, required_slots=required_slots, slots=slots, source=source)
        self.index = int(index)
        self.state = _label(state)
        self.required_slots = _labels(required_slots)
        self.slots = slots
        self.source = _label(source)
        self.handle: TurnHandle | None = None
        self._token: object | None = None

    def __enter__(self) -> TurnHandle | _NoTurn:
        found = _current_run_for("turn")
        if found is None:
            return _NO_TURN
        run_handle, _ = found
        try:
            recorder = run_handle._recorder
            attributes: dict[str, Any] = {sc.TURN_INDEX: self.index, sc.REQUIRED_SLOTS: self.required_slots}
            if self.state is not None:
                attributes[sc.STATE_PREVIOUS] = self.state
            if self.source is not None:
                attributes[sc.TURN_SOURCE] = self.source
            span = recorder.tracer.start_span(f"turn {self.index}", attributes=attributes)
            handle = TurnHandle(run_handle, span, self.index, self.state, self.required_slots, self.slots)
            payload: dict[str, Any] = {"state": self.state, "required_slots": self.required_slots}
            if self.source is not None:
                payload["source"] = self.source
            run_handle.journal(
                EventType.TURN_STARTED.value,
                payload,
                getattr(span, "start_time", None) or _time_ns(),
                turn_index=self.index,
                span_id=handle.span_id_hex,
            )
        except Exception:  # noqa: BLE001
            _capture_failed("a turn")
            return _NO_TURN
        self.handle = handle
        ctx = context.set_value(_SCOPE_KEY, replace(_scope() or _Scope(), turn=handle))
        self._token = context.attach(trace.set_span_in_context(span, ctx))
        return handle

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if self._token is not None:
            context.detach(self._token)
            self._token = None
        handle = self.handle
        if handle is None:
            return
        if exc is not None and not handle.finished:
            _mark_error(handle.span, exc, handle.run.redactor)
        handle.finish(interrupted=exc is not None)


class _NoTurn:
    index = None
    finished = True

    def finish(self, *args: Any, **kwargs: Any) -> None:
        return None


_NO_TURN = _NoTurn()


def _emit(
    run_handle: RunHandle,
    turn_handle: TurnHandle | None,
    name: str,
    attributes: dict[str, Any],
    event_type: str,
    payload: dict[str, Any],
) -> None:
    if turn_handle is not None and not turn_handle.finished:
        turn_handle._event(name, attributes, event_type, payload)
        return
    now = _time_ns()
    run_handle.span.add_event(name, attributes, timestamp=now)
    run_handle.journal(event_type, payload, now, span_id=run_handle.span_id_hex)


# -- slot writes, guards, verdicts ----------------------------------------------------------------


def slot_write(
    slot: str,
    value: Any,
    *,
    source: str | None = None,
    previous: Any = reconcile.UNKNOWN,
    apply: bool = True,
) -> None:
    """Record an attributed slot write (and, with ``apply``, make it in the turn's slot mapping).

    ``previous`` defaults to the value in the turn's mapping before the write.
    """
    scope = context.get_value(_SCOPE_KEY)
    run_handle = scope.run if scope is not None else None  # type: ignore[union-attr]
    if run_handle is None or not run_handle.open:
        _current_run_for("slot_write")  # says so, once
        return
    turn_handle = scope.turn  # type: ignore[union-attr]
    writable = turn_handle.writable_slots if turn_handle is not None else None
    try:
        if turn_handle is not None:
            slots = turn_handle.slots
            if previous is reconcile.UNKNOWN and slots is not None:
                previous = reconcile.copy_value(slots.get(slot, reconcile.MISSING))
            turn_handle.writes.append(reconcile.AttributedWrite(slot, reconcile.copy_value(value), previous))
        if apply and writable is not None:
            writable[slot] = value
            writable = None  # done: the except branch must not write again
        redactor = run_handle.redactor
        red_value = redactor.slot_value(slot, value)
        red_previous = (
            None if previous is reconcile.MISSING or previous is reconcile.UNKNOWN else redactor.slot_value(slot, previous)
        )
        attributes: dict[str, Any] = {
            sc.SLOT_NAME: slot,
            sc.SLOT_VALUE: _dumps(red_value, default=repr, option=_NON_STR_KEYS).decode(),
            sc.SLOT_PREVIOUS: _dumps(red_previous, default=repr, option=_NON_STR_KEYS).decode(),
        }
        payload: dict[str, Any] = {"slot": slot, "value": red_value, "previous": red_previous, "source": source}
        if source is not None:
            attributes[sc.SLOT_SOURCE] = payload["source"] = _label(source)
        if turn_handle is not None and not turn_handle.finished:
            turn_handle._event(sc.EVENT_SLOT_WRITE, attributes, "slot_write", payload)
        else:
            _emit(run_handle, None, sc.EVENT_SLOT_WRITE, attributes, EventType.SLOT_WRITE.value, payload)
    except Exception:  # noqa: BLE001
        if apply and writable is not None:
            writable[slot] = value  # the app's write still happens
        _capture_failed("a slot write")


def guard(name: str, passed: bool, *, state: str | None = None) -> None:
    """Record a guard checked before a transition (at most 24 per turn; the rest are counted)."""
    found = _current_run_for("guard")
    if found is None:
        return
    run_handle, turn_handle = found
    try:
        if turn_handle is not None:
            with turn_handle._lock:
                if turn_handle.guards_recorded >= sc.CAP_PER_TURN:
                    turn_handle.guards_truncated += 1
                    return
                turn_handle.guards_recorded += 1
        name = _label(name)
        attributes: dict[str, Any] = {sc.GUARD_NAME: name, sc.GUARD_PASSED: bool(passed)}
        payload: dict[str, Any] = {"name": name, "passed": bool(passed)}
        if state is not None:
            attributes[sc.GUARD_STATE] = payload["state"] = _label(state)
        _emit(run_handle, turn_handle, sc.EVENT_GUARD, attributes, EventType.GUARD_EVALUATED.value, payload)
    except Exception:  # noqa: BLE001
        _capture_failed("a guard")


def transition(
    from_state: str | None,
    to_state: str | None,
    *,
    reason: str | None = None,
    candidates: Sequence[Any] | None = None,
) -> None:
    """Record the transition verdict: from, to, why, and the candidates considered (at most 24)."""
    found = _current_run_for("transition")
    if found is None:
        return
    run_handle, turn_handle = found
    try:
        redactor = run_handle.redactor
        listed = list(candidates or ())
        kept = redactor.free_leaves(listed[: sc.CAP_PER_TURN])
        truncated = len(listed) - len(kept)
        red_reason = redactor.text(reason) if reason is not None else None
        from_state, to_state = _label(from_state), _label(to_state)
        payload: dict[str, Any] = {"from": from_state, "to": to_state, "reason": red_reason, "candidates": kept}
        attributes: dict[str, Any] = {sc.TRANSITION_CANDIDATES: _json(kept)}
        for key, value in ((sc.TRANSITION_FROM, from_state), (sc.TRANSITION_TO, to_state), (sc.TRANSITION_REASON, red_reason)):
            if value is not None:
                attributes[key] = value
        if truncated:
            payload["candidates_truncated"] = truncated
            attributes[sc.TRANSITION_CANDIDATES_TRUNCATED] = truncated
        _emit(
            run_handle, turn_handle, sc.EVENT_TRANSITION_VERDICT, attributes, EventType.TRANSITION_VERDICT.value, payload
        )
    except Exception:  # noqa: BLE001
        _capture_failed("a transition verdict")


# -- messages ---------------------------------------------------------------------------------


class MessageHandle:
    """One message: ``text()`` for a whole utterance, ``delta()`` per streamed chunk."""

    def __init__(self, run_handle: RunHandle, turn_index: int | None, span: trace.Span, role: str, message_id: str) -> None:
        self.run = run_handle
        self.turn_index = turn_index
        self.span = span
        self.role = role
        self.message_id = message_id
        self.span_id_hex = f"{span.get_span_context().span_id:016x}"
        self.finished = False
        self.delta_count = 0
        self._blocks: dict[int, tuple[str, list[str]]] = {}
        self._streams: dict[int, DeltaStream] = {}
        """Per content block: the redacting stream its deltas pass through (PII split across
        deltas is held back until it is whole)."""
        self._add_event = _event_adder(span)
        self._journal = run_handle.journal_recorder
        self._correlation = {
            "turn_index": turn_index,
            "message_id": message_id,
            "trace_id": run_handle.trace_id_hex,
            "span_id": self.span_id_hex,
        }

    def text(self, text: str, *, index: int = 0, kind: str = "text") -> None:
        """Set the whole text of content block ``index`` (a message that does not stream)."""
        if self.finished:
            warn_once("message-finished", "otel_session: text()/delta() on a finished message is ignored")
            return
        self._blocks[index] = (kind, [str(text)])

    def delta(self, chunk: str, *, kind: str = "text", index: int = 0) -> None:
        """Record one streamed chunk of content block ``index`` (``text``, ``thinking``, ``tool_call``)."""
        if self.finished:
            warn_once("message-finished", "otel_session: text()/delta() on a finished message is ignored")
            return
        try:
            now = _time_ns()
            if type(chunk) is not str or type(kind) is not str or type(index) is not int:
                chunk, kind, index = str(chunk), _label(kind), int(index)
            block = self._blocks.get(index)
            if block is None:
                block = self._blocks[index] = (kind, [])
            block[1].append(chunk)
            stream = self._streams.get(index)
            if stream is None:
                stream = self._streams[index] = self.run.redactor.delta_stream()
            self.delta_count += 1
            for at_ns, redacted in stream.feed(chunk, now):  # records held until a token ends
                self._record_delta(index, kind, redacted, at_ns)
        except Exception:  # noqa: BLE001
            _capture_failed("a delta")

    def _record_delta(self, index: int, kind: str, redacted: str, at_ns: int) -> None:
        self._add_event(sc.EVENT_DELTA, {sc.DELTA_INDEX: index, sc.DELTA_KIND: kind, sc.DELTA_TEXT: redacted}, at_ns)
        journal = self._journal
        if journal is not None:
            journal.append(
                "assistant_delta", {"index": index, "kind": kind, "delta": redacted}, at_ns=at_ns, **self._correlation
            )

    def _release_held_text(self) -> None:
        """At the end of the message: each block's held-back deltas, each with its own timestamp."""
        for index, stream in sorted(self._streams.items()):
            for at_ns, redacted in stream.flush():
                self._record_delta(index, self._blocks[index][0], redacted, at_ns)

    def finish(self, *, stop_reason: str | None = None, settled: bool = True) -> None:
        """Seal the message: its final content (the whole text of each block, redacted)."""
        if self.finished:
            return
        self.finished = True
        try:
            self._release_held_text()
            redactor = self.run.redactor
            content = [
                {"index": index, "kind": kind, "text": redactor.text("".join(parts))}
                for index, (kind, parts) in sorted(self._blocks.items())
            ]
            payload: dict[str, Any] = {"settled": settled, "content": content}
            attributes: dict[str, Any] = {
                sc.MESSAGE_CONTENT: _json(content),
                sc.MESSAGE_SETTLED: settled,
                sc.DELTA_COUNT: self.delta_count,
            }
            if stop_reason is not None:
                payload["stop_reason"] = stop_reason
                attributes[sc.MESSAGE_STOP_REASON] = stop_reason
            self.span.set_attributes(attributes)
            if self._journal is not None:
                self._journal.append(EventType.MESSAGE_FINISHED.value, payload, at_ns=_time_ns(), **self._correlation)
        except Exception:  # noqa: BLE001
            _capture_failed("the end of a message")
        finally:
            self.span.end()


class _NoMessage:
    message_id = None

    def text(self, *args: Any, **kwargs: Any) -> None:
        return None

    def delta(self, *args: Any, **kwargs: Any) -> None:
        return None

    def finish(self, *args: Any, **kwargs: Any) -> None:
        return None


_NO_MESSAGE = _NoMessage()


class message(_Section):  # noqa: N801
    """One message by ``role`` (span ``message {role}``): ``message_started`` … ``message_finished``."""

    def __init__(self, role: str, *, message_id: str | None = None) -> None:
        super().__init__(role, message_id=message_id)
        self.role = _label(role)
        self.message_id = message_id
        self.handle: MessageHandle | None = None
        self._token: object | None = None

    def __enter__(self) -> MessageHandle | _NoMessage:
        found = _current_run_for("message")
        if found is None:
            return _NO_MESSAGE
        run_handle, turn_handle = found
        try:
            turn_index = turn_handle.index if turn_handle is not None else None
            attributes: dict[str, Any] = {sc.MESSAGE_ROLE: self.role}
            if turn_index is not None:
                attributes[sc.TURN_INDEX] = turn_index
            span = run_handle._recorder.tracer.start_span(f"message {self.role}", attributes=attributes)
            message_id = self.message_id or f"msg-{span.get_span_context().span_id:016x}"
            span.set_attribute(sc.MESSAGE_ID, message_id)
            handle = MessageHandle(run_handle, turn_index, span, self.role, message_id)
            if handle._journal is not None:
                handle._journal.append(
                    EventType.MESSAGE_STARTED.value,
                    {"role": self.role},
                    at_ns=getattr(span, "start_time", None) or _time_ns(),
                    **handle._correlation,
                )
        except Exception:  # noqa: BLE001
            _capture_failed("a message")
            return _NO_MESSAGE
        self.handle = handle
        self._token = context.attach(trace.set_span_in_context(span))
        return handle

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if self._token is not None:
            context.detach(self._token)
            self._token = None
        handle = self.handle
        if handle is None:
            return
        if exc is not None and not handle.finished:
            _mark_error(handle.span, exc, handle.run.redactor)
        handle.finish(settled=exc is None)


# -- tools ------------------------------------------------------------------------------------


class ToolHandle:
    """One tool execution: ``update()`` for progress, ``finish(result=…)`` or ``finish(error=…)``."""

    def __init__(self, run_handle: RunHandle, turn_index: int | None, span: trace.Span, name: str, call_id: str) -> None:
        self.run = run_handle
        self.span = span
        self.name = name
        self.call_id = call_id
        self.finished = False
        self.updates = 0
        self._correlation = {
            "turn_index": turn_index,
            "tool_call_id": call_id,
            "span_id": f"{span.get_span_context().span_id:016x}",
        }

    def _journal(self, event_type: str, payload: dict[str, Any], at_ns: int) -> None:
        self.run.journal(event_type, payload, at_ns, **self._correlation)

    def update(self, detail: str | None = None) -> None:
        """Record a progress tick (``detail`` is free text, redacted)."""
        if self.finished:
            return
        try:
            now = _time_ns()
            self.updates += 1
            payload: dict[str, Any] = {}
            attributes: dict[str, Any] = {}
            if detail is not None:
                payload["detail"] = attributes[sc.TOOL_UPDATE_DETAIL] = self.run.redactor.text(detail)
            self.span.add_event(sc.EVENT_TOOL_UPDATE, attributes, timestamp=now)
            self._journal(EventType.TOOL_EXECUTION_UPDATED.value, payload, now)
        except Exception:  # noqa: BLE001
            _capture_failed("a tool update")

    def finish(self, result: Any = None, *, error: BaseException | str | None = None) -> None:
        """Close the execution with its result (status ok) or its error (status error)."""
        if self.finished:
            return
        self.finished = True
        try:
            redactor = self.run.redactor
            if error is None:
                red_result = redactor.tool_result(result)
                payload: dict[str, Any] = {"status": "ok", "result": red_result}
                self.span.set_attributes({sc.TOOL_STATUS: "ok", sc.TOOL_CALL_RESULT: _json(red_result)})
            else:
                error_type = type(error).__qualname__ if isinstance(error, BaseException) else "ToolError"
                text = f"{error_type}: {error}" if isinstance(error, BaseException) else str(error)
                red_error = redactor.text(text)
                payload = {"status": "error", "error": red_error}
                self.span.set_attributes({sc.TOOL_STATUS: "error", sc.TOOL_ERROR: red_error, sc.ERROR_TYPE: error_type})
                self.span.set_status(Status(StatusCode.ERROR, error_type))
            self._journal(EventType.TOOL_EXECUTION_FINISHED.value, payload, _time_ns())
        except Exception:  # noqa: BLE001
            _capture_failed("the end of a tool execution")
        finally:
            self.span.end()


class _NoTool:
    call_id = None

    def update(self, *args: Any, **kwargs: Any) -> None:
        return None

    def finish(self, *args: Any, **kwargs: Any) -> None:
        return None


_NO_TOOL = _NoTool()


class tool_execution(_Section):  # noqa: N801
    """One tool call (span ``execute_tool {name}``); an exception inside finishes it as an error."""

    def __init__(self, name: str, *, call_id: str | None = None, arguments: Any = None) -> None:
        super().__init__(name, call_id=call_id, arguments=arguments)
        self.name = _label(name)
        self.call_id = call_id
        self.arguments = arguments
        self.handle: ToolHandle | None = None
        self._token: object | None = None

    def __enter__(self) -> ToolHandle | _NoTool:
        found = _current_run_for("tool_execution")
        if found is None:
            return _NO_TOOL
        run_handle, turn_handle = found
        try:
            turn_index = turn_handle.index if turn_handle is not None else None
            arguments = run_handle.redactor.tool_arguments(self.arguments)
            attributes: dict[str, Any] = {
                sc.OPERATION_NAME: "execute_tool",
                sc.TOOL_NAME: self.name,
                sc.TOOL_CALL_ARGUMENTS: _json(arguments),
            }
            if turn_index is not None:
                attributes[sc.TURN_INDEX] = turn_index
            span = run_handle._recorder.tracer.start_span(f"execute_tool {self.name}", attributes=attributes)
            call_id = self.call_id or f"call-{span.get_span_context().span_id:016x}"
            span.set_attribute(sc.TOOL_CALL_ID, call_id)
            handle = ToolHandle(run_handle, turn_index, span, self.name, call_id)
            handle._journal(
                EventType.TOOL_EXECUTION_STARTED.value,
                {"name": self.name, "arguments": arguments},
                getattr(span, "start_time", None) or _time_ns(),
            )
        except Exception:  # noqa: BLE001
            _capture_failed("a tool execution")
            return _NO_TOOL
        self.handle = handle
        self._token = context.attach(trace.set_span_in_context(span))
        return handle

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if self._token is not None:
            context.detach(self._token)
            self._token = None
        handle = self.handle
        if handle is None:
            return
        if exc is not None and not handle.finished:
            _mark_error(handle.span, exc, handle.run.redactor)
            handle.finish(error=exc)
        else:
            handle.finish()


def tool(name: str | None = None) -> Callable[[F], F]:
    """Decorate a tool function: its bound arguments, its return value or exception are recorded."""

    def decorate(function: F) -> F:
        tool_name = name or function.__name__
        signature = inspect.signature(function)

        def arguments_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            try:
                bound = signature.bind(*args, **kwargs)
                bound.apply_defaults()
                return dict(bound.arguments)
            except TypeError:
                return {"args": list(args), "kwargs": kwargs}

        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def call_async(*args: Any, **kwargs: Any) -> Any:
                with tool_execution(tool_name, arguments=arguments_of(args, kwargs)) as handle:
                    result = await function(*args, **kwargs)
                    handle.finish(result)
                    return result

            return call_async  # type: ignore[return-value]

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            with tool_execution(tool_name, arguments=arguments_of(args, kwargs)) as handle:
                result = function(*args, **kwargs)
                handle.finish(result)
                return result

        return call  # type: ignore[return-value]

    return decorate

