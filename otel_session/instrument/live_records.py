"""Records the stream tap journaled live, left out when their span is journaled at its end.

Contract::

    remember_live(trace_id, span_id, message_id, LIVE_OUTPUT)   # the tap (``openai_streams``)
    events = without_live_records(span, events)                  # the span processor, at the span's end

The tap journals a streamed call's new input messages (``LIVE_INPUT``: started and finished) and
its reply's start and deltas (``LIVE_OUTPUT``) as they happen; the span's normalization at its end
holds them too, and only its reply's final content is new. Kept per span until that span ends
(bounded: the oldest spans are forgotten first).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from otel_session.core import semconv as sc
from otel_session.core.journal import EventType
from otel_session.normalize import JournalEvent, SpanData

__all__ = ["LIVE_INPUT", "LIVE_OUTPUT", "remember_live", "without_live_records"]

LIVE_INPUT = frozenset({EventType.MESSAGE_STARTED.value, EventType.MESSAGE_FINISHED.value})
LIVE_OUTPUT = frozenset({EventType.MESSAGE_STARTED.value, EventType.ASSISTANT_DELTA.value})
_UPSTREAM_DROP = EventType.UPSTREAM_DROP.value
_MAX_LIVE_SPANS = 4096

_live: OrderedDict[tuple[int, int], dict[str, frozenset[str]]] = OrderedDict()
"""(trace id, span id) → message id → the record types journaled live for it."""
_live_lock = threading.Lock()


def without_live_records(span: SpanData, events: list[JournalEvent]) -> list[JournalEvent]:
    """``events`` (the span's, normalized) without what was journaled live for it: the call's new
    input messages, its output messages' starts and deltas, and the drop of the deltas the span had
    no room for (the journal has them all)."""
    if not _live:
        return events
    with _live_lock:
        live = _live.pop((span.trace_id, span.span_id), None)
    if live is None:
        return events
    return [
        event for event in events
        if not (event.type in live.get(event.message_id, ())
                or (event.type == _UPSTREAM_DROP and event.payload.get("event") == sc.EVENT_DELTA))
    ]


def remember_live(trace_id: int, span_id: int, message_id: str, types: frozenset[str]) -> None:
    with _live_lock:
        _live.setdefault((trace_id, span_id), {})[message_id] = types
        while len(_live) > _MAX_LIVE_SPANS:
            _live.popitem(last=False)
