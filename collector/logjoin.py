"""GenAI message log events joined to the spans they name, early or late (the assembly's log join).

Contract::

    waiting = WaitingLogs(max_events)           # events that came before their span (sink._lock)
    waiting.hold(trace_id, span_id, events, now) -> bool   # False: over the bound (count them unmatched)
    waiting.take(trace_id, spans) -> {span_id: events}     # when the spans come
    waiting.drop(trace_id) -> int; waiting.expire(is_expired) -> int

    taken = TakenGroups()                       # the groups taken (sink._lock)
    key = group_key(trace_id, span_id, events)  # one request's events of one span
    key in taken; taken.add(key)                # a group equal to one taken: the exporter's retry

    joins = LogJoins()                          # one run's (run.lock held)
    events = joins.normalize(span, span_hex, waiting_events, now)   # its journal events, normalized once
    joins.accepts_late(span_hex) -> LateJoin               # may events coming after it still join?
    joins.add_late(span_hex, events, now) -> bool
    fresh, count = joins.settled(settled_before)           # (span id, new message events) to journal

* Arriving before its span (the usual case: the SDK exports logs every second, spans every five),
  an event waits and becomes an event of its span when the span comes: the span is normalized
  once, with them. A span that carries message events of its own (``SPAN_AND_EVENT`` content
  capture) keeps them; log events for it add nothing, before or after it.
* Arriving after it, events join a model call that had no messages of its own or was joined by log
  events already: once quiet for ``LOG_SETTLE_S`` (or at the seal) the span is normalized again
  with them (message ids follow the messages' positions) and only the message records not
  journaled yet are kept. Model calls wait for late events ``LOG_JOIN_RETENTION_S``, at most
  ``MAX_LOG_JOINS_PER_RUN`` of them; other spans take none late.
* An exporter retries a whole request whose answer it did not get: a group of events (one
  request's, of one span) equal to a group taken before is that group again and adds nothing.
  Equal events within a group, or in two different groups, are each an event (the same words
  twice in a history, stamped within one tick of a coarse clock).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable
from enum import Enum

import orjson

from otel_session.normalize import JournalEvent, SpanEventData, SpanView, genai, normalize_span

__all__ = ["LOG_SETTLE_S", "LateJoin", "LogJoins", "TakenGroups", "WaitingLogs", "group_key"]

LOG_SETTLE_S = 0.5
TAKEN_GROUPS_KEPT = 65_536
LOG_JOIN_RETENTION_S = 30.0
MAX_LOG_JOINS_PER_RUN = 1_024


def group_key(trace_id: int, span_id: int, events: list[SpanEventData]) -> bytes | None:
    """What a group of log events is known by: a digest of its span and its events in order (their
    names, times and attributes); None when they cannot be encoded (such a group is never a repeat)."""
    try:
        events_part = [(event.name, event.time_ns, event.attributes) for event in events]
        document = orjson.dumps([f"{trace_id:x}", f"{span_id:x}", events_part],  # ids past 64 bits: text
                                option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=repr)
    except (TypeError, orjson.JSONEncodeError):
        return None
    return hashlib.blake2b(document, digest_size=16).digest()


class TakenGroups:
    """The keys of the log event groups taken, the oldest forgotten first (a retry comes within
    the exporter's backoff: seconds)."""

    def __init__(self, max_groups: int = TAKEN_GROUPS_KEPT) -> None:
        self.max_groups = max_groups
        self._keys: OrderedDict[bytes, None] = OrderedDict()

    def __contains__(self, key: bytes | None) -> bool:
        return key is not None and key in self._keys

    def add(self, key: bytes | None) -> None:
        if key is None:
            return
        self._keys[key] = None
        if len(self._keys) > self.max_groups:
            self._keys.popitem(last=False)


class WaitingLogs:
    """Log events waiting for their spans: trace id → (first seen, span id → events); bounded."""

    def __init__(self, max_events: int) -> None:
        self.max_events = max_events
        self.count = 0
        self._by_trace: dict[int, tuple[float, dict[int, list[SpanEventData]]]] = {}

    def __bool__(self) -> bool:
        return bool(self._by_trace)

    def hold(self, trace_id: int, span_id: int, events: list[SpanEventData], now: float) -> bool:
        """Keep ``events`` until their span comes; False (nothing kept) over the bound."""
        if self.count + len(events) > self.max_events:
            return False
        self._by_trace.setdefault(trace_id, (now, {}))[1].setdefault(span_id, []).extend(events)
        self.count += len(events)
        return True

    def take(self, trace_id: int, spans: list[SpanView]) -> dict[int, list[SpanEventData]]:
        """The events waiting for each of ``spans``, by span id (taken)."""
        entry = self._by_trace.get(trace_id)
        if entry is None:
            return {}
        waiting = entry[1]
        joined: dict[int, list[SpanEventData]] = {}
        for span in spans:
            events = waiting.pop(span.span_id, None)
            if events is not None:
                self.count -= len(events)
                joined[span.span_id] = events
        if not waiting:
            del self._by_trace[trace_id]
        return joined

    def drop(self, trace_id: int) -> int:
        """Drop the events waiting in ``trace_id``; how many there were."""
        entry = self._by_trace.pop(trace_id, None)
        count = sum(len(events) for events in entry[1].values()) if entry is not None else 0
        self.count -= count
        return count

    def expire(self, is_expired: Callable[[float], bool]) -> int:
        """Drop the traces whose first event came at a time ``is_expired``; how many events went."""
        gone = [trace_id for trace_id, (first_seen, _) in self._by_trace.items() if is_expired(first_seen)]
        return sum(self.drop(trace_id) for trace_id in gone)


class LateJoin(Enum):
    """What log events arriving after their (journaled) span become."""

    JOINS = "joins"
    """A model call without messages of its own: they join it."""
    HAS_OWN = "has_own"
    """The span carries its messages itself: they add nothing (counted bundled)."""
    NONE = "none"
    """Not a model call, or forgotten: nothing joins it after it came."""


class _LogJoin:
    """A model call whose messages come, or may still come, as log events after it."""

    __slots__ = ("last_arrival", "late", "span", "written")

    def __init__(self, span: SpanView, written: set[str], now: float) -> None:
        self.span = span
        """The span with the log events joined so far."""
        self.written = written
        """Message ids already journaled for it."""
        self.late: list[SpanEventData] = []
        self.last_arrival = now


def _has_message_events(span: SpanView) -> bool:
    return any(genai.is_message_event(event.name) for event in span.events)


def _has_messages(events: list[JournalEvent]) -> bool:
    for event in events:  # a loop, not any(): this runs for every span
        if event.message_id is not None:
            return True
    return False


class LogJoins:
    """One run's spans that log events joined or may still join (the caller holds the run's lock)."""

    __slots__ = ("_joins", "_late", "_own")

    def __init__(self) -> None:
        self._joins: dict[str, _LogJoin] = {}
        """Span id → journaled span that log events may still name (oldest first)."""
        self._late: set[str] = set()
        """Span ids of ``_joins`` holding late log events not journaled yet."""
        self._own: set[str] = set()
        """Span ids of spans journaled with message events of their own."""

    def normalize(
        self, span: SpanView, span_hex: str, waiting: list[SpanEventData] | None, now: float
    ) -> list[JournalEvent]:
        """``span``'s journal events, with the log events ``waiting`` for it unless it carries
        message events itself; remembered for later ones when it is a model call or was joined."""
        own = bool(span.events) and _has_message_events(span)
        if waiting and not own:
            span = span.with_events(waiting)
        events = normalize_span(span)
        if own or (not waiting and _has_messages(events)):
            self._own.add(span_hex)
        elif waiting or genai.is_model_call(span.attributes):
            written = {event.message_id for event in events if event.message_id is not None}
            self._remember(span_hex, _LogJoin(span, written, now))
        return events

    def accepts_late(self, span_hex: str) -> LateJoin:
        if span_hex in self._joins:
            return LateJoin.JOINS
        return LateJoin.HAS_OWN if span_hex in self._own else LateJoin.NONE

    def add_late(self, span_hex: str, events: list[SpanEventData], now: float) -> bool:
        """Keep ``events`` for the span's next settle; False when it takes none (any more)."""
        join = self._joins.get(span_hex)
        if join is None:
            return False
        join.late.extend(events)
        join.last_arrival = now
        self._late.add(span_hex)
        return True

    @property
    def has_late(self) -> bool:
        return bool(self._late)

    def settled(self, settled_before: float) -> tuple[list[tuple[str, list[JournalEvent]]], int]:
        """The new message events of spans whose late log events were quiet since ``settled_before``
        (``(span id, events)`` each), and how many log events they took."""
        fresh_by_span: list[tuple[str, list[JournalEvent]]] = []
        count = 0
        for span_hex in list(self._late):
            join = self._joins[span_hex]
            if join.last_arrival > settled_before:
                continue
            self._late.discard(span_hex)
            count += len(join.late)
            join.span = join.span.with_events(join.late)
            join.late = []
            fresh = [
                event for event in normalize_span(join.span)
                if event.message_id is not None and event.message_id not in join.written
            ]
            join.written.update(event.message_id for event in fresh)
            fresh_by_span.append((span_hex, fresh))
        return fresh_by_span, count

    def _remember(self, span_hex: str, join: _LogJoin) -> None:
        """Add ``join``; the oldest go when there are too many or nothing named them for a while."""
        joins = self._joins
        while joins:
            oldest_hex = next(iter(joins))
            oldest = joins[oldest_hex]
            if oldest_hex in self._late or (
                len(joins) < MAX_LOG_JOINS_PER_RUN and join.last_arrival - oldest.last_arrival < LOG_JOIN_RETENTION_S
            ):
                break
            del joins[oldest_hex]
        joins[span_hex] = join
