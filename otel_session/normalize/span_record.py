"""The ``span`` record: one span as it ended, for readers that want what no other record keeps.

Contract::

    record = span_record(span, events)  # a JournalEvent of type "span" (raw values: redact it next);
                                        # ``events``: the span's other records (normalize_span's)

Opt-in (``OTEL_SESSION_SPAN_RECORDS=on``, the collector's ``--span-records``): both recording
paths append one per span they journal, after that span's other records. Its ``at`` is the span's
end; ``trace_id`` and ``span_id`` are the span's. Payload (``docs/bundle-format.md``)::

    name, kind ("internal" | "server" | "client" | "producer" | "consumer"),
    started_at, ended_at (RFC 3339, as ``at``), status {code ("unset" | "ok" | "error"), description?},
    parent_span_id (hex; null: a root), scope {name, version?},
    attributes {…}, events [{name, at, attributes}], links [{trace_id, span_id, attributes}],
    resource {…}, cut? {section: how many entries, items or values were cut}

``events`` leaves out the span events journaled as records of their own (this project's
``otel_session.*`` events, GenAI message events). Likewise an attribute that holds the messages or
the tool call the span's own records were made from (``gen_ai.input.messages``, ``input.value``,
``gen_ai.tool.call.arguments``, ``otel_session.message.content`` …: ``CONTENT_ATTRIBUTES``) keeps
its key with ``IN_RECORDS`` as its value when the span's records include messages (for message
content) or a tool execution (for tool content): its content is in those records, redacted once,
and scanning a model call's whole history again per span would cost several times the rest.
Values are redacted like any attribute (``redact.attributes``, through ``Redactor.redact_event``)
and then bounded (``redact.bounds``), ``cut`` counting, per section, what the bounds left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from otel_session.core import semconv as sc
from otel_session.core.journal import EventType, format_timestamp
from otel_session.normalize.codec import SPAN_EVENTS
from otel_session.normalize.genai_messages import DETAILS_EVENT, ROLE_EVENTS
from otel_session.normalize.spans import JournalEvent, SpanView

__all__ = [
    "CONTENT_ATTRIBUTES",
    "IN_RECORDS",
    "JOURNALED_EVENTS",
    "span_record",
]


JOURNALED_EVENTS = frozenset(
    {*SPAN_EVENTS, *ROLE_EVENTS, "gen_ai.choice", DETAILS_EVENT, "gen_ai.content.prompt", "gen_ai.content.completion"}
)
"""Span events that become records of their own: left out of the ``span`` record's ``events``."""

IN_RECORDS = "[in this span's records]"
"""The value of an attribute whose content the span's own records hold (see the module docstring)."""
_MESSAGE_ATTRIBUTES = frozenset({
    "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions", "gen_ai.prompt",
    "gen_ai.completion", "input.value", "output.value", "traceloop.entity.input", "traceloop.entity.output",
    sc.MESSAGE_CONTENT,
})
_MESSAGE_PREFIXES = ("gen_ai.prompt.", "gen_ai.completion.", "llm.input_messages.", "llm.output_messages.")
_TOOL_ATTRIBUTES = frozenset({
    sc.TOOL_CALL_ARGUMENTS, sc.TOOL_CALL_RESULT, "input.value", "output.value", "traceloop.entity.input",
    "traceloop.entity.output",
})
CONTENT_ATTRIBUTES = _MESSAGE_ATTRIBUTES | _TOOL_ATTRIBUTES
"""Attributes whose content becomes message or tool records (``IN_RECORDS`` in the ``span`` record then)."""
_MESSAGE_RECORDS = frozenset({EventType.MESSAGE_STARTED.value, EventType.MESSAGE_FINISHED.value,
                              EventType.ASSISTANT_DELTA.value})
_TOOL_RECORDS = frozenset({EventType.TOOL_EXECUTION_STARTED.value, EventType.TOOL_EXECUTION_FINISHED.value})

_KINDS = ("internal", "server", "client", "producer", "consumer")
_SPAN = EventType.SPAN.value


def _attributes(attributes: Mapping[str, Any], events: Sequence[JournalEvent]) -> dict[str, Any]:
    """The span's attributes, those its records hold as ``IN_RECORDS``."""
    types = {event.type for event in events}
    messages, tools = not _MESSAGE_RECORDS.isdisjoint(types), not _TOOL_RECORDS.isdisjoint(types)
    if not (messages or tools):
        return dict(attributes)
    return {
        key: IN_RECORDS if (messages and (key in _MESSAGE_ATTRIBUTES or key.startswith(_MESSAGE_PREFIXES))
                            or tools and key in _TOOL_ATTRIBUTES) else value
        for key, value in attributes.items()
    }


def span_record(span: SpanView, events: Sequence[JournalEvent] = ()) -> JournalEvent:
    """The ``span`` record of ``span`` (raw values; see the module docstring), ``events`` its other records."""
    status: dict[str, Any] = {"code": span.status_code}
    if span.status_message:
        status["description"] = span.status_message
    scope: dict[str, Any] = {"name": span.scope_name}
    if span.scope_version:
        scope["version"] = span.scope_version
    parent = span.parent_span_id
    kind = span.kind
    payload = {
        "name": span.name,
        "kind": _KINDS[kind] if type(kind) is int and 0 <= kind < len(_KINDS) else "internal",
        "started_at": format_timestamp(span.start_time_ns),
        "ended_at": format_timestamp(span.end_time_ns),
        "status": status,
        "parent_span_id": f"{parent:016x}" if parent is not None else None,
        "scope": scope,
        "attributes": _attributes(span.attributes, events),
        "events": [
            {"name": event.name, "at": format_timestamp(event.time_ns), "attributes": dict(event.attributes)}
            for event in span.events if event.name not in JOURNALED_EVENTS
        ],
        "links": [
            {"trace_id": f"{link.trace_id:032x}", "span_id": f"{link.span_id:016x}", "attributes": dict(link.attributes)}
            for link in span.links
        ],
        "resource": dict(span.resource_attributes),
    }
    turn_index = span.attributes.get(sc.TURN_INDEX)
    return JournalEvent(
        _SPAN, span.end_time_ns, payload, turn_index=turn_index if type(turn_index) is int else None,
        trace_id=span.trace_id_hex, span_id=span.span_id_hex,
    )
