"""What the instrumentation's parts know of a run and a turn in progress: two small Protocols.

Contract::

    OpenRun     # a run in progress (``_run.RunHandle``): ids, kind, journal, records, abandon()
    OpenTurn    # a turn in progress (``_turn.TurnHandle``): index, slots, records, admit_guard()

The context (``_context.Scope``), the span processor, the runtime and the child sections (message,
tool execution, turn) hold runs and turns by these; only ``_run`` and ``_turn`` make them. So the
modules below the sections import none of them, and the package's imports run one way:
``_handles`` ← ``_context`` ← ``processor`` ← ``_runtime`` ← ``_run`` ← ``_turn`` / ``_message`` / ``_tool``.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from opentelemetry import trace

    from otel_session.bundle.write import RunRecorder
    from otel_session.core.journal import RunKind
    from otel_session.instrument.reconcile import AttributedWrite
    from otel_session.normalize import JournalEvent
    from otel_session.redact import Redactor

__all__ = ["OpenRun", "OpenTurn"]


class OpenRun(Protocol):
    """A run in progress: one trace, its root span and its bundle. Nothing here raises into the app."""

    run_id: str
    session_id: str
    trace_id: int
    trace_id_hex: str
    kind: RunKind
    eval_id: str | None
    open: bool
    redactor: Redactor
    journal_recorder: RunRecorder | None
    """The run's bundle (None: the run is traced, not recorded on disk)."""

    def event(
        self,
        event_type: str,
        payload: dict[str, Any],
        span_id: str | None = None,
        turn_index: int | None = None,
        message_id: str | None = None,
        tool_call_id: str | None = None,
    ) -> JournalEvent:
        """A record of this run, now, its raw ``payload`` redacted once."""
        ...

    def emit(self, event_type: str, payload: dict[str, Any]) -> None:
        """A record on the run's span (a span event) and in its journal."""
        ...

    def append(self, event: JournalEvent) -> None:
        """Journal one (already redacted) record."""
        ...

    def start_span(self, name: str, started: JournalEvent, attributes: dict[str, Any]) -> trace.Span:
        """A child span that opens with the record ``started``."""
        ...

    def abandon(self) -> None:
        """Finish as interrupted (the recorder shuts down with the run still open)."""
        ...


class OpenTurn(Protocol):
    """A turn in progress: its index, the slot mapping it watches and its attributed writes."""

    index: int
    finished: bool
    slots: Mapping[str, Any] | None
    writable_slots: MutableMapping[str, Any] | None
    writes: list[AttributedWrite]

    def emit(self, event_type: str, payload: dict[str, Any]) -> None:
        """A record of this turn, now, on the turn's span and in the journal."""
        ...

    def admit_guard(self) -> bool:
        """Whether one more guard is recorded in this turn (False past the cap: it is counted)."""
        ...
