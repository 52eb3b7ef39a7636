"""``otel_session.delta`` span events on a third-party model-call span: its replies' deltas.

Contract::

    deltas = deltas_of(span)          # {output message position: [(at_ns, payload)]}, in event order
    record = dropped_deltas(span)     # an ``upstream_drop`` payload when the span could not hold them all

The ``otel_session`` instrumentor (``otel_session.instrument.openai_streams``) puts one event per
released delta on the span an instrumentor such as openai-v2 made for a streamed call: attributes
``otel_session.delta.message`` (the output message's position: the choice index), ``.index`` (the
content block), ``.kind`` and ``.text`` (redacted already). A span holds a bounded number of
events: the deltas beyond its room are not added, and the span says how many in
``otel_session.deltas.dropped``. The normalizer turns them into ``assistant_delta`` records of the
call's output messages (``{span_id}-out-{position}``), between their start and their final content.
"""

from __future__ import annotations

from typing import Any

from otel_session.core import semconv as sc
from otel_session.normalize.view import SpanView

__all__ = ["DELTAS_DROPPED", "DELTA_MESSAGE", "deltas_of", "dropped_deltas"]

DELTA_MESSAGE = "otel_session.delta.message"
DELTAS_DROPPED = "otel_session.deltas.dropped"


def deltas_of(span: SpanView) -> dict[int, list[tuple[int, dict[str, Any]]]]:
    """The span's delta events by output message position: ``(at_ns, assistant_delta payload)``."""
    found: dict[int, list[tuple[int, dict[str, Any]]]] = {}
    for event in span.events:
        if event.name != sc.EVENT_DELTA:
            continue
        attributes = event.attributes
        position, index, text = attributes.get(DELTA_MESSAGE), attributes.get(sc.DELTA_INDEX), attributes.get(sc.DELTA_TEXT)
        if position.__class__ is not int or index.__class__ is not int or not isinstance(text, str) or position < 0:
            continue
        kind = attributes.get(sc.DELTA_KIND)
        payload = {"index": index, "kind": kind if isinstance(kind, str) else "text", "delta": text}
        found.setdefault(position, []).append((event.time_ns, payload))
    return found


def dropped_deltas(span: SpanView) -> dict[str, Any] | None:
    """The ``upstream_drop`` payload for deltas the span had no room for, if it lost any."""
    dropped = span.attributes.get(DELTAS_DROPPED)
    if dropped.__class__ is not int or dropped <= 0:
        return None
    return {"dropped_events": dropped, "dropped_attributes": 0, "span_name": span.name, "event": sc.EVENT_DELTA}
