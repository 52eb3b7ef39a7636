"""Span attributes redacted by the field they feed: one rule for OTLP payloads and span records (SPEC §6).

Contract::

    attributes = AttributeRedaction(redactor)          # built once per redactor (or per request)
    attributes.redact(span.attributes)                 # a new dict: keys scanned, each value by its key
    attributes.redact(resource, structural=True)       # who sent it (resource, scope): ids throughout
    leaf = attributes.leaf(key, structural)            # what one attribute's leaves go through
    text = attributes.string(text, leaf)               # a string value (or the JSON it holds), redacted
    text = attributes.slot_string(slot, text)          # a slot value's (JSON) text, as the bundle's
    key = distinct_key(seen, redacted_key)             # ``key#2`` … when two keys redact alike

What each value gets (``redact.otlp`` walks protobuf payloads with it; ``redact.records`` the
``span`` record's attribute maps):

* **keys**: scanned (``Redactor.map_key``: keys are data), kept apart when two redact alike;
* **values** by the field they feed in the bundle: slot values (``otel_session.slot.value`` /
  ``.previous``) by ``Redactor.slot_value`` of their slot; tool arguments and results
  (``gen_ai.tool.call.arguments``, OpenInference ``input.value``…) by the strictest of the tool
  mode and the text mode; ids (``session.id``, ``*.id``, ``*_id``, ``service.name``) and every
  value of a resource or scope by ``Redactor.identifier``; every other value by the text mode.
  A string that holds JSON is parsed and redacted as a structure (keys and leaves, escapes
  decoded), then written back. Integers and doubles are scanned as their digits (a card number
  as an integer becomes the string ``[card]``); booleans hold nothing; bytes are scanned as text.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from otel_session.redact.policy import FieldMode

if TYPE_CHECKING:
    from otel_session.redact import Redactor

__all__ = ["SLOT_NAME", "SLOT_VALUES", "AttributeRedaction", "distinct_key"]

SLOT_NAME = "otel_session.slot.name"
SLOT_VALUES = frozenset({"otel_session.slot.value", "otel_session.slot.previous"})
# The attributes the normalizers read tool arguments and results from (genai.py, own.py).
_TOOL_ARGUMENTS = frozenset({"gen_ai.tool.call.arguments", "input.value", "traceloop.entity.input"})
_TOOL_RESULTS = frozenset({"gen_ai.tool.call.result", "output.value", "traceloop.entity.output"})
_ID_KEYS = frozenset({"session.id", "gen_ai.conversation.id", "service.name", "service.instance.id"})
_ID_SUFFIXES = (".id", "_id")
_STRICTNESS = {FieldMode.KEEP: 0, FieldMode.SCAN: 1, FieldMode.MASK: 2, FieldMode.HASH: 2}


def _strictest(*modes: FieldMode) -> FieldMode:
    return max(modes, key=_STRICTNESS.__getitem__)


def distinct_key(seen: Collection[Any], key: Any) -> Any:
    """``key``, or ``key#2``, ``key#3`` … when ``seen`` holds it (two keys redacted alike: nothing is dropped)."""
    if key not in seen:
        return key
    number = 2
    while f"{key}#{number}" in seen:
        number += 1
    return f"{key}#{number}"


class AttributeRedaction:
    """The value functions of one redactor, chosen per attribute key (see the module docstring)."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        policy = redactor.policy
        self.text = redactor.with_mode(policy.text)
        self.tool_arguments = redactor.with_mode(_strictest(policy.tool_arguments, policy.text))
        self.tool_results = redactor.with_mode(_strictest(policy.tool_results, policy.text))
        self.ids = redactor.identifier_leaves
        self._user_patterns = bool(policy.patterns)  # matched within words: JSON's quotes would change them

    def leaf(self, key: str, structural: bool) -> Callable[[Any], Any]:
        """What the leaves of attribute ``key`` go through (``structural``: a resource's or scope's)."""
        if structural or key in _ID_KEYS or key.endswith(_ID_SUFFIXES):
            return self.ids
        if key in _TOOL_ARGUMENTS:
            return self.tool_arguments
        if key in _TOOL_RESULTS:
            return self.tool_results
        return self.text

    def string(self, text: str, leaf: Callable[[Any], Any]) -> str:
        """A string value through ``leaf``: the JSON object or array it holds as a structure."""
        decoded = _json_structure(text) if self._may_hold(text) else None
        redacted = leaf(text if decoded is None else decoded)
        if redacted == (text if decoded is None else decoded):
            return text
        return redacted if isinstance(redacted, str) else _dumps(redacted)

    def slot_string(self, slot: str, text: str) -> str:
        """A slot value's text as the bundle's: ``Redactor.slot_value`` of its slot, on the JSON it holds."""
        try:
            decoded, was_json = orjson.loads(text), True
        except orjson.JSONDecodeError:
            decoded, was_json = text, False
        redacted = self.redactor.slot_value(slot, decoded)
        if redacted == decoded:
            return text
        return _dumps(redacted) if was_json else str(redacted)

    def redact(self, attributes: Mapping[str, Any], *, structural: bool = False) -> dict[str, Any]:
        """``attributes`` (plain values: an SDK span's or a decoded OTLP span's) redacted, as a new dict."""
        result: dict[str, Any] = {}
        map_key = self.redactor.map_key
        for key, value in attributes.items():
            redacted_key = distinct_key(result, map_key(key))
            if key in SLOT_VALUES:
                slot = str(attributes.get(SLOT_NAME, ""))
                result[redacted_key] = (self.slot_string(slot, value) if type(value) is str
                                        else self.value(value, functools.partial(self.redactor.slot_value, slot)))
            else:
                result[redacted_key] = self.value(value, self.leaf(str(key), structural))
        return result

    def value(self, value: Any, leaf: Callable[[Any], Any]) -> Any:
        """One plain attribute value: a string through ``string``, numbers scanned as digits,
        bytes as text, arrays item by item, maps (an OTLP kvlist) key by key: under a plain
        attribute each nested key chooses its leaf (``redact``), under any other (tool arguments,
        an id, a slot value) every nested value keeps ``leaf``, never a laxer one."""
        kind = type(value)
        if kind is str:
            return self.string(value, leaf)
        if kind is bool or value is None:
            return value
        if kind is int or kind is float:
            redacted = self.redactor.scan_value(value)
            return value if redacted == value else str(redacted)
        if isinstance(value, bytes):
            return leaf(value.decode("utf-8", "replace"))
        if isinstance(value, (list, tuple)):
            return [self.value(item, leaf) for item in value]
        if isinstance(value, Mapping):
            if leaf is self.text:  # a plain attribute's map: each of its keys chooses as a top-level one
                return self.redact(value)
            result: dict[str, Any] = {}  # ids, tool arguments or results, a slot: every leaf as its parent's
            for key, item in value.items():
                result[distinct_key(result, self.redactor.map_key(key))] = self.value(item, leaf)
            return result
        return leaf(str(value))

    def _may_hold(self, text: str) -> bool:
        """Whether JSON ``text`` may hold a detection once decoded: without escapes its strings
        and numbers are its own characters, so a text the scanner leaves whole needs no decoding."""
        return self._user_patterns or "\\" in text or self.redactor.scan_value(text) is not text


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
