"""A turn (one user→agent exchange) and what happens in it: slot writes, guards, transition verdicts.

Contract::

    with turn(0, state="ask_date", required_slots=["date"], slots=slots) as handle:   # a Section
        slot_write("date", "Friday", source="nlu")     # attributed; applied to ``slots``
        guard("has_date", True, state="ask_date")      # at most 24 per turn, the rest counted
        transition("ask_date", "confirm", reason="…", candidates=[…])
        handle.finish(state="confirm")                 # post-transition snapshot; unattributed slot_diffs

Each is a record on the open turn's span (else the run's) and in the journal, redacted once.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from opentelemetry import context, trace

from otel_session.core import semconv as sc
from otel_session.instrument import reconcile
from otel_session.instrument._context import SCOPE_KEY, Scope, open_run_for, scope_of
from otel_session.instrument._log import capture_failed
from otel_session.instrument._run import ChildSection, SpanEvents
from otel_session.instrument._section import Nothing, label, labels
from otel_session.core.journal import EventType
from otel_session.normalize.codec import encode
from otel_session.normalize.labels import span_scores
from otel_session.instrument._spans import span_attributes

if TYPE_CHECKING:
    from otel_session.instrument._handles import OpenRun, OpenTurn

__all__ = ["TurnHandle", "guard", "slot_write", "transition", "turn"]

_E = {member: member.value for member in EventType}  # an enum member's ``.value`` is a descriptor call


class TurnHandle:
    """One open turn: its span, the slot snapshot before, attributed writes and per-turn caps."""

    def __init__(
        self,
        run_handle: OpenRun,
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
        self.emit = SpanEvents(run_handle, span, self.span_id_hex, index).emit
        """``emit(type, raw_payload)``: a record of this turn, now: redacted once, on the turn's span
        (an event) and journaled."""

    def admit_guard(self) -> bool:
        """Whether one more guard is recorded in this turn: at most 24, the rest are counted."""
        with self._lock:
            if self.guards_recorded >= sc.CAP_PER_TURN:
                self.guards_truncated += 1
                return False
            self.guards_recorded += 1
            return True

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
            capture_failed("the end of a turn")
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
        if after is not None:
            for diff in reconcile.reconcile_slot_diff(self.before or {}, after, self.writes):
                self.emit(
                    _E[EventType.SLOT_DIFF],
                    {"slot": diff.slot, "value": _plain(diff.value), "previous": _plain(diff.previous)},
                )
        final_state = label(state) if state is not None else self.state
        required = labels(required_slots) if required_slots is not None else self.required_slots
        if missing is not None:
            missing = labels(missing)
        elif after is not None:
            missing = [slot for slot in required if after.get(slot) is None]
        payload: dict[str, Any] = {"state": final_state, "required_slots": required}
        if missing is not None:
            payload["missing_required_slots"] = list(missing)
        if interrupted:
            payload["interrupted"] = True
        if self.guards_truncated:
            payload["guards_truncated"] = self.guards_truncated
        payload.update(span_scores(span_attributes(self.span)))  # otel_session.score.<name> the app set
        event = self.run.event(_E[EventType.TURN_FINISHED], payload, span_id=self.span_id_hex, turn_index=self.index)
        self.span.set_attributes(encode(event.type, event.payload))
        self.run.append(event)


def _plain(value: Any) -> Any:
    return None if value is reconcile.MISSING or value is reconcile.UNKNOWN else value


_SLOT_WRITE = _E[EventType.SLOT_WRITE]


_NO_TURN = Nothing(("finish",), index=None, finished=True)


class turn(ChildSection):  # noqa: N801
    """One user→agent exchange: span ``turn {index}``, ``turn_started``/``turn_finished`` records.

    ``slots`` is the live slot mapping: it is snapshotted now and at the end, and every change not
    made through :func:`slot_write` is recorded as an unattributed ``slot_diff``.
    """

    api, what, null = "turn", "a turn", _NO_TURN

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
        self.state = label(state)
        self.required_slots = labels(required_slots)
        self.slots = slots
        self.source = label(source)

    def _open(self, run_handle: OpenRun, turn_handle: OpenTurn | None) -> TurnHandle:
        payload: dict[str, Any] = {"state": self.state, "required_slots": self.required_slots}
        if self.source is not None:
            payload["source"] = self.source
        started = run_handle.event(_E[EventType.TURN_STARTED], payload, turn_index=self.index)
        span = run_handle.start_span(f"turn {self.index}", started, {sc.TURN_INDEX: self.index})
        handle = TurnHandle(run_handle, span, self.index, self.state, self.required_slots, self.slots)
        run_handle.append(started)
        return handle

    def _context(self, handle: TurnHandle) -> context.Context:
        ctx = context.set_value(SCOPE_KEY, replace(scope_of() or Scope(), turn=handle))
        return trace.set_span_in_context(handle.span, ctx)

    def _close(self, handle: TurnHandle, exc: BaseException | None) -> None:
        handle.finish(interrupted=exc is not None)


def _emit(run_handle: OpenRun, turn_handle: OpenTurn | None, event_type: str, payload: dict[str, Any]) -> None:
    """A record on the open turn's span, else on the run's."""
    if turn_handle is not None and not turn_handle.finished:
        turn_handle.emit(event_type, payload)
    else:
        run_handle.emit(event_type, payload)


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
    scope = context.get_value(SCOPE_KEY)
    run_handle = scope.run if scope is not None else None  # type: ignore[union-attr]
    if run_handle is None or not run_handle.open:
        open_run_for("slot_write")  # says so, once
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
        payload = {"slot": slot, "value": value, "previous": _plain(previous), "source": label(source)}
        _emit(run_handle, turn_handle, _SLOT_WRITE, payload)
    except Exception:  # noqa: BLE001
        if apply and writable is not None:
            writable[slot] = value  # the app's write still happens
        capture_failed("a slot write")


def guard(name: str, passed: bool, *, state: str | None = None) -> None:
    """Record a guard checked before a transition (at most 24 per turn; the rest are counted)."""
    found = open_run_for("guard")
    if found is None:
        return
    run_handle, turn_handle = found
    try:
        if turn_handle is not None and not turn_handle.admit_guard():
            return
        payload: dict[str, Any] = {"name": label(name), "passed": bool(passed)}
        if state is not None:
            payload["state"] = label(state)
        _emit(run_handle, turn_handle, _E[EventType.GUARD_EVALUATED], payload)
    except Exception:  # noqa: BLE001
        capture_failed("a guard")


def transition(
    from_state: str | None,
    to_state: str | None,
    *,
    reason: str | None = None,
    candidates: Sequence[Any] | None = None,
) -> None:
    """Record the transition verdict: from, to, why, and the candidates considered (at most 24)."""
    found = open_run_for("transition")
    if found is None:
        return
    run_handle, turn_handle = found
    try:
        listed = list(candidates or ())
        kept = listed[: sc.CAP_PER_TURN]
        payload: dict[str, Any] = {
            "from": label(from_state),
            "to": label(to_state),
            "reason": str(reason) if reason is not None else None,
            "candidates": kept,
        }
        if len(listed) > len(kept):
            payload["candidates_truncated"] = len(listed) - len(kept)
        _emit(run_handle, turn_handle, _E[EventType.TRANSITION_VERDICT], payload)
    except Exception:  # noqa: BLE001
        capture_failed("a transition verdict")


