"""OTLP payloads redacted field by field with the bundle's policy (SPEC §6: no output is less
redacted than the bundle).

Contract::

    redact_otlp(request, redactor)   # in place: an ExportTraceServiceRequest or ExportLogsServiceRequest

One walk over the protobuf message by its descriptors, so every field of every message is covered
by construction (fields a newer OTLP adds included). What each value gets:

* attribute and kvlist **keys**: scanned (keys are data), kept apart when two redact alike;
* **values** (``AnyValue``) by the field they feed in the bundle: slot values
  (``otel_session.slot.value``/``.previous``) by ``Redactor.slot_value`` of their slot; tool
  arguments and results (``gen_ai.tool.call.arguments``, OpenInference ``input.value``…) by the
  strictest of the tool mode and the text mode; every other attribute, log body and status message
  by the text mode. A string that holds JSON is parsed and redacted as a structure (keys and
  leaves, escapes decoded), then written back. Integers and doubles are scanned as their digits
  (a card number sent as an ``intValue`` becomes the string ``[card]``); booleans hold nothing;
  ``bytesValue`` is scanned as UTF-8 text;
* **names** (span, event, scope, schema URLs, trace state, severity text, event name), resource
  and scope attributes: ``Redactor.identifier`` (PII in them becomes a stable keyed hash);
* **binary ids** (trace and span ids): kept, unless they are printable text (a sender's words,
  not random bytes), then replaced by keyed-hash bytes of the same length (links stay linked).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from otel_session.redact.policy import FieldMode

if TYPE_CHECKING:
    from otel_session.redact import Redactor

__all__ = ["redact_otlp"]

_ANY_VALUE = "opentelemetry.proto.common.v1.AnyValue"
_KEY_VALUE = "opentelemetry.proto.common.v1.KeyValue"
_RESOURCE = "opentelemetry.proto.resource.v1.Resource"
_SCOPE = "opentelemetry.proto.common.v1.InstrumentationScope"
_SLOT_NAME = "otel_session.slot.name"
_SLOT_VALUES = frozenset({"otel_session.slot.value", "otel_session.slot.previous"})
# The attributes the normalizers read tool arguments and results from (genai.py, own.py).
_TOOL_ARGUMENTS = frozenset({"gen_ai.tool.call.arguments", "input.value", "traceloop.entity.input"})
_TOOL_RESULTS = frozenset({"gen_ai.tool.call.result", "output.value", "traceloop.entity.output"})
_STRICTNESS = {FieldMode.KEEP: 0, FieldMode.SCAN: 1, FieldMode.MASK: 2, FieldMode.HASH: 2}

# How a message's fields are walked, per message type: (field name, what it is).
_Plan = list[tuple[str, str]]
_PLANS: dict[str, _Plan] = {}


def _plan(descriptor: Descriptor) -> _Plan:
    plan = _PLANS.get(descriptor.full_name)
    if plan is None:
        plan = []
        for field in descriptor.fields:
            repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                name = field.message_type.full_name
                kind = "attributes" if name == _KEY_VALUE else "value" if name == _ANY_VALUE else "message"
                plan.append((field.name, kind + ("s" if repeated and kind == "message" else "")))
            elif field.type == FieldDescriptor.TYPE_STRING:
                plan.append((field.name, "names" if repeated else "name"))
            elif field.type == FieldDescriptor.TYPE_BYTES and not repeated:
                plan.append((field.name, "id"))
        _PLANS[descriptor.full_name] = plan
    return plan


def redact_otlp(request: Message, redactor: Redactor) -> None:
    """Redact ``request`` (any OTLP export request) in place; see the module's docstring."""
    _Walk(redactor).message(request, structural=False)


def _strictest(*modes: FieldMode) -> FieldMode:
    return max(modes, key=_STRICTNESS.__getitem__)


