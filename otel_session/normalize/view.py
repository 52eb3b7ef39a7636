"""The normalizer's one input: a read-only view of a finished span, whatever it came from.

Contract::

    span: SpanView                      # trace_id, span_id, parent_span_id (None: a root), name,
                                        # start_time_ns, end_time_ns, kind, status_code, status_message,
                                        # attributes, events, resource_attributes, scope_name,
                                        # dropped_attributes, dropped_events, links, scope_version
    span.run_id, span.trace_id_hex, span.span_id_hex, span.service_name
    joined = span.with_events(extra)    # a SpanData: this span with more events, in time order
    other = span.replaced(attributes=…) # a SpanData: this span with some fields replaced

    span = SdkSpan(readable_span)       # the in-process path's view

Implementations: ``SpanData`` (plain values: tests, spans joined with log events), the collector's
view over a protobuf ``Span`` (``collector.otlp.OtlpSpan``) and ``SdkSpan`` over the SDK's
``ReadableSpan`` (the span exporter and the span processor). The two views are ``LazySpan``s: the fields routing
needs are read when the view is made, the others (``attributes``, ``events``, …) on first use,
then kept as plain slots, so a span that is held, rejected or never mapped is never decoded and
a mapping reads a decoded field as cheaply as a ``SpanData`` field.
"""

from __future__ import annotations

from typing import Any

from otel_session.normalize.spans import FIELDS, EventView, SpanEventData, SpanLinkData, SpanMethods, SpanView

__all__ = ["EventView", "LazySpan", "SdkSpan", "SpanView"]


class LazySpan(SpanMethods):
    """A view whose fields are read from its source on first use (``_load_<field>``), then kept.

    Subclasses set the fields they read eagerly in ``__init__`` and define a ``_load_<field>``
    for each of the others; an unset slot falls through to ``__getattr__`` once.
    """

    __slots__ = FIELDS

    def __getattr__(self, name: str) -> Any:
        load = getattr(type(self), f"_load_{name}", None) if not name.startswith("_") else None
        if load is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        value = load(self)
        object.__setattr__(self, name, value)
        return value


class SdkSpan(LazySpan):
    """A view over an SDK ``ReadableSpan``: attributes, events and the resource copied on first use."""

    __slots__ = ("_span",)

    def __init__(self, span: Any) -> None:
        self._span = span
        context = span.context
        parent = span.parent
        start = span.start_time or 0
        self.trace_id = context.trace_id
        self.span_id = context.span_id
        self.parent_span_id = parent.span_id if parent is not None else None
        self.name = span.name
        self.start_time_ns = start
        self.end_time_ns = span.end_time or start
        self.status_code = span.status.status_code.name.lower()
        self.scope_name = span.instrumentation_scope.name if span.instrumentation_scope is not None else ""
        self.dropped_attributes = span.dropped_attributes
        self.dropped_events = span.dropped_events

    def _load_attributes(self) -> dict[str, Any]:
        return dict(self._span.attributes or {})

    def _load_events(self) -> tuple[SpanEventData, ...]:
        return tuple(SpanEventData(event.name, event.timestamp, dict(event.attributes or {}))
                     for event in self._span.events)

    def _load_status_message(self) -> str | None:
        return self._span.status.description

    def _load_kind(self) -> int:
        return self._span.kind.value

    def _load_resource_attributes(self) -> dict[str, Any]:
        resource = self._span.resource
        return dict(resource.attributes) if resource is not None else {}

    def _load_links(self) -> tuple[SpanLinkData, ...]:
        return tuple(SpanLinkData(link.context.trace_id, link.context.span_id, dict(link.attributes or {}))
                     for link in self._span.links)

    def _load_scope_version(self) -> str:
        scope = self._span.instrumentation_scope
        return (scope.version or "") if scope is not None else ""
