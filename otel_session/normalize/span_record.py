"""The ``span`` record: one span as it ended, for readers that want what no other record keeps.

Contract::

    record = span_record(span, events)  # a JournalEvent of type "span" (raw values: redact it next);
                                        # ``events``: the span's other records (normalize_span's)
    payload = bounded(redacted_payload) # sizes, nesting and counts bounded, a ``cut`` count where cut

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
and scanning a model call's whole history again per span would cost several times the rest. Values are redacted like any attribute
(``redact.attributes``, through ``Redactor.redact_payload``) and then bounded (``bounded``): a
string past ``MAX_TEXT`` characters keeps its start and ends with ``…[cut N chars]``, a value
nested past ``MAX_NESTING`` levels becomes ``NESTING_MARKER``, a map past ``MAX_ENTRIES`` entries
or a list past ``MAX_ITEMS`` items keeps its first ones, and past ``MAX_RECORD_CHARS`` characters
of text in all the rest is left out; ``cut`` counts, per section, what went.
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
    "MAX_ENTRIES",
    "MAX_ITEMS",
    "MAX_NESTING",
    "MAX_RECORD_CHARS",
    "MAX_TEXT",
    "NESTING_MARKER",
    "bounded",
    "span_record",
]

MAX_TEXT = 4096
"""Characters of one string (a value, a name), at most."""
MAX_KEY = 256
"""Characters of one attribute key, at most."""
MAX_ENTRIES = 128
"""Entries of one attribute map (the span's, the resource's, an event's, a link's, a nested one)."""
MAX_ITEMS = 128
"""Items of one list: events, links, an array value."""
MAX_NESTING = 8
"""Levels of maps and arrays inside one attribute value."""
MAX_RECORD_CHARS = 256 * 1024
"""Characters of text in one record, at most (the writer refuses a record past 1 MiB)."""
NESTING_MARKER = f"[cut: nested deeper than {MAX_NESTING} levels]"

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


def bounded(payload: Mapping[str, Any]) -> dict[str, Any]:
    """``payload`` (a redacted ``span`` record's) within the bounds, ``cut`` saying what went.

    Events and links are kept whole (their own fields, their attribute map bounded) or left out
    whole; in attribute maps, entries and values are cut."""
    bounds = _Bounds()
    result: dict[str, Any] = {}
    for key, value in payload.items():
        if key == "cut":
            continue
        if key in _ATTRIBUTE_MAPS and isinstance(value, Mapping):
            result[key] = bounds.mapping(value, key, 0)
        elif key in _ENTRY_LISTS and isinstance(value, (list, tuple)):
            result[key] = bounds.entries(value, key)
        else:
            result[key] = bounds.value(value, key, 0)
    if bounds.cut:
        result["cut"] = bounds.cut
    return result


_ATTRIBUTE_MAPS = frozenset({"attributes", "resource"})
_ENTRY_LISTS = frozenset({"events", "links"})


class _Bounds:
    """One record's walk: the text left in its budget and the counts of what was cut, by section."""

    __slots__ = ("cut", "left")

    def __init__(self) -> None:
        self.left = MAX_RECORD_CHARS
        self.cut: dict[str, int] = {}

    def _count(self, section: str, number: int = 1) -> None:
        self.cut[section] = self.cut.get(section, 0) + number

    def text(self, value: str, section: str, limit: int = MAX_TEXT) -> str:
        size = len(value)
        if size <= limit and size <= self.left:
            self.left -= size
            return value
        keep = max(0, min(limit, self.left))
        self.left -= keep
        self._count(section)
        return f"{value[:keep]}…[cut {size - keep} chars]"

    def entries(self, entries: list[Any] | tuple[Any, ...], section: str) -> list[Any]:
        """Events or links: each whole (its fields bounded, its attribute map too) while the bounds last."""
        result: list[Any] = []
        for number, entry in enumerate(entries):
            if number >= MAX_ITEMS or self.left <= 0:
                self._count(section, len(entries) - number)
                break
            if isinstance(entry, Mapping):
                result.append({key: self.mapping(item, section, 0) if key == "attributes" and isinstance(item, Mapping)
                               else self.value(item, section, 0) for key, item in entry.items()})
            else:
                result.append(self.value(entry, section, 0))
        return result

    def value(self, value: Any, section: str, depth: int) -> Any:
        """One value inside ``depth`` levels of maps and arrays of its attribute value."""
        if isinstance(value, str):
            return self.text(value, section)
        if isinstance(value, (Mapping, list, tuple)):
            if depth >= MAX_NESTING:
                self._count(section)
                return NESTING_MARKER
            return self.mapping(value, section, depth + 1) if isinstance(value, Mapping) else self.items(value, section, depth + 1)
        return value

    def mapping(self, value: Mapping[Any, Any], section: str, depth: int) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for number, (key, item) in enumerate(value.items()):
            if number >= MAX_ENTRIES or self.left <= 0:
                self._count(section, len(value) - number)
                break
            result[self.text(str(key), section, MAX_KEY)] = self.value(item, section, depth)
        return result

    def items(self, value: list[Any] | tuple[Any, ...], section: str, depth: int) -> list[Any]:
        result = []
        for number, item in enumerate(value):
            if number >= MAX_ITEMS or self.left <= 0:
                self._count(section, len(value) - number)
                break
            result.append(self.value(item, section, depth))
        return result
