"""OTLP payloads redacted field by field with the bundle's policy (SPEC §6: no output is less
redacted than the bundle).

Contract::

    redact_otlp(request, redactor)   # in place: an ExportTraceServiceRequest or ExportLogsServiceRequest

One walk over the protobuf message by its descriptors, so every field of every message is covered
by construction (fields a newer OTLP adds included). What each value gets:

* attribute and kvlist keys and **values** (``AnyValue``): by ``redact.attributes`` (the rule the
  ``span`` record's attributes follow too): keys scanned, each value by the field it feeds in the
  bundle (slot values, tool arguments and results, ids, text), JSON text as a structure, numbers
  as digits (an ``intValue`` holding a card number becomes the string ``[card]``); log bodies and
  status messages by the text mode;
* **names** (span, event, scope, schema URLs, trace state, severity text, event name), resource
  and scope attributes: ``Redactor.identifier`` (PII in them becomes a stable keyed hash);
* **binary ids** (trace and span ids): kept, unless they are printable text (a sender's words,
  not random bytes), then replaced by keyed-hash bytes of the same length (links stay linked).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from otel_session.redact.attributes import SLOT_NAME, SLOT_VALUES, AttributeRedaction, distinct_key

if TYPE_CHECKING:
    from otel_session.redact import Redactor

__all__ = ["redact_otlp"]

_ANY_VALUE = "opentelemetry.proto.common.v1.AnyValue"
_KEY_VALUE = "opentelemetry.proto.common.v1.KeyValue"
_RESOURCE = "opentelemetry.proto.resource.v1.Resource"
_SCOPE = "opentelemetry.proto.common.v1.InstrumentationScope"
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


class _Walk:
    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.rules = AttributeRedaction(redactor)

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
                    self.value(getattr(message, name), self.rules.ids if structural else self.rules.text)
            elif kind == "messages":
                for item in getattr(message, name):
                    self.message(item, structural=structural)
            elif message.HasField(name):
                self.message(getattr(message, name), structural=structural)

    def attributes(self, key_values: Any, *, structural: bool) -> None:
        seen: set[str] = set()
        for key_value in key_values:
            key = key_value.key
            redacted_key = distinct_key(seen, self.redactor.map_key(key))
            seen.add(redacted_key)
            if redacted_key != key:
                key_value.key = redacted_key
            if not key_value.HasField("value"):
                continue
            if key in SLOT_VALUES:
                self._slot_value(key_values, key_value.value)
            else:
                self.value(key_value.value, self.rules.leaf(key, structural))

    def value(self, value: Message, leaf: Callable[[Any], Any]) -> None:
        """One ``AnyValue``: a string (or the JSON object or array it holds) through ``leaf``,
        numbers scanned as digits, bytes as text, arrays and kvlists item by item."""
        which = value.WhichOneof("value")
        if which == "string_value":
            text = value.string_value
            redacted = self.rules.string(text, leaf)
            if redacted is not text:
                value.string_value = redacted
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
            self.attributes(value.kvlist_value.values, structural=leaf is self.rules.ids)

    def _slot_value(self, key_values: Any, value: Message) -> None:
        """A slot value as the bundle's: ``Redactor.slot_value`` of its slot, on the JSON it holds."""
        slot = next((kv.value.string_value for kv in key_values if kv.key == SLOT_NAME), "")
        if value.WhichOneof("value") != "string_value":
            self.value(value, lambda item: self.redactor.slot_value(slot, item))
            return
        text = value.string_value
        redacted = self.rules.slot_string(slot, text)
        if redacted is not text:
            value.string_value = redacted

    def _binary_id(self, value: bytes) -> bytes:
        """A trace or span id: random bytes are kept; printable text (1 in 10^7 random ids, or a
        sender putting words there) becomes keyed-hash bytes of the same length."""
        if not value.isascii() or not value.decode("ascii").isprintable():
            return value
        return self.redactor.hash_bytes(value, len(value))
