"""Spans → runs → bundles: routing, redaction, ordering and sealing (the collector's record stage).

Contract::

    sink = BundleSink(writer, redactor, seal_after_s=10.0)
    result = sink.submit(spans)     # -> SubmitResult(rejected, messages); raises Overloaded
    result = sink.submit_log_events(detached)   # GenAI log events, joined to their spans
    sink.seal_quiet_runs()          # called periodically: root seen + quiet for seal_after_s → seal
    sink.seal_all()                 # at shutdown: finished runs seal, the rest as interrupted
    sink.counters.snapshot()

One run is one trace (``run_id`` from the trace id). The session comes from ``session.id``, else
``gen_ai.conversation.id``, else the OpenInference / OpenLLMetry equivalents, on the span or its
resource. A span of a trace already bound to a run joins it even without a session attribute (one
run, many services). Spans of a trace with no session yet wait up to ``hold_unrouted_s`` (default
30 s, beyond the SDK batch processor's 5 s export delay) for a span that names it; then they are
counted as ``no_session`` (never bundled, never silent).

Every span goes normalize → redact → ``RunRecorder.append``; events of one request are redacted
together (``Redactor.redact_events``: a message's deltas as one stream) and appended in event-time
order. Sealing rewrites the journal in event-time order (``event_order_key``) and records
``"order": "event_time"`` in ``capture.json``.

GenAI message log events (OTLP logs, see ``otlp.log_events_of``) join the span they name:

* Arriving before it (the usual case: the SDK exports logs every second, spans every five), they
  wait, up to ``hold_logs_s`` (default 300 s), and become that span's events when it comes.
* Arriving after it, they join a model call that had no messages of its own or was already joined
  by log events: once they have been quiet for a moment (``_LOG_SETTLE_S``) or the run seals, the
  span is normalized again with them, and the message records not journaled yet are appended.
  A span that carries its messages itself (``SPAN_AND_EVENT`` content capture) keeps them; log
  events for it add nothing, before or after it. Model calls wait for late log events
  ``_LOG_JOIN_RETENTION_S`` (the SDK exports logs every second); other spans take none late.
* For a sealed run they are rejected (``partial_success``); never joined, they are counted as
  ``log_events_unmatched``. Log records that are not GenAI message events are ignored, counted.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from enum import Enum
from operator import attrgetter, itemgetter
from typing import Any, Protocol

from otel_session.journal import CaptureStatus, EventType, RunKind, format_timestamp, run_id_from_trace_id
from otel_session.layout import UnsafePathError
from otel_session.normalize import (
    DetachedEvent,
    JournalEvent,
    SpanData,
    SpanEventData,
    genai,
    normalize_span,
    session_id_of,
)
from otel_session.normalize.toollink import ToolCallLinker
from otel_session.read import RunInfo, read_bundle
from otel_session.write import BundleWriter, RunLockedError, RunRecorder, RunSealedError, WriterClosedError

__all__ = [
    "BundleSink",
    "Counters",
    "EventRedactor",
    "Overloaded",
    "RejectReason",
    "SubmitResult",
    "TooManyRequests",
    "event_order_key",
]

logger = logging.getLogger(__name__)

_DEFAULT_SEAL_AFTER_S = 10.0
_DEFAULT_MAX_PENDING_SPANS = 10_000
_DEFAULT_SEAL_ROOTLESS_AFTER_S = 3600.0
_DEFAULT_HOLD_UNROUTED_S = 30.0
_DEFAULT_HOLD_LOGS_S = 300.0
_DEFAULT_MAX_PENDING_LOG_EVENTS = 10_000
_MAX_LOG_JOINS_PER_RUN = 1_024
_LOG_SETTLE_S = 0.5
_LOG_JOIN_RETENTION_S = 30.0
_SEALED_MEMORY = 65_536
_MAX_RUNS_AWAITING_SEAL = 256
RECORDED_BY = "otel-session collector"  # run.json `recorded_by`: runs this collector may resume
# `run_finished` `reason` of a run the collector ends as interrupted (its root span never came):
ROOT_SPAN_MISSING = "root_span_missing"  # quiet for --seal-rootless-after (or --seal-after once resumed)
COLLECTOR_STOPPED = "collector_stopped"  # still open at shutdown

# Records that open / close their span (message records are not: one span can hold several messages).
_OPENING = frozenset(
    {EventType.RUN_STARTED.value, EventType.TURN_STARTED.value, EventType.TOOL_EXECUTION_STARTED.value}
)
_RUN_FINISHED = EventType.RUN_FINISHED.value
_CLOSING = frozenset(
    {EventType.TOOL_EXECUTION_FINISHED.value, EventType.TURN_FINISHED.value, EventType.RUN_FINISHED.value}
)


class EventRedactor(Protocol):
    """What the collector needs from ``otel_session.redact.Redactor``."""

    def redact_events(self, events: list[JournalEvent]) -> list[JournalEvent]: ...

    def text(self, value: str) -> str: ...


class Overloaded(RuntimeError):
    """The writer is behind; the client should retry later (HTTP 429/503, RESOURCE_EXHAUSTED)."""


class TooManyRequests(Overloaded):
    """More concurrent export requests than the collector serves at once."""


class RejectReason(str, Enum):
    SEALED = "sealed"
    LOCKED = "locked"
    CAPTURE_STOPPED = "capture_stopped"
    INVALID_ID = "invalid_id"
    IO_ERROR = "io_error"


@dataclass
class SubmitResult:
    accepted: int = 0
    rejected: int = 0
    messages: list[str] = field(default_factory=list)
    rejected_by: dict[RejectReason, int] = field(default_factory=dict)

    @property
    def error_message(self) -> str:
        return "; ".join(self.messages)


class Counters:
    """Span and log record counters (received, bundled, forwarded, rejected, no_session, …); thread-safe.

    ``received`` counts spans the receivers decoded (a retried request counts again; a request
    refused for the sealing backlog before decoding does not count); ``log_records_*`` count log
    records, ``log_events_*`` the GenAI message events among them.
    """

    NAMES = (
        "received", "bundled", "forwarded", "forward_failed", "rejected", "no_session", "runs_sealed",
        "log_records_received", "log_records_ignored", "log_events_bundled", "log_events_unmatched",
        "log_records_rejected", "log_records_forwarded", "log_records_forward_failed",
    )

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = dict.fromkeys(self.NAMES, 0)

    def add(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self._values[name] += amount

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._values)

    def status_line(self) -> str:
        return " ".join(f"{name}={value}" for name, value in self.snapshot().items())


def event_order_key(depth_of: Callable[[str | None], int]) -> Callable[[dict[str, Any]], tuple]:
    """Sort key for journal records in event-time order with deterministic tie-breaks.

    Records order by ``at``; at equal times a run/turn/tool opening comes before its children's
    (shallower first), a closing after its children's (deeper first), everything else between
    them, by span id, then by ``seq`` (a span's own records keep the normalizer's order).
    """

    def key(record: dict[str, Any]) -> tuple:
        span_id = record.get("span_id") or ""
        phase, rank = _phase_rank(record.get("type"), span_id, depth_of)
        return (record.get("at", ""), phase, rank, span_id, record.get("seq", 0))

    return key


def _has_messages(events: list[JournalEvent]) -> bool:
    for event in events:
        if event.message_id is not None:
            return True
    return False


def _phase_rank(event_type: str | None, span_id: str, depth_of: Callable[[str | None], int]) -> tuple[int, int]:
    if event_type in _OPENING:
        return 0, depth_of(span_id)
    if event_type in _CLOSING:
        return 2, -depth_of(span_id)
    return 1, 0


class _LogJoin:
    """A model call whose messages come, or may still come, as log events after it."""

    __slots__ = ("last_arrival", "late", "span", "written")

    def __init__(self, span: SpanData, written: set[str], now: float) -> None:
        self.span = span
        """The span with the log events joined so far."""
        self.written = written
        """Message ids already journaled for it."""
        self.late: list[SpanEventData] = []
        self.last_arrival = now


class _Run:
    __slots__ = (
        "batches", "closed", "finished", "last_activity", "late_logs", "latest_ns", "lock", "log_joins", "own_messages",
        "parents", "recorder", "resumed", "root_seen", "root_status", "tool_links",
    )

    def __init__(self, recorder: RunRecorder) -> None:
        self.recorder = recorder
        self.lock = threading.Lock()
        self.closed = False
        """Sealed (under ``lock``): nothing more joins it."""
        self.log_joins: dict[str, _LogJoin] = {}
        """Span id → journaled span that log events may still name (see the module docstring)."""
        self.late_logs: set[str] = set()
        """Span ids of ``log_joins`` holding late log events not journaled yet."""
        self.own_messages: set[str] = set()
        """Span ids of spans journaled with messages of their own (log events for them add nothing)."""
        self.parents: dict[str, str | None] = {}
        self.root_seen = False
        self.root_status = "ok"
        self.finished = False
        self.batches = 0
        """Requests appended; a run written by one request is already in event-time order."""
        self.last_activity = time.monotonic()
        self.latest_ns = 0
        """The latest event time journaled: a run finished here is never stamped before it."""
        self.resumed = False
        """Left ``recording`` by a previous process: sealed (as interrupted) when quiet, like a rooted run."""
        self.tool_links = ToolCallLinker()

    def depth_of(self, span_id: str | None) -> int:
        depth = 0
        seen = set()
        while span_id and span_id in self.parents and span_id not in seen:
            seen.add(span_id)
            span_id = self.parents[span_id]
            depth += 1
        return depth


class BundleSink:
    """Routes normalized, redacted span events into one bundle per run (trace)."""

    def __init__(
        self,
        writer: BundleWriter,
        redactor: EventRedactor,
        *,
        seal_after_s: float = _DEFAULT_SEAL_AFTER_S,
        seal_rootless_after_s: float = _DEFAULT_SEAL_ROOTLESS_AFTER_S,
        hold_unrouted_s: float = _DEFAULT_HOLD_UNROUTED_S,
        hold_logs_s: float = _DEFAULT_HOLD_LOGS_S,
        max_pending_spans: int = _DEFAULT_MAX_PENDING_SPANS,
        max_pending_log_events: int = _DEFAULT_MAX_PENDING_LOG_EVENTS,
        counters: Counters | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.writer = writer
        self.redactor = redactor
        self.seal_after_s = seal_after_s
        self.seal_rootless_after_s = max(seal_after_s, seal_rootless_after_s)
        self.hold_unrouted_s = hold_unrouted_s
        self.hold_logs_s = hold_logs_s
        self.max_pending_spans = max_pending_spans
        self.max_pending_log_events = max_pending_log_events
        self.counters = counters or Counters()
        self._clock = clock
        self._lock = threading.Lock()
        self._runs: dict[int, _Run] = {}
        self._sealed: OrderedDict[int, None] = OrderedDict()
        self._pending: dict[int, tuple[float, list[SpanData]]] = {}
        self._pending_count = 0
        self._pending_logs: dict[int, tuple[float, dict[int, list[SpanEventData]]]] = {}
        """Log events waiting for their spans: trace id → (first seen, span id → events)."""
        self._pending_log_count = 0
        self._sealing: list[RunRecorder] = []
        self._queue_high_water = writer.limits.max_queue_records // 2

    # -- intake ----------------------------------------------------------------------------

    def submit(self, spans: Iterable[SpanData]) -> SubmitResult:
        """Bundle ``spans`` (one export request). Raises ``Overloaded`` before appending anything."""
        by_trace: dict[int, list[SpanData]] = defaultdict(list)
        for span in spans:
            by_trace[span.trace_id].append(span)
        result = SubmitResult()
        planned: list[tuple[_Run, list[SpanData], dict[int, list[SpanEventData]]]] = []
        with self._lock:
            self._check_sealing_backlog()
            for run in (self._runs.get(trace_id) for trace_id in by_trace):
                if run is not None and run.recorder.queued_records > self._queue_high_water:
                    raise Overloaded(f"the bundle writer is behind on {run.recorder.run_id}; retry later")
            for trace_id, trace_spans in by_trace.items():
                run = self._run_for(trace_id, trace_spans, result)
                if run is not None:
                    trace_spans = self._take_pending(trace_id) + trace_spans
                    # End order, as the app's SDK exported them: OTLP regroups a request's spans by
                    # scope, and a mapping may join a span to the children that ended before it.
                    trace_spans.sort(key=attrgetter("end_time_ns"))
                    joined = self._join_pending_logs(trace_id, trace_spans) if self._pending_logs else {}
                    planned.append((run, trace_spans, joined))
        for run, trace_spans, log_events in planned:
            self._append(run, trace_spans, log_events, result)
        return result

    def submit_log_events(self, detached: Iterable[DetachedEvent]) -> SubmitResult:
        """Join GenAI log events to their spans (one export request); ``accepted`` counts events
        taken (joined, or waiting for their span), ``rejected`` those of sealed runs."""
        by_span: dict[tuple[int, int], list[SpanEventData]] = defaultdict(list)
        for item in detached:
            by_span[(item.trace_id, item.span_id)].append(item.event)
        result = SubmitResult()
        late: list[tuple[_Run, int, int, str, list[SpanEventData]]] = []
        now = self._clock()
        with self._lock:
            for (trace_id, span_id), events in by_span.items():
                run = self._runs.get(trace_id)
                span_hex = f"{span_id:016x}"
                if run is not None and span_hex in run.parents:  # its span came first
                    if span_hex in run.log_joins:
                        late.append((run, trace_id, span_id, span_hex, events))
                    elif span_hex in run.own_messages:  # SPAN_AND_EVENT: the span has them
                        self.counters.add("log_events_bundled", len(events))
                        result.accepted += len(events)
                    else:  # no model call: nothing joins it after it came
                        self._unmatched(len(events), f"they came after their span in run {run.recorder.run_id}, "
                                                     "which is not a model call")
                        result.accepted += len(events)
                elif trace_id in self._sealed:
                    self._reject_log_events(result, trace_id, len(events))
                else:
                    self._hold_log_events(trace_id, span_id, events, now)
                    result.accepted += len(events)
        for run, trace_id, span_id, span_hex, events in late:
            with run.lock:
                join = None if run.closed else run.log_joins.get(span_hex)
                if join is not None:
                    join.late.extend(events)
                    run.late_logs.add(span_hex)
                    join.last_arrival = run.last_activity = now
                    result.accepted += len(events)
                    continue
            with self._lock:  # sealed, or the join expired, in between
                if trace_id in self._sealed:
                    self._reject_log_events(result, trace_id, len(events))
                else:
                    self._hold_log_events(trace_id, span_id, events, now)
                    result.accepted += len(events)
        return result

    def check_capacity(self) -> None:
        """Raise ``Overloaded`` now if a request would be refused for the sealing backlog anyway.

        Receivers call it before decoding a request, so a refused request costs no decode.
        """
        with self._lock:
            self._check_sealing_backlog()

    def _check_sealing_backlog(self) -> None:
        """Refuse (retryably) while too many closed runs wait for the writer to seal them.

        Every run's queue has its own bound, but many short runs each below it can together hold
        everything received (and two file descriptors each) while the writer falls behind:
        memory would grow with the load instead of being bounded. Called with ``_lock`` held.
        """
        self._sealing = [recorder for recorder in self._sealing if not recorder.sealed]
        if len(self._sealing) > _MAX_RUNS_AWAITING_SEAL:
            raise Overloaded(f"the bundle writer is behind ({len(self._sealing)} runs awaiting their seal); retry later")

    def _run_for(self, trace_id: int, spans: list[SpanData], result: SubmitResult) -> _Run | None:
        run = self._runs.get(trace_id)
        if run is not None:
            return run
        if trace_id in self._sealed:
            self._reject(result, len(spans), RejectReason.SEALED, f"run {spans[0].run_id} is already sealed")
            self._reject_pending_logs(trace_id)
            return None
        session_id = next(
            (sid for span in spans if (sid := session_id_of(span.attributes, span.resource_attributes))), None
        )
        if session_id is None:
            self._hold(trace_id, spans)
            return None
        return self._open(trace_id, session_id, spans, result)

    def _open(self, trace_id: int, session_id: str, spans: list[SpanData], result: SubmitResult) -> _Run | None:
        first = min(spans, key=lambda span: span.start_time_ns)
        attributes = next((span.attributes for span in spans if span.parent_span_id is None), first.attributes)
        eval_id = attributes.get("otel_session.eval.id")
        kind = RunKind.EVAL if attributes.get("otel_session.run.kind") == RunKind.EVAL.value and eval_id else RunKind.LIVE
        run_id = first.run_id
        try:
            recorder = self.writer.open_run(
                session_id=session_id,
                run_id=run_id,
                kind=kind,
                eval_id=str(eval_id) if kind is RunKind.EVAL else None,
                agent=genai.run_agent(spans),
                service=first.service_name,
                created_at_ns=first.start_time_ns,
                recorded_by=RECORDED_BY,
            )
        # What the client is told names the run and the reason, never a server path or an input
        # value (the session id may be personal data): the exception goes to the log only.
        except RunSealedError as exc:
            self._remember_sealed(trace_id)
            message = f"run {run_id} is already sealed; a sealed bundle never changes"
            self._reject(result, len(spans), RejectReason.SEALED, message, detail=exc)
            self._reject_pending_logs(trace_id)
            return None
        except RunLockedError as exc:
            message = f"run {run_id} is held by another writer (one writer per run); route each trace to one collector"
            self._reject(result, len(spans), RejectReason.LOCKED, message, detail=exc)
            return None
        except UnsafePathError as exc:
            message = f"run {run_id}: its bundle directory is not a plain directory under the bundle root"
            self._reject(result, len(spans), RejectReason.INVALID_ID, message, detail=exc)
            return None
        except WriterClosedError as exc:
            raise Overloaded(str(exc)) from None
        except OSError as exc:
            reason = os.strerror(exc.errno) if exc.errno else type(exc).__name__
            message = f"cannot open the bundle of run {run_id}: {reason}"
            self._reject(result, len(spans), RejectReason.IO_ERROR, message, detail=exc)
            return None
        self.writer.set_capture_extras(run_id, {"order": "event_time"})
        run = _Run(recorder)
        self._runs[trace_id] = run
        return run

    def _append(
        self, run: _Run, spans: list[SpanData], log_events: dict[int, list[SpanEventData]], result: SubmitResult
    ) -> None:
        """Journal ``spans`` (one trace's, of one request), each with the log events that waited for it."""
        keyed: list[tuple[tuple, JournalEvent]] = []
        with run.lock:
            span_ids = [span.span_id_hex for span in spans]
            for span, span_hex in zip(spans, span_ids):
                run.parents[span_hex] = f"{span.parent_span_id:016x}" if span.parent_span_id is not None else None
                if span.parent_span_id is None:
                    run.root_seen = True
                    run.root_status = "error" if span.status_code == "error" else "ok"
            normalized = []
            for span, span_hex in zip(spans, span_ids):
                events = normalize_span(span)
                if _has_messages(events):  # its own messages stand: log events for it add nothing
                    run.own_messages.add(span_hex)
                else:
                    events = self._join_log_events(run, span, span_hex, log_events.get(span.span_id), events)
                normalized.append((span_hex, events))
            self._key_events(run, normalized, keyed)
            failure = self._journal(run, keyed)
            if failure is not None:
                self._reject(result, len(spans), RejectReason.CAPTURE_STOPPED, f"run {run.recorder.run_id}: {failure}")
                return
            run.last_activity = self._clock()
        result.accepted += len(spans)
        self.counters.add("bundled", len(spans))
        if log_events:
            self.counters.add("log_events_bundled", sum(len(events) for events in log_events.values()))

    def _join_log_events(
        self, run: _Run, span: SpanData, span_hex: str, waiting: list[SpanEventData] | None, events: list[JournalEvent]
    ) -> list[JournalEvent]:
        """The journal events of ``span`` (normalized as ``events``, no messages of its own) with
        the log events that waited for it; remembers it for later ones if it is a model call or
        was joined (``run.lock`` held)."""
        if waiting:
            span = span.with_events(waiting)
            events = normalize_span(span)
        elif not genai.is_model_call(span.attributes):
            return events
        written = {event.message_id for event in events if event.message_id is not None}
        self._remember_log_join(run, span_hex, _LogJoin(span, written, self._clock()))
        return events

    @staticmethod
    def _key_events(
        run: _Run, normalized: list[tuple[str, list[JournalEvent]]], keyed: list[tuple[tuple, JournalEvent]]
    ) -> None:
        """Add each span's events (``(span id, events in its order)``) to ``keyed`` under their
        event-time order key."""
        depth_of = run.depth_of
        for span_hex, events in normalized:
            for index, event in enumerate(events):
                span_id = event.span_id or span_hex
                # The same order as event_order_key, on nanosecond-exact µs and the span's own order.
                phase, rank = _phase_rank(event.type, span_id, depth_of)
                keyed.append(((event.at_ns // 1000, phase, rank, span_id, index), event))

    def _journal(self, run: _Run, keyed: list[tuple[tuple, JournalEvent]]) -> str | None:
        """Redact and append ``keyed`` in key order (``run.lock`` held); why the capture refused them, if it did."""
        keyed.sort(key=itemgetter(0))
        events = [event for _, event in keyed]
        run.tool_links.link(events)  # tool spans without a call id answer the model's call
        redacted = self.redactor.redact_events(events)  # fresh events: in place
        recorder = run.recorder
        accepted = recorder.append_events(redacted)
        if accepted:
            run.latest_ns = max(run.latest_ns, max(event.at_ns for event in redacted[:accepted]))
            run.finished = run.finished or any(event.type == _RUN_FINISHED for event in redacted[:accepted])
        if accepted < len(redacted):
            failure = recorder.failure
            return f"{failure.code.value}: {failure.message}" if failure is not None else "the capture is closed"
        run.batches += 1
        return None

    @staticmethod
    def _remember_log_join(run: _Run, span_hex: str, join: _LogJoin) -> None:
        """Add ``join``; the oldest go when there are too many or nothing named them for a while."""
        joins = run.log_joins
        while joins:
            oldest_hex = next(iter(joins))
            oldest = joins[oldest_hex]
            if oldest_hex in run.late_logs or (
                len(joins) < _MAX_LOG_JOINS_PER_RUN and join.last_arrival - oldest.last_arrival < _LOG_JOIN_RETENTION_S
            ):
                break
            del joins[oldest_hex]
        joins[span_hex] = join

    def _join_pending_logs(self, trace_id: int, spans: list[SpanData]) -> dict[int, list[SpanEventData]]:
        """The log events waiting for each of ``spans``, by span id (taken; ``_lock`` held)."""
        entry = self._pending_logs.get(trace_id)
        if entry is None:
            return {}
        waiting = entry[1]
        joined: dict[int, list[SpanEventData]] = {}
        for span in spans:
            events = waiting.pop(span.span_id, None)
            if events is not None:
                self._pending_log_count -= len(events)
                joined[span.span_id] = events
        if not waiting:
            del self._pending_logs[trace_id]
        return joined

    def _hold_log_events(self, trace_id: int, span_id: int, events: list[SpanEventData], now: float) -> None:
        """Keep log events until their span comes (``_lock`` held); over the bound, count them unmatched."""
        if self._pending_log_count + len(events) > self.max_pending_log_events:
            self._unmatched(len(events), f"{self._pending_log_count} already wait for their spans")
            return
        self._pending_logs.setdefault(trace_id, (now, {}))[1].setdefault(span_id, []).extend(events)
        self._pending_log_count += len(events)

    def _take_pending_logs(self, trace_id: int) -> int:
        """Drop the log events waiting in ``trace_id`` (``_lock`` held); how many there were."""
        entry = self._pending_logs.pop(trace_id, None)
        count = sum(len(events) for events in entry[1].values()) if entry is not None else 0
        self._pending_log_count -= count
        return count

    def _flush_late_logs(self, run: _Run, *, settled_before: float) -> None:
        """Journal the messages of log events that came after their span (``run.lock`` held):
        those of joins quiet since ``settled_before``."""
        fresh_by_span: list[tuple[str, list[JournalEvent]]] = []
        counts = 0
        for span_hex in list(run.late_logs):
            join = run.log_joins[span_hex]
            if join.last_arrival > settled_before:
                continue
            run.late_logs.discard(span_hex)
            counts += len(join.late)
            join.span = join.span.with_events(join.late)
            join.late = []
            fresh = [
                event for event in normalize_span(join.span)
                if event.message_id is not None and event.message_id not in join.written
            ]
            join.written.update(event.message_id for event in fresh)
            fresh_by_span.append((span_hex, fresh))
        if not counts:
            return
        keyed: list[tuple[tuple, JournalEvent]] = []
        self._key_events(run, fresh_by_span, keyed)
        failure = self._journal(run, keyed) if keyed else None
        if failure is not None:
            self._unmatched(counts, f"run {run.recorder.run_id}: {failure}")
        else:
            self.counters.add("log_events_bundled", counts)

    def _hold(self, trace_id: int, spans: list[SpanData]) -> None:
        if self._pending_count + len(spans) > self.max_pending_spans:
            self.counters.add("no_session", len(spans))
            return
        first_seen, held = self._pending.get(trace_id, (self._clock(), []))
        held.extend(spans)
        self._pending[trace_id] = (first_seen, held)
        self._pending_count += len(spans)

    def _take_pending(self, trace_id: int) -> list[SpanData]:
        entry = self._pending.pop(trace_id, None)
        if entry is None:
            return []
        self._pending_count -= len(entry[1])
        return entry[1]

    def _reject(
        self,
        result: SubmitResult,
        count: int,
        reason: RejectReason,
        message: str,
        *,
        what: str = "span",
        detail: Exception | None = None,
    ) -> None:
        """Count and report a rejection: ``message`` goes to the client, ``detail`` to the log only."""
        result.rejected += count
        result.rejected_by[reason] = result.rejected_by.get(reason, 0) + count
        if message not in result.messages:
            result.messages.append(message)
        self.counters.add("rejected" if what == "span" else "log_records_rejected", count)
        logger.warning("rejected %d %s(s) (%s): %s%s", count, what, reason.value, message, f" ({detail})" if detail else "")

    def _reject_pending_logs(self, trace_id: int) -> None:
        """Log events that waited for spans of a run found sealed (after a restart, or a file
        imported again) are rejected too: counted, never reported as unmatched."""
        count = self._take_pending_logs(trace_id)
        if count:
            self.counters.add("log_records_rejected", count)
            logger.warning("rejected %d log record(s) (sealed): run %s is already sealed", count,
                           run_id_from_trace_id(trace_id))

    def _reject_log_events(self, result: SubmitResult, trace_id: int, count: int) -> None:
        message = f"run {run_id_from_trace_id(trace_id)} is already sealed"
        self._reject(result, count, RejectReason.SEALED, message, what="log record")

    def _remember_sealed(self, trace_id: int) -> None:
        self._sealed[trace_id] = None
        while len(self._sealed) > _SEALED_MEMORY:
            self._sealed.popitem(last=False)

    def resume_orphans(self, runs: Iterable[RunInfo]) -> int:
        """Reopen runs a previous collector left ``recording`` (crashed; their lock is free).

        Each continues when spans of its trace arrive, and is otherwise sealed ``interrupted`` once
        quiet for ``seal_after_s`` — never left ``recording`` for good. A run another live writer
        holds is left to it. Returns how many runs were resumed.
        """
        resumed = 0
        for info in runs:
            if info.capture_status != CaptureStatus.RECORDING.value or info.recorded_by != RECORDED_BY:
                continue  # sealed, or another recorder's (an in-process journal keeps its own seq order)
            try:
                recorder = self.writer.open_run(session_id=info.session_id, run_id=info.run_id, kind=info.kind,
                                                eval_id=info.eval_id)
            except (RunLockedError, RunSealedError, UnsafePathError, ValueError, OSError) as exc:
                logger.info("left %s as it is: %s", info.path, exc)
                continue
            run = _Run(recorder)
            run.resumed = True
            run.latest_ns = max((_at_ns(event) for event in read_bundle(info.path).events), default=0)
            self.writer.set_capture_extras(info.run_id, {"order": "event_time"})
            with self._lock:
                self._runs[uuid.UUID(info.run_id.removeprefix("run-")).int] = run
            resumed += 1
            logger.warning("resumed %s, left recording by a previous process (%d bytes of a torn line cut)",
                           info.path, recorder.recovered_torn_bytes)
        return resumed

    # -- sealing ---------------------------------------------------------------------------

    def seal_quiet_runs(self) -> int:
        """Seal runs whose root span arrived and that were quiet for ``seal_after_s``; expire held spans.

        A run whose root never arrives (it went to another collector, or its service never
        exported it) is sealed as interrupted once quiet for ``seal_rootless_after_s`` (default an
        hour: a root span ends last, after a run's slowest steps), so it cannot hold its file and
        memory for good.
        """
        now = self._clock()
        with self._lock:
            quiet = [
                trace_id
                for trace_id, run in self._runs.items()
                if now - run.last_activity
                >= (self.seal_after_s if run.root_seen or run.resumed else self.seal_rootless_after_s)
            ]
            runs = [self._runs.pop(trace_id) for trace_id in quiet]
            self._sealing.extend(run.recorder for run in runs)
            for trace_id in quiet:
                self._remember_sealed(trace_id)
            expired = [trace_id for trace_id, (first_seen, _) in self._pending.items() if now - first_seen >= self.hold_unrouted_s]
            for trace_id in expired:
                self.counters.add("no_session", len(self._take_pending(trace_id)))
            self._expire_pending_logs(lambda first_seen: now - first_seen >= self.hold_logs_s)
            joining = [run for run in self._runs.values() if run.late_logs]
        settled_before = now - min(_LOG_SETTLE_S, self.seal_after_s / 2)
        for run in joining:
            with run.lock:
                if not run.closed:
                    self._flush_late_logs(run, settled_before=settled_before)
        for run in runs:
            self._seal(run, interrupted=not run.root_seen, reason=ROOT_SPAN_MISSING)
        return len(runs)

    def _expire_pending_logs(self, expired: Callable[[float], bool]) -> None:
        """Count as unmatched the waiting log events whose span never came (``_lock`` held)."""
        gone = [trace_id for trace_id, (first_seen, _) in self._pending_logs.items() if expired(first_seen)]
        count = sum(self._take_pending_logs(trace_id) for trace_id in gone)
        if count:
            self._unmatched(count, "they never met their span (not exported, or sent to another collector: "
                                   "route a trace's logs with its spans)")

    def _unmatched(self, count: int, why: str) -> None:
        self.counters.add("log_events_unmatched", count)
        logger.warning("%d GenAI log event(s) not bundled: %s", count, why)

    def seal_all(self) -> list[RunRecorder]:
        """Seal every open run now: runs whose root arrived as finished, the others as interrupted."""
        with self._lock:
            runs = list(self._runs.items())
            self._runs.clear()
            for trace_id, _ in runs:
                self._remember_sealed(trace_id)
            for trace_id in list(self._pending):
                self.counters.add("no_session", len(self._take_pending(trace_id)))
            self._expire_pending_logs(lambda first_seen: True)
        for _, run in runs:
            self._seal(run, interrupted=not run.root_seen, reason=COLLECTOR_STOPPED)
        return [run.recorder for _, run in runs]

    def _seal(self, run: _Run, *, interrupted: bool, reason: str) -> None:
        """Seal ``run``; one not finished by its own root span gets a ``run_finished`` here, with
        ``reason`` when ``interrupted`` (the root never arrived)."""
        with run.lock:
            run.closed = True
            if run.late_logs:
                self._flush_late_logs(run, settled_before=float("inf"))
            if run.finished:
                status = None
            else:
                status = "interrupted" if interrupted else run.root_status
                payload = {"status": status, "reason": reason} if interrupted else {"status": status}
                # Stamped after the run's last event (journal times are µs), so the event-time order
                # keeps it last even when the services' clocks run ahead of this one.
                at_ns = max(time.time_ns(), run.latest_ns + 1000)
                run.recorder.append(EventType.RUN_FINISHED, payload, at_ns=at_ns)
                if interrupted and reason == ROOT_SPAN_MISSING:
                    logger.warning(
                        "run %s sealed without its root span: its service never exported it, or it went to "
                        "another collector (route every span of a trace to one collector)", run.recorder.run_id,
                    )
            # Appended by one request, root included, in the same key's order (and not resumed from an
            # earlier process): already in event-time order, nothing to rewrite.
            in_order = run.finished and run.batches == 1 and not run.resumed
            run.recorder.close(reorder=None if in_order else event_order_key(run.depth_of))
        self.counters.add("runs_sealed")
        logger.info(
            "sealed %s (%s) at %s", run.recorder.run_id, status or "finished", format_timestamp(time.time_ns())
        )

    @property
    def open_run_count(self) -> int:
        with self._lock:
            return len(self._runs)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _at_ns(record: dict[str, Any]) -> int:
    """A record's ``at`` in nanoseconds since the epoch (0 when it is not a timestamp)."""
    try:
        moment = datetime.fromisoformat(str(record["at"]).replace("Z", "+00:00"))
    except (KeyError, ValueError):
        return 0
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000
