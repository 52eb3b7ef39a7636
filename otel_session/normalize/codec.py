"""The project's own conventions both ways: journal records <-> span events and span attributes.

Contract::

    name = EVENT_NAMES[event_type]            # the span event a record travels as (None: span attributes)
    attributes = encode(event_type, payload)  # a (redacted) record's fields as span (event) attributes
    encode_delta = encoder(event_type)         # the same, looked up once
    payload = decode(event_type, attributes)  # and back: the collector path (``normalize/own.py``)
    SPAN_EVENTS[name] -> event type

One table (``_SPELLINGS``) says, per record type, which payload key travels as which attribute
(``docs/conventions.md``) and in which form: as it is, as a boolean, as a list, or as JSON text
(structured values: slot values, tool arguments and results, message content, candidates).
The in-process API encodes the records it journals onto its spans with it, and ``own.py`` decodes
finished spans with it, so both paths give the same journal. Adding a record type or a field
touches this table (and the reducers and the docs), nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from otel_session.core import semconv as sc
from otel_session.core.journal import EventType, encode_json

__all__ = ["EVENT_NAMES", "SPAN_EVENTS", "Field", "decode", "encode", "encoder", "to_json"]

_ABSENT = object()


def to_json(value: Any) -> str:
    """A structured value as attribute text, by the journal's rules (``journal.encode_json``: never
    raises; containers nested past ``journal.MAX_DEPTH`` are cut with a marker)."""
    return encode_json(value).decode()


def _from_json(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return value


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


# form -> (encode, decode); "plain" values are OpenTelemetry attribute values already.
_FORMS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "plain": (lambda value: value, lambda value: value),
    "bool": (bool, bool),
    "list": (list, _as_list),
    "json": (to_json, _from_json),
    "json_list": (to_json, lambda value: _as_list(_from_json(value))),
}


@dataclass(frozen=True, slots=True)
class Field:
    """One payload key and the attribute it travels as.

    ``when`` says when a decoded record has the key: ``always`` (``default`` when the attribute is
    absent), ``present`` (only when the attribute is there) or ``truthy`` (only when it is set and
    true). ``fallback`` is an attribute read when ``attribute`` is absent. Encoding leaves out keys
    the payload lacks and None values, except in JSON form (``null`` is a value there).
    """

    key: str
    attribute: str
    form: str = "plain"
    when: str = "always"
    default: Any = None
    fallback: str | None = None


@dataclass(frozen=True, slots=True)
class _Spelling:
    event_name: str | None
    fields: tuple[Field, ...]


_E = EventType
_SPELLINGS: dict[EventType, _Spelling] = {
    # span events
    _E.SLOT_WRITE: _Spelling(sc.EVENT_SLOT_WRITE, (
        Field("slot", sc.SLOT_NAME),
        Field("value", sc.SLOT_VALUE, "json"),
        Field("previous", sc.SLOT_PREVIOUS, "json"),
        Field("source", sc.SLOT_SOURCE),
    )),
    _E.SLOT_DIFF: _Spelling(sc.EVENT_SLOT_DIFF, (
        Field("slot", sc.SLOT_NAME),
        Field("value", sc.SLOT_VALUE, "json"),
        Field("previous", sc.SLOT_PREVIOUS, "json"),
    )),
    _E.GUARD_EVALUATED: _Spelling(sc.EVENT_GUARD, (
        Field("name", sc.GUARD_NAME),
        Field("passed", sc.GUARD_PASSED, "bool"),
        Field("state", sc.GUARD_STATE, when="present"),
    )),
    _E.TRANSITION_VERDICT: _Spelling(sc.EVENT_TRANSITION_VERDICT, (
        Field("from", sc.TRANSITION_FROM),
        Field("to", sc.TRANSITION_TO),
        Field("reason", sc.TRANSITION_REASON),
        Field("candidates", sc.TRANSITION_CANDIDATES, "json_list", default="[]"),
        Field("candidates_truncated", sc.TRANSITION_CANDIDATES_TRUNCATED, when="truthy"),
    )),
    _E.ASSISTANT_DELTA: _Spelling(sc.EVENT_DELTA, (
        Field("index", sc.DELTA_INDEX, default=0),
        Field("kind", sc.DELTA_KIND, default="text"),
        Field("delta", sc.DELTA_TEXT, default=""),
    )),
    _E.TOOL_EXECUTION_UPDATED: _Spelling(sc.EVENT_TOOL_UPDATE, (
        Field("detail", sc.TOOL_UPDATE_DETAIL, when="present"),
    )),
    # span attributes: a run's, turn's, message's or tool's span at its start and at its end
    _E.RUN_STARTED: _Spelling(None, (
        Field("kind", sc.RUN_KIND, default="live"),
        Field("agent", sc.AGENT_NAME, when="truthy"),
        Field("eval_id", sc.EVAL_ID, when="truthy"),
    )),
    _E.RUN_FINISHED: _Spelling(None, (
        Field("status", sc.RUN_STATUS),
    )),
    _E.TURN_STARTED: _Spelling(None, (
        Field("state", sc.STATE_PREVIOUS),
        Field("required_slots", sc.REQUIRED_SLOTS, "list"),
        Field("source", sc.TURN_SOURCE, when="present"),
    )),
    _E.TURN_FINISHED: _Spelling(None, (
        Field("state", sc.STATE, fallback=sc.STATE_PREVIOUS),
        Field("required_slots", sc.REQUIRED_SLOTS_AFTER, "list", fallback=sc.REQUIRED_SLOTS),
        Field("missing_required_slots", sc.MISSING_REQUIRED_SLOTS, "list", when="present"),
        Field("interrupted", sc.TURN_INTERRUPTED, when="truthy"),
        Field("guards_truncated", sc.GUARDS_TRUNCATED, when="truthy"),
    )),
    _E.MESSAGE_STARTED: _Spelling(None, (
        Field("role", sc.MESSAGE_ROLE),
    )),
    _E.MESSAGE_FINISHED: _Spelling(None, (
        Field("settled", sc.MESSAGE_SETTLED, "bool"),
        Field("content", sc.MESSAGE_CONTENT, "json_list", default="[]"),
        Field("stop_reason", sc.MESSAGE_STOP_REASON, when="present"),
        Field("model", sc.RESPONSE_MODEL, when="present"),
        Field("usage", sc.MESSAGE_USAGE, "json", when="present"),
    )),
    _E.TOOL_EXECUTION_STARTED: _Spelling(None, (
        Field("name", sc.TOOL_NAME),
        Field("arguments", sc.TOOL_CALL_ARGUMENTS, "json"),
    )),
    _E.TOOL_EXECUTION_FINISHED: _Spelling(None, (
        Field("status", sc.TOOL_STATUS),
        Field("result", sc.TOOL_CALL_RESULT, "json", when="present"),
        Field("error", sc.TOOL_ERROR, when="present"),
    )),
}

EVENT_NAMES: dict[str, str | None] = {
    event_type.value: spelling.event_name for event_type, spelling in _SPELLINGS.items()
}
"""Record type -> the span event it travels as (None: it travels as its span's attributes)."""

SPAN_EVENTS: dict[str, str] = {
    spelling.event_name: event_type.value for event_type, spelling in _SPELLINGS.items() if spelling.event_name
}
"""Span event name -> record type."""

# Encoding runs on the app's hot path (every delta, every slot write): each record type's encoder
# is generated from the table as straight-line code, as ``dataclasses`` generates ``__init__``.
def _encoder(event_type: EventType, fields: tuple[Field, ...]) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    lines = [f"def encode_{event_type.value}(payload):", "    attributes = {}", "    get = payload.get"]
    forms: dict[str, Any] = {"_ABSENT": _ABSENT}
    for number, f in enumerate(fields):
        form = f"_form{number}"
        forms[form] = _FORMS[f.form][0]
        value = "value" if f.form == "plain" else f"{form}(value)"
        if f.form.startswith("json"):  # None is a value in JSON ("null")
            lines += [f"    value = get({f.key!r}, _ABSENT)", "    if value is not _ABSENT:"]
        else:
            lines += [f"    value = get({f.key!r})", "    if value is not None:"]
        lines.append(f"        attributes[{f.attribute!r}] = {value}")
    lines.append("    return attributes")
    exec("\n".join(lines), forms)  # noqa: S102 - code made from the table above, no outside input
    return forms[f"encode_{event_type.value}"]


_ENCODERS = {event_type.value: _encoder(event_type, spelling.fields) for event_type, spelling in _SPELLINGS.items()}
_DECODERS: dict[str, tuple[tuple[str, str, str | None, str, Any, Callable[[Any], Any]], ...]] = {
    event_type.value: tuple(
        (f.key, f.attribute, f.fallback, f.when, f.default, _FORMS[f.form][1]) for f in spelling.fields
    )
    for event_type, spelling in _SPELLINGS.items()
}


def encode(event_type: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes a record of ``event_type`` travels as (its payload already redacted)."""
    return _ENCODERS[event_type](payload)


def encoder(event_type: str) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """``encode`` for one record type, looked up once (for a caller on the hot path)."""
    return _ENCODERS[event_type]


def decode(
    event_type: str, attributes: Mapping[str, Any], defaults: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The payload of a record of ``event_type`` from the attributes it travelled as.

    ``defaults`` overrides a field's default where the span itself says more (its status).
    """
    payload: dict[str, Any] = {}
    for key, attribute, fallback, when, default, form in _DECODERS[event_type]:
        value = attributes.get(attribute, _ABSENT)
        if value is _ABSENT and fallback is not None:
            value = attributes.get(fallback, _ABSENT)
        if value is _ABSENT or (when == "truthy" and not value):
            if when != "always":
                continue
            value = defaults[key] if defaults is not None and key in defaults else default
        payload[key] = form(value)
    return payload