class _Walk:
    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        policy = redactor.policy
        self.text = redactor.with_mode(policy.text)
        self.tool_arguments = redactor.with_mode(_strictest(policy.tool_arguments, policy.text))
        self.tool_results = redactor.with_mode(_strictest(policy.tool_results, policy.text))
        self.ids = redactor.identifier_leaves
        self.user_patterns = bool(policy.patterns)  # matched within words: JSON's quotes would change them

    def message(self, message: Message, *, structural: bool) -> None:
        structural = structural or message.DESCRIPTOR.full_name in (_RESOURCE, _SCOPE)  # who sent it
        identifier = self.redactor.identifier
        for name, kind in _plan(message.DESCRIPTOR):
            if kind == "name":
                value = getattr(message, name)
                if value:
                    redacted = identifier(value)
                    if redacted != value:
                        setattr(message, name, redacted)
            elif kind == "names":
                values = getattr(message, name)
                values[:] = [identifier(value) for value in values]
            elif kind == "id":
                value = getattr(message, name)
                if value:
                    setattr(message, name, self._binary_id(value))
            elif kind == "attributes":
                self.attributes(getattr(message, name), structural=structural)
            elif kind == "value":
                if message.HasField(name):
                    self.value(getattr(message, name), self.ids if structural else self.text)
            elif kind == "messages":
                for item in getattr(message, name):
                    self.message(item, structural=structural)
            elif message.HasField(name):
                self.message(getattr(message, name), structural=structural)

    def attributes(self, key_values: Any, *, structural: bool) -> None:
        seen: set[str] = set()
        for key_value in key_values:
            key = key_value.key
            redacted_key = self.redactor.map_key(key)
            if redacted_key in seen:
                number = 2
                while f"{redacted_key}#{number}" in seen:
                    number += 1
                redacted_key = f"{redacted_key}#{number}"
            seen.add(redacted_key)
            if redacted_key != key:
                key_value.key = redacted_key
            if not key_value.HasField("value"):
                continue
            if key in _SLOT_VALUES:
                self._slot_value(key_values, key_value.value)
            else:
                self.value(key_value.value, self._leaf(key, structural))

    def _leaf(self, key: str, structural: bool) -> Callable[[Any], Any]:
        if structural or key in _ID_KEYS or key.endswith(_ID_SUFFIXES):
            return self.ids
        if key in _TOOL_ARGUMENTS:
            return self.tool_arguments
        if key in _TOOL_RESULTS:
            return self.tool_results
        return self.text

    def value(self, value: Message, leaf: Callable[[Any], Any]) -> None:
        """One ``AnyValue``: a string (or the JSON object or array it holds) through ``leaf``,
        numbers scanned as digits, bytes as text, arrays and kvlists item by item."""
        which = value.WhichOneof("value")
        if which == "string_value":
            text = value.string_value
            decoded = _json_structure(text) if self._may_hold(text) else None
            if decoded is None:
                redacted = leaf(text)
                if redacted != text:
                    value.string_value = redacted if isinstance(redacted, str) else _dumps(redacted)
            else:
                redacted = leaf(decoded)
                if redacted != decoded:
                    value.string_value = redacted if isinstance(redacted, str) else _dumps(redacted)
        elif which in ("int_value", "double_value"):
            number = getattr(value, which)
            redacted = self.redactor.scan_value(number)
            if redacted != number:
                value.string_value = str(redacted)
        elif which == "bytes_value":
            text = value.bytes_value.decode("utf-8", "replace")
            redacted = leaf(text)
            if redacted != text:
                value.bytes_value = str(redacted).encode()
        elif which == "array_value":
            for item in value.array_value.values:
                self.value(item, leaf)
        elif which == "kvlist_value":
            self.attributes(value.kvlist_value.values, structural=leaf is self.ids)

    def _may_hold(self, text: str) -> bool:
        """Whether JSON ``text`` may hold a detection once decoded: without escapes its strings
        and numbers are its own characters, so a text the scanner leaves whole needs no decoding."""
        return self.user_patterns or "\\" in text or self.redactor.scan_value(text) is not text

    def _slot_value(self, key_values: Any, value: Message) -> None:
        """A slot value as the bundle's: ``Redactor.slot_value`` of its slot, on the JSON it holds."""
        slot = next((kv.value.string_value for kv in key_values if kv.key == _SLOT_NAME), "")
        if value.WhichOneof("value") != "string_value":
            self.value(value, lambda item: self.redactor.slot_value(slot, item))
            return
        text = value.string_value
        try:
            decoded, was_json = orjson.loads(text), True
        except orjson.JSONDecodeError:
            decoded, was_json = text, False
        redacted = self.redactor.slot_value(slot, decoded)
        if redacted != decoded:
            value.string_value = _dumps(redacted) if was_json else str(redacted)

    def _binary_id(self, value: bytes) -> bytes:
        """A trace or span id: random bytes are kept; printable text (1 in 10^7 random ids, or a
        sender putting words there) becomes keyed-hash bytes of the same length."""
        if not value.isascii() or not value.decode("ascii").isprintable():
            return value
        return self.redactor.hash_bytes(value, len(value))


_ID_KEYS = frozenset({"session.id", "gen_ai.conversation.id", "service.name", "service.instance.id"})
_ID_SUFFIXES = (".id", "_id")


def _json_structure(text: str) -> Any:
    """The JSON object or array ``text`` holds, else None."""
    if text[:1] not in ("{", "["):
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def _dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=repr).decode()
