"""Normalize: finished spans (from the SDK or from OTLP) → journal events (SPEC §3, §4).

Contract::

    span = SdkSpan(readable_span)        # the in-process path's view of a finished span
    span = OtlpSpan(...)                 # the collector's (``collector.otlp.spans_of``), decoded lazily
    events: list[JournalEvent] = normalize_span(span)   # any ``SpanView`` (``view``), SpanData too

One normalizer serves both paths, through one read-only view interface (``normalize.view``). ``JournalEvent`` holds raw (unredacted) values; the redact stage
runs next, then the writer stamps ``seq`` and ``at``. Mappings live beside this module:
``own`` for this project's ``otel_session.*`` spans and events, ``genai`` for the OpenTelemetry
GenAI conventions (old and new spellings), OpenInference and OpenLLMetry; ``state`` for the state a
framework puts on its spans (pydantic-ai's structured output) as slots.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from otel_session.normalize import genai, own, state, strands, voice
from otel_session.core.semconv import RUN_ID
from otel_session.normalize.spans import (
    SESSION_ID_KEYS,
    DetachedEvent,
    JournalEvent,
    SpanData,
    SpanEventData,
    SpanLinkData,
    session_id_of,
    upstream_drop_event,
)
from otel_session.normalize.view import LazySpan, SdkSpan, SpanView

__all__ = [
    "SESSION_ID_KEYS",
    "DetachedEvent",
    "JournalEvent",
    "LazySpan",
    "SdkSpan",
    "SpanData",
    "SpanEventData",
    "SpanLinkData",
    "SpanView",
    "detached_event",
    "normalize_span",
    "session_id_of",
]


def detached_event(
    trace_id: int, span_id: int, name: Any, time_ns: int, attributes: dict[str, Any], body: Any = None
) -> DetachedEvent | None:
    """The span event a log record stands for, or None when it is none the normalizer reads.

    A log record counts when it was emitted in a span (non-zero ids) and its event name
    (``event_name``, or the older ``event.name`` attribute, as ``name`` None) is a GenAI message
    event. Its body's fields join ``attributes`` (taken over); a body that is not a map becomes
    ``content``. One rule for both paths: OTLP logs at the collector, SDK log records in process.
    """
    if name is None or name == "":
        name = attributes.get("event.name")
    if not (trace_id and span_id and isinstance(name, str) and genai.is_message_event(name)):
        return None
    if body is not None:
        attributes.update(body if isinstance(body, Mapping) else {"content": body})
    return DetachedEvent(trace_id, span_id, SpanEventData(name, time_ns, attributes))


# The mapping of a span by its instrumentation scope: one probe for most spans (``own`` first:
# a span re-emitted by another SDK is ours by its attributes, ``own.is_own_span``).
_MAPPERS: dict[str, Callable[[SpanView], list[JournalEvent]]] = {
    own.SCOPE_NAME: own.map_span, strands.SCOPE: strands.map_span, state.SCOPE: state.map_span,
    **{scope: voice.map_span for scope in voice.SCOPES},
}


def normalize_span(span: SpanView) -> list[JournalEvent]:
    """Journal events of one finished span, in event-time order (start, span events, end)."""
    if RUN_ID in span.attributes and own.is_own_span(span):
        events = own.map_span(span)
    else:
        events = _MAPPERS.get(span.scope_name, genai.map_span)(span)
    if span.dropped_events or span.dropped_attributes:
        events.append(upstream_drop_event(span))
    return events
