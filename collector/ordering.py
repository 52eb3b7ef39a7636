"""Event-time order of a run's records, with deterministic tie-breaks (the assembly's order).

Contract::

    tree = SpanTree(); tree.parents[span_hex] = parent_hex   # as the run's spans arrive
    events = tree.order([(span_hex, events), ...])         # JournalEvents, event-time order
    key = event_order_key(tree.depth_of)                   # the same order over decoded records

Records order by ``at``; at equal times a run/turn/tool opening comes before its children's
(shallower first), a closing after its children's (deeper first), a ``span`` record after every
closing (deeper first: a span's after its children's), everything else between them,
by span id, then in arrival order (a span's own order; ``seq`` for decoded records). ``order`` compares ``at``
in microseconds, as the journal stores it, so both keys agree on every record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from otel_session.core.journal import EventType
from otel_session.normalize import JournalEvent

__all__ = ["SpanTree", "event_order_key"]

# Records that open / close their span (message records are not: one span can hold several messages).
_OPENING = frozenset(
    {EventType.RUN_STARTED.value, EventType.TURN_STARTED.value, EventType.TOOL_EXECUTION_STARTED.value}
)
_CLOSING = frozenset(
    {EventType.TOOL_EXECUTION_FINISHED.value, EventType.TURN_FINISHED.value, EventType.RUN_FINISHED.value,
     EventType.SPAN.value}
)
_SPAN = EventType.SPAN.value


def event_order_key(depth_of: Callable[[str | None], int]) -> Callable[[dict[str, Any]], tuple]:
    """Sort key for decoded journal records in event-time order (see the module docstring)."""

    def key(record: dict[str, Any]) -> tuple:
        span_id = record.get("span_id") or ""
        phase, rank = _phase_rank(record.get("type"), span_id, depth_of)
        return (record.get("at", ""), phase, rank, span_id, record.get("seq", 0))

    return key


def _phase_rank(event_type: str | None, span_id: str, depth_of: Callable[[str | None], int]) -> tuple[int, int]:
    if event_type in _OPENING:
        return 0, depth_of(span_id)
    if event_type in _CLOSING:
        return 3 if event_type == _SPAN else 2, -depth_of(span_id)
    return 1, 0


class SpanTree:
    """The parent of each span of a run seen so far: depths for the tie-breaks."""

    __slots__ = ("parents",)

    def __init__(self) -> None:
        self.parents: dict[str, str | None] = {}
        """Span id → its parent's (None for the root); filled by the sink as spans arrive."""

    def __contains__(self, span_hex: str) -> bool:
        return span_hex in self.parents

    def depth_of(self, span_id: str | None) -> int:
        parents = self.parents
        depth = 0
        seen = set()
        while span_id and span_id in parents and span_id not in seen:
            seen.add(span_id)
            span_id = parents[span_id]
            depth += 1
        return depth

    def order(self, normalized: list[tuple[str, list[JournalEvent]]]) -> list[JournalEvent]:
        """The events of ``normalized`` (``(span id, events in its order)`` each) in event-time order.

        One tuple per event, its key and the event, made inline and sorted as they are (a call or
        a second tuple per event was a fifth of the assembly's ordering cost); the arrival
        position breaks the last ties (a span's own order), so events are never compared. A
        span's depth is walked once, for its first opening or closing record."""
        depth_of = self.depth_of
        keyed: list[tuple[int, int, int, str, int, JournalEvent]] = []
        append = keyed.append
        depths: dict[str, int] = {}
        for span_hex, events in normalized:
            for event in events:
                span_id = event.span_id or span_hex
                event_type = event.type
                if event_type in _OPENING or event_type in _CLOSING:
                    depth = depths.get(span_id)
                    if depth is None:
                        depth = depths[span_id] = depth_of(span_id)
                    if event_type in _OPENING:
                        append((event.at_ns // 1000, 0, depth, span_id, len(keyed), event))
                    else:
                        append((event.at_ns // 1000, 3 if event_type == _SPAN else 2, -depth, span_id, len(keyed), event))
                else:
                    append((event.at_ns // 1000, 1, 0, span_id, len(keyed), event))
        keyed.sort()
        return [entry[5] for entry in keyed]
