"""Redaction of journal records: each record type's payload fields by the policy (SPEC §5.2, §6).

``RecordRedaction`` is the half of :class:`~otel_session.redact.redactor.Redactor` that knows the
record types: ``redact_payload(type, payload)``, ``redact_events(events)`` (a span's or request's
fresh records in place, each message block's deltas as one ``DeltaStream``) and
``redact_event(event)``. It applies the value functions the redactor builds from its policy
(``text``, ``tool_arguments``, ``identifier`` …) and adds none of its own.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any, ClassVar

from otel_session.core.journal import EventType
from otel_session.core.log import get_logger
from otel_session.normalize import JournalEvent
from otel_session.redact.bounds import bounded
from otel_session.redact.attributes import AttributeRedaction
from otel_session.redact.policy import REDACTED_ERROR
from otel_session.redact.stream import DeltaStream

__all__ = ["RecordRedaction"]

logger = get_logger(__name__)


class RecordRedaction:
    """Record-level redaction over the value functions of a ``Redactor`` (its base class)."""

    def redact_payload(self, event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
        """``payload`` with the fields of ``event_type`` redacted (SPEC §5.2 table): a copy, or
        ``payload`` itself when it holds only text the policy leaves as it is. Neither is changed."""
        try:
            return self._handlers.get(event_type, self._free_payload)(payload)
        except Exception:  # noqa: BLE001 - never pass a payload through unredacted
            return _failed_payload(event_type)

    def redact_events(self, events: list[JournalEvent]) -> list[JournalEvent]:
        """Redact the events of one span or export request in place, in order, and return them.

        For callers that own the events (freshly normalized): each payload is replaced by its
        redaction (``redact_payload``), tool call and message ids by ``identifier`` (each distinct
        id once a call: a message's or a tool call's records share it), and the
        ``assistant_delta`` events of each message block
        are redacted as one :class:`DeltaStream`: each delta keeps its own (redacted) text, a
        detection split across deltas is masked in the delta where it starts.
        """
        streams: dict[tuple[str | None, int], DeltaStream[JournalEvent]] = {}
        failed: set[tuple[str | None, int]] = set()
        released: list[tuple[JournalEvent, str]] = []
        handlers, free_payload = self._handlers, self._free_payload
        ids: dict[str, str] = {}
        stored_id = self._tool_call_id
        for event in events:
            tool_call_id = event.tool_call_id
            if tool_call_id is not None:
                stored = ids.get(tool_call_id) if type(tool_call_id) is str else None
                event.tool_call_id = stored if stored is not None else stored_id(tool_call_id, ids, event.span_id)
            message_id = event.message_id
            if message_id is not None:
                stored = ids.get(message_id) if type(message_id) is str else None
                event.message_id = stored if stored is not None else stored_id(message_id, ids, event.span_id)
            kind = event.type
            block = _delta_block(event) if kind == _ASSISTANT_DELTA else None
            if block is None:
                try:
                    event.payload = handlers.get(kind, free_payload)(event.payload or {})
                except Exception:  # noqa: BLE001 - never pass a payload through unredacted
                    event.payload = _failed_payload(kind)
                continue
            stream = streams.get(block)
            if stream is None:
                stream = streams[block] = self.delta_stream()
            delta = event.payload["delta"]
            event.payload = {**event.payload, "delta": REDACTED_ERROR}  # until its text is released
            if block in failed:
                continue
            try:
                released += stream.feed(delta if isinstance(delta, str) else str(delta), event)
            except Exception:  # noqa: BLE001 - never pass a delta through unredacted
                logger.warning("redaction of a delta failed; its block's deltas were replaced", exc_info=True)
                failed.add(block)
        for block, stream in streams.items():
            if block not in failed:
                try:
                    released += stream.flush()
                except Exception:  # noqa: BLE001
                    logger.warning("redaction of a delta failed; its block's deltas were replaced", exc_info=True)
        for event, text in released:
            event.payload["delta"] = text
        return events

    def redact_event(self, event: JournalEvent) -> JournalEvent:
        """``event`` with its payload redacted by type: a copy, or ``event`` itself when its payload
        needed no redaction (see ``redact_payload``). Neither is changed."""
        payload = event.payload
        redacted = self.redact_payload(event.type, payload or {})
        ids = {name: redacted_id for name in ("tool_call_id", "message_id")
               if (value := getattr(event, name)) is not None
               and (redacted_id := self._tool_call_id(value, None, event.span_id)) is not value}
        if ids:
            return dataclasses.replace(event, payload=redacted, **ids)
        return event if redacted is payload else event.with_payload(redacted)

    def _tool_call_id(self, value: str, seen: dict[str, str] | None = None, span_id: str | None = None) -> str:
        """A record's tool call or message id (a model's, an integration's or an app's, so it may
        hold PII) as ``identifier`` gives it; ``value`` itself when it holds none or is a span id
        (random hex, the fallback ids ``msg-…``/``call-…`` and the GenAI mappings' ``{span id}-in-N``/
        ``-out-N`` are made of, where digit runs are chance). Kept in ``seen`` (a plain str only:
        a subclass may hash unlike its text). Any other value (an app's ``str`` subclass, a number)
        is stored as ``identifier`` gives its text.

        The mappings' own ids are told without the regex: the record's ``span_id`` (written as it
        is, so nothing new) followed by ``-in-N``/``-out-N`` (N < 1024) or nothing adds no text."""
        if type(value) is not str:
            return self.identifier(value)
        # A known clean id (a tool call's, again) or the record's own span id's skip the regex.
        if value in self._clean or value[:16] == span_id and value[16:] in _OWN_ID_SUFFIXES or _SPAN_ID(value):
            redacted = value
        else:
            redacted = self.identifier(value)
            if redacted == value:
                redacted = value
        if seen is not None:
            seen[value] = redacted
        return redacted

    def _slot_payload(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A slot write or diff: ``value`` and ``previous`` as ``slot_value`` gives them (the hot
        record of a dialogue: one allow-list check, and a hashed value found in the cache at once)."""
        result = dict(payload)
        slot = payload.get("slot", "")
        for key in _SLOT_LABEL_KEYS:  # the slot's name and source: vocabulary, scanned like it
            label = result.get(key)
            if type(label) is str:
                result[key] = self._scan(label)
        if (slot if type(slot) is str else str(slot)) in self._keep_slots:
            return result
        cached = self._slot_hashes
        for key in _SLOT_VALUE_KEYS:
            if key in result:
                value = result[key]
                redacted = cached.get(value) if cached is not None and type(value) is str else None
                result[key] = redacted if redacted is not None else self._guarded(self._slot_leaf, value)
        return result

    def _message_payload(self, payload: dict[str, Any]) -> dict[str, Any]:
        content = payload.get("content")
        if type(content) is list:
            # The common message, in line: every block a {..., "text"} object whose text redacts to itself.
            text = self.text
            clean = self._clean if self._scan_text else ()
            for block in content:
                if type(block) is not dict or "text" not in block:
                    break
                value = block["text"]
                if not (type(value) is str and value in clean) and text(value) is not value:
                    break
            else:
                return payload
        result = dict(payload)
        if isinstance(content, list):
            result["content"] = [
                {**block, "text": self.text(block["text"])} if isinstance(block, dict) and "text" in block
                else self.free_leaves(block)
                for block in content
            ]
        elif content is not None:
            result["content"] = self.free_leaves(content)
        return result

    def _delta_payload(self, payload: dict[str, Any]) -> dict[str, Any]:
        result = dict(payload)
        if "delta" in payload:
            result["delta"] = self.text(payload["delta"])
        return result

    def _tool_started_payload(self, payload: dict[str, Any]) -> dict[str, Any]:
        name = payload.get("name")
        redacted_name = self.identifier(name) if type(name) is str else name
        arguments = payload.get("arguments")
        redacted_arguments = self.tool_arguments(arguments) if "arguments" in payload else arguments
        if redacted_name is name and redacted_arguments is arguments:
            return payload  # nothing the policy changes: no copy
        result = dict(payload)
        if type(name) is str:
            result["name"] = redacted_name
        if "arguments" in payload:
            result["arguments"] = redacted_arguments
        return result

    def _tool_finished_payload(self, payload: dict[str, Any]) -> dict[str, Any]:
        result = payload  # copied only when the policy changes a value
        if "result" in payload:
            result = _with_value(result, payload, "result", self.tool_result(payload["result"]))
        if "error" in payload:
            result = _with_value(result, payload, "error", self.free_leaves(payload["error"]))
        if "detail" in payload:
            result = _with_value(result, payload, "detail", self.free_leaves(payload["detail"]))
        return result

    def _verdict_payload(self, payload: dict[str, Any]) -> dict[str, Any]:
        result = dict(payload)
        for key in ("reason", "candidates"):
            if key in payload:
                result[key] = self.free_leaves(payload[key])
        for key in ("from", "to"):  # states: vocabulary, scanned like a structural record's
            if type(payload.get(key)) is str:
                result[key] = self._scan(payload[key])
        return result

    def _free_payload(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A record of a type without a handler (a newer writer's): every leaf scanned as text."""
        return {key: (item if key in _STRUCTURAL_KEYS else self.free_leaves(item)) for key, item in payload.items()}

    def _structural_payload(self, payload: dict[str, Any]) -> dict[str, Any]:
        # The project's own vocabulary (states, slot and guard names, flags, counts): PII
        # detectors run over its strings in case an integration put user data there.
        scan, clean = self._scan, self._clean
        for item in payload.values():
            if type(item) is not str or item not in clean and scan(item) is not item:
                break
        else:
            return payload  # only text the scanner leaves as it is
        return {
            key: scan(item) if type(item) is str else self._map_leaves(item, self._scan_strings)
            for key, item in payload.items()
        }

    def _scan_strings(self, value: Any) -> Any:
        return self._scan(value) if isinstance(value, str) else value

    def _span_payload(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A ``span`` record (``normalize.span_record``): names and scope as ids, the status
        description as text, every attribute map by ``redact.attributes`` (the resource's as
        ids), its own vocabulary scanned; then bounded. Fields it does not know: as free text."""
        rules: AttributeRedaction = self._attribute_rules
        identifier = self.identifier
        result: dict[str, Any] = {}
        for key, value in payload.items():
            if key == "name":
                result[key] = identifier(value)
            elif key == "attributes" or key == "resource":
                result[key] = rules.redact(value, structural=key == "resource")
            elif key == "status":
                result[key] = {name: self.text(item) if name == "description" else self._map_leaves(item, self._scan_strings)
                               for name, item in value.items()}
            elif key == "scope":
                result[key] = {name: identifier(item) for name, item in value.items()}
            elif key == "events":
                result[key] = [{"name": identifier(event["name"]), "at": self._scan(event["at"]),
                                "attributes": rules.redact(event["attributes"])} for event in value]
            elif key == "links":
                result[key] = [{"trace_id": _hex_id(link["trace_id"], identifier), "span_id": _hex_id(link["span_id"], identifier),
                                "attributes": rules.redact(link["attributes"])} for link in value]
            elif key == "parent_span_id":
                result[key] = None if value is None else _hex_id(value, identifier)
            elif key in _SPAN_VOCABULARY:
                result[key] = self._map_leaves(value, self._scan_strings)
            else:
                result[key] = self.free_leaves(value)
        return bounded(result)


    _payload_handlers: ClassVar[dict[str, Callable[[RecordRedaction, dict[str, Any]], dict[str, Any]]]] = {
        EventType.SLOT_WRITE.value: _slot_payload,
        EventType.SLOT_DIFF.value: _slot_payload,
        EventType.MESSAGE_FINISHED.value: _message_payload,
        EventType.ASSISTANT_DELTA.value: _delta_payload,
        EventType.TOOL_EXECUTION_STARTED.value: _tool_started_payload,
        EventType.TOOL_EXECUTION_UPDATED.value: _tool_finished_payload,
        EventType.TOOL_EXECUTION_FINISHED.value: _tool_finished_payload,
        EventType.TRANSITION_VERDICT.value: _verdict_payload,
        EventType.RUN_STARTED.value: _structural_payload,
        EventType.TURN_STARTED.value: _structural_payload,
        EventType.TURN_FINISHED.value: _structural_payload,
        EventType.MESSAGE_STARTED.value: _structural_payload,
        EventType.GUARD_EVALUATED.value: _structural_payload,
        EventType.RUN_FINISHED.value: _structural_payload,
        EventType.UPSTREAM_DROP.value: _structural_payload,
        EventType.SPAN.value: _span_payload,
    }


_ASSISTANT_DELTA = EventType.ASSISTANT_DELTA.value


def _delta_block(event: JournalEvent) -> tuple[str | None, int] | None:
    """(message, content block) of an ``assistant_delta`` with text, else None."""
    payload = event.payload
    if event.type != _ASSISTANT_DELTA or not payload or "delta" not in payload:
        return None
    index = payload.get("index", 0)
    message_id = event.message_id
    if type(index) is not int or not (message_id is None or type(message_id) is str):
        return None  # a malformed delta: redacted on its own
    return message_id, index


_SLOT_VALUE_KEYS = ("value", "previous")
_SPAN_VOCABULARY = frozenset({"kind", "started_at", "ended_at", "cut"})
_HEX_ID = re.compile(r"[0-9a-f]{16}|[0-9a-f]{32}").fullmatch


def _hex_id(value: Any, identifier: Callable[[str], str]) -> str:
    """A trace or span id as the span record writes it (hex digits: kept), else as ``identifier`` gives it."""
    return value if type(value) is str and _HEX_ID(value) else identifier(str(value))
_SLOT_LABEL_KEYS = ("slot", "source")
_SPAN_ID = re.compile(r"(?:msg-|call-)?[0-9a-f]{16}(?:-(?:in|out)-[0-9]+)?").fullmatch
# What the GenAI mappings append to a span id (16 hex digits) to name its messages (``_tool_call_id``).
_OWN_ID_SUFFIXES = frozenset(["", *(f"-{side}-{n}" for side in ("in", "out") for n in range(1024))])


def _failed_payload(event_type: str) -> dict[str, Any]:
    """What replaces a payload whose redaction raised (logged: nothing passes through unredacted)."""
    logger.warning("redaction of a %s payload failed; payload replaced", event_type, exc_info=True)
    return {"redaction_error": REDACTED_ERROR}
_STRUCTURAL_KEYS = frozenset({"role", "kind", "index", "status", "name", "settled", "stop_reason"})


def _with_value(result: dict[str, Any], payload: dict[str, Any], key: str, redacted: Any) -> dict[str, Any]:
    """``result`` (``payload`` or its copy) with ``key``'s redaction: ``payload`` is copied the first
    time a redaction is not the value itself."""
    if redacted is payload[key]:
        return result
    if result is payload:
        result = dict(payload)
    result[key] = redacted
    return result
