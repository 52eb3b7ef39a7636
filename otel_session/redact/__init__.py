"""Redact: slot values, tool arguments/results, free text and ids, before anything is recorded (SPEC §6).

Contract::

    redactor = Redactor(RedactionPolicy(keep_slots={"party_size"}), key=b"...")  # built once
    redactor = Redactor.from_env(bundle_dir)    # the policy from OTEL_SESSION_REDACT_*, the key under bundle_dir
    redactor.slot_value("date", "2026-12-04")   # -> "hmac-sha256:3f9a0c…" (16 hex digits)
    redactor.text("mail jane@example.com")      # -> "mail [email]"
    redactor.tool_arguments({"card": "4111 1111 1111 1111"})  # structure kept, leaves redacted
    redactor.redact_event(journal_event)        # -> a new JournalEvent, fields redacted by type
    redactor.redact_events(events)              # the events of a span or request, in place; deltas as streams
    stream = redactor.delta_stream()            # one streamed block, record by record (see ``stream``)

Each field has a :class:`FieldMode`: ``keep`` (as is), ``scan`` (free text: what the detectors find
is masked, see ``detectors``), ``mask`` (only the type and length remain) or ``hash`` (a keyed
HMAC-SHA256 prefix, so equal values compare equal without being readable). The behaviour is chosen
once, when the redactor is built; the policy and its environment variables are in ``policy``.

Redaction is idempotent: tokens this package produces (``hmac-sha256:…``, ``<redacted …>``,
``[email]`` …) pass through unchanged, so a collector may re-redact what an app already redacted.
A redactor error replaces the whole value with ``<redacted error>``; nothing passes through.

Streamed deltas are redacted as a stream (:class:`DeltaStream`), record by record: N deltas give N
records, each with its own redacted text, and their texts concatenate to the redacted whole. A
delta is held back until a later one shows where its last word or number ends, so a value split
across deltas is never released in part; its token goes to the delta where it starts.
"""

from __future__ import annotations

import dataclasses
import functools
import hmac
import os
import re
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import orjson

from otel_session.core import layout
from otel_session.core.journal import EventType
from otel_session.core.log import get_logger, redact_with
from otel_session.normalize import JournalEvent
from otel_session.redact.detectors import BUILTIN_DETECTORS, DEFAULT_DETECTORS, IS_MASK, Scanner
from otel_session.redact.policy import (
    ENV_PATTERNS,
    ENV_REDACTION_KEY,
    KEY_FILE,
    REDACTED_ERROR,
    FieldMode,
    RedactionPolicy,
    load_or_create_key,
    read_key,
)
from otel_session.redact.stream import DeltaStream

__all__ = [
    "BUILTIN_DETECTORS",
    "DEFAULT_DETECTORS",
    "DeltaStream",
    "ENV_PATTERNS",
    "ENV_REDACTION_KEY",
    "FieldMode",
    "KEY_FILE",
    "REDACTED_ERROR",
    "RedactionPolicy",
    "Redactor",
    "load_or_create_key",
    "log_redactor",
    "session_id_candidates",
    "stored_session_id",
]

logger = get_logger(__name__)

_HASH_PREFIX = "hmac-sha256:"
_HASH_HEX_DIGITS = 16
_HASH_CACHE_SIZE = 4096


def _canonical(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=repr)


_JSON_SCALARS = frozenset({str, int, float, bool, type(None)})
_IS_HASH = re.compile(r"hmac-sha256:[0-9a-f]{16}").fullmatch


def _type_name(value: Any) -> str:
    if isinstance(value, str):
        return "str"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return type(value).__name__


class Redactor:
    """Applies one :class:`RedactionPolicy` with one key. Build once; call from any thread."""

    def __init__(self, policy: RedactionPolicy | None = None, *, key: bytes | None = None) -> None:
        self.policy = policy or RedactionPolicy()
        self._key = key if key is not None else secrets.token_bytes(32)
        self._keep_slots = self.policy.keep_slots
        self._hash_cache: dict[Any, str] = {}  # recent values (the next write's "previous" is the last value)
        self._scanner = Scanner(self.policy.detectors, self.policy.patterns)
        self._scan = self._scanner.scan
        self._clean = self._scanner.clean
        self._scanned_leaf = self._scan_leaf
        """The ``scan`` mode's leaf function, one bound method (``_map_leaves`` knows it by identity)."""
        self._scan_text = self.policy.text is FieldMode.SCAN
        self._slot_leaf = self._whole_value_function(self.policy.slot_values)
        self._slot_hashes = self._hash_cache if self.policy.slot_values is FieldMode.HASH else None
        """The hashes of recent slot values, when slot values are hashed (``_slot_payload``)."""
        self._text = self._leaf_function(self.policy.text)
        self._text_of_str = self._scan if self._scan_text else self._text  # _scan_leaf on a str is _scan
        self._tool_arguments_leaf = self._leaf_function(self.policy.tool_arguments)
        self._tool_results_leaf = self._leaf_function(self.policy.tool_results)
        self._keep_identifiers = self.policy.identifiers is FieldMode.KEEP
        self._identifier_cache: dict[str, str] = {}
        self._handlers = {kind: handler.__get__(self) for kind, handler in self._payload_handlers.items()}
        """Each record type's payload redaction, bound to this redactor (``redact_payload``)."""

    @classmethod
    def from_env(cls, bundle_dir: str | os.PathLike[str] | None, policy: RedactionPolicy | None = None) -> Redactor:
        """The redactor of a process writing under ``bundle_dir``: ``policy`` (default: the
        environment's, ``RedactionPolicy.from_env()``) with the key of ``load_or_create_key``."""
        return cls(policy if policy is not None else RedactionPolicy.from_env(), key=load_or_create_key(bundle_dir))

    # -- building blocks chosen at construction -------------------------------------------

    def _hash(self, value: Any) -> str:
        if value is None:
            return None  # type: ignore[return-value]  # absence is not personal data
        cacheable = type(value) in (str, int)
        if cacheable:
            cached = self._hash_cache.get(value)
            if cached is not None:
                return cached
        if isinstance(value, str) and (_IS_HASH(value) or IS_MASK(value)):
            return value
        data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else _canonical(value)
        result = _HASH_PREFIX + hmac.digest(self._key, data, "sha256").hex()[:_HASH_HEX_DIGITS]
        if cacheable:
            if len(self._hash_cache) >= _HASH_CACHE_SIZE:
                self._hash_cache.clear()
            self._hash_cache[value] = result
        return result

    @staticmethod
    def _mask(value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, str) and (_IS_HASH(value) or IS_MASK(value)):
            return value
        try:
            length = len(value)
        except TypeError:
            length = len(str(value))
        return f"<redacted {_type_name(value)} len={length}>"

    def _scan_leaf(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._scan(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            text = str(value)
            scanned = self._scan(text)
            return value if scanned == text else scanned
        return value

    def _leaf_function(self, mode: FieldMode) -> Callable[[Any], Any]:
        if mode is FieldMode.KEEP:
            return _kept
        if mode is FieldMode.SCAN:
            return self._scanned_leaf
        if mode is FieldMode.MASK:
            return self._mask
        return self._hash

    def _whole_value_function(self, mode: FieldMode) -> Callable[[Any], Any]:
        if mode is FieldMode.SCAN:
            return lambda value: self._map_leaves(value, self._scanned_leaf)
        return self._leaf_function(mode)

    def _map_leaves(self, value: Any, leaf: Callable[[Any], Any]) -> Any:
        """``value`` with each leaf redacted by ``leaf`` and, unless ``leaf`` keeps values, each
        map key scanned: keys are data too (an address used as a key)."""
        kind = type(value)
        clean = self._clean
        scanned = leaf is self._scanned_leaf  # then a plain str in ``clean`` is its own redaction
        if kind in _JSON_SCALARS:  # the common leaves, before the (slower) abstract Mapping check
            return value if scanned and kind is str and value in clean else leaf(value)
        if kind is dict or isinstance(value, Mapping):
            if leaf is _kept:
                return {key: self._map_leaves(item, leaf) for key, item in value.items()}
            if scanned and kind is dict:  # the common map, in line: keys and leaves (text, integers) known clean
                for key, item in value.items():
                    if type(key) is not str or key not in clean:
                        break
                    item_kind = type(item)
                    if not (item_kind is str and item in clean or item_kind is int and str(item) in clean):
                        break
                else:
                    return value
            result: dict[Any, Any] = {}
            scan, map_leaves = self._scan, self._map_leaves
            for key, item in value.items():
                if type(key) is str:
                    redacted_key = key if key in clean else scan(key)
                else:
                    redacted_key = self._map_key(key)
                if redacted_key in result:
                    redacted_key = _distinct(result, redacted_key)
                item_kind = type(item)
                if scanned and item_kind is str and item in clean:
                    result[redacted_key] = item
                else:
                    result[redacted_key] = leaf(item) if item_kind in _JSON_SCALARS else map_leaves(item, leaf)
            return result
        if isinstance(value, (list, tuple)):
            map_leaves = self._map_leaves
            return [
                item if scanned and type(item) is str and item in clean
                else leaf(item) if type(item) in _JSON_SCALARS else map_leaves(item, leaf)
                for item in value
            ]
        return leaf(value)

    def _map_key(self, key: Any) -> Any:
        """A map key, scanned like text whatever the field's mode (a key is structure: PII in it
        is masked, the rest stays readable); a number scans as its digits."""
        if type(key) is str:
            return self._scan(key)
        if isinstance(key, (str, int, float)) and not isinstance(key, bool):
            return self._scan_leaf(key)
        return key

    @staticmethod
    def _guarded(function: Callable[..., Any], value: Any, *args: Any) -> Any:
        try:
            return function(value, *args)
        except Exception:  # noqa: BLE001 - a redactor error redacts the whole value
            logger.warning("redaction failed; the whole value was replaced", exc_info=True)
            return REDACTED_ERROR

    # -- public field redaction -----------------------------------------------------------

    def slot_value(self, slot: str, value: Any) -> Any:
        """A slot value (or previous value): kept when the slot is allow-listed, else per policy."""
        if slot in self._keep_slots:
            return value
        try:
            return self._slot_leaf(value)
        except Exception:  # noqa: BLE001 - a redactor error redacts the whole value
            logger.warning("redaction failed; the whole value was replaced", exc_info=True)
            return REDACTED_ERROR

    def text(self, value: str) -> str:
        """Free text: message text, deltas, reasons, error messages."""
        try:
            return self._text_of_str(value if isinstance(value, str) else str(value))
        except Exception:  # noqa: BLE001
            logger.warning("redaction failed; the whole text was replaced", exc_info=True)
            return REDACTED_ERROR

    @property
    def scans_text(self) -> bool:
        """Whether free text is scanned for detections (``scan`` mode), not kept, masked or hashed whole."""
        return self._scan_text

    def delta_stream(self) -> DeltaStream[Any]:
        """A redacting stream for one content block streamed in deltas (see :class:`DeltaStream`)."""
        return DeltaStream(self)

    def tool_arguments(self, value: Any) -> Any:
        """Tool-call arguments: structure kept, every leaf redacted per policy."""
        return self._guarded(self._map_leaves, value, self._tool_arguments_leaf)

    def tool_result(self, value: Any) -> Any:
        """A tool's result: structure kept, every leaf redacted per policy."""
        return self._guarded(self._map_leaves, value, self._tool_results_leaf)

    def free_leaves(self, value: Any) -> Any:
        """Any other structure (unknown record types): every string leaf scanned as text."""
        return self._guarded(self._map_leaves, value, self._text)

    def with_mode(self, mode: FieldMode) -> Callable[[Any], Any]:
        """What a value of a field redacted by ``mode`` goes through: ``scan`` keeps the structure
        (keys and leaves scanned), ``mask``/``hash`` take the value whole, ``keep`` keeps it."""
        if mode is FieldMode.KEEP:
            return _kept
        leaf = self._whole_value_function(mode)
        return lambda value: self._guarded(leaf, value)

    def map_key(self, key: Any) -> Any:
        """A map or attribute key: PII in it masked, the rest kept (see ``_map_leaves``)."""
        try:
            return self._map_key(key)
        except Exception:  # noqa: BLE001
            logger.warning("redaction failed; the whole key was replaced", exc_info=True)
            return REDACTED_ERROR

    def scan_value(self, value: Any) -> Any:
        """A scalar scanned for detections: a string as text, a number as its digits (a card
        number sent as an integer becomes ``"[card]"``), anything else as it is."""
        return self._guarded(self._scan_leaf, value)

    # -- identifiers ----------------------------------------------------------------------

    def identifier(self, value: str) -> str:
        """An id (session id, run label, tool call id, span or event name, a resource attribute
        such as ``service.name`` or ``user.id``) with each detection in it replaced by a keyed
        hash of it (``call-hmac-sha256:…``): stable, so equal ids stay equal and the same caller
        maps to the same session directory; an id without PII is kept as it is. ``keep`` in the
        policy's ``identifiers`` keeps every id."""
        if self._keep_identifiers:
            return value
        try:
            text = value if type(value) is str else str(value)
            if type(text) is str and text in self._clean or self._scan(text) == text:
                return text
            cached = self._identifier_cache.get(text)
            if cached is None:
                parts = []
                cursor = 0
                for start, end, _token in self._scanner.edits(text):
                    parts += [text[cursor:start], self._hash(text[start:end])]
                    cursor = end
                cached = "".join([*parts, text[cursor:]])
                if len(self._identifier_cache) >= _HASH_CACHE_SIZE:
                    self._identifier_cache.clear()
                self._identifier_cache[text] = cached
            return cached
        except Exception:  # noqa: BLE001
            logger.warning("redaction of an id failed; the whole id was replaced", exc_info=True)
            return REDACTED_ERROR

    def identifier_leaves(self, value: Any) -> Any:
        """A structure of ids (resource and scope attributes): string leaves by ``identifier``,
        numbers scanned as digits, keys scanned."""
        return self._guarded(self._map_leaves, value, self._identifier_leaf)

    def _identifier_leaf(self, value: Any) -> Any:
        return self.identifier(value) if isinstance(value, str) else self._scan_leaf(value)

    def hash_bytes(self, value: bytes, size: int) -> bytes:
        """``size`` bytes of the keyed hash of ``value`` (a binary id holding PII, replaced by one
        that stays equal wherever the same id appears)."""
        return hmac.digest(self._key, value, "sha256")[:size].ljust(size, b"\0")

    # -- journal events -------------------------------------------------------------------

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


    _payload_handlers: ClassVar[dict[str, Callable[[Redactor, dict[str, Any]], dict[str, Any]]]] = {
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


def _kept(value: Any) -> Any:
    """The leaf function of ``keep``: values (and keys) as they are."""
    return value


def _distinct(result: dict[Any, Any], key: Any) -> Any:
    """``key``, or ``key#2``, ``key#3`` … when two keys redact alike (nothing is dropped)."""
    if key not in result:
        return key
    number = 2
    while f"{key}#{number}" in result:
        number += 1
    return f"{key}#{number}"


def stored_session_id(
    root: str | os.PathLike[str], session_id: str, *, eval_id: str | None = None, policy: RedactionPolicy | None = None,
) -> str | None:
    """The id under which the session a user names by its original id (a caller's phone number)
    is stored in ``root``: its ``Redactor.identifier`` with the root's key and the environment's
    policy, or the id as given (bundles recorded before, ids without PII); None when neither has a
    directory. For the CLI and the viewer; reads only (no key is made)."""
    for candidate in session_id_candidates(root, session_id, policy=policy):
        if layout.session_dir(Path(root), candidate, eval_id=eval_id).is_dir():
            return candidate
    return None


def session_id_candidates(
    root: str | os.PathLike[str], session_id: str, *, policy: RedactionPolicy | None = None,
) -> list[str]:
    """The ids a session named ``session_id`` may be stored under, most likely first: its
    ``Redactor.identifier`` with the root's key (when there is one), then the id as given."""
    key = read_key(root)
    if key is None:
        return [session_id]
    stored = _lookup_redactor(policy if policy is not None else RedactionPolicy.from_env(), key).identifier(session_id)
    return list(dict.fromkeys([stored, session_id]))


@functools.lru_cache(maxsize=8)
def _lookup_redactor(policy: RedactionPolicy, key: bytes) -> Redactor:
    """A redactor for id lookups, built once per policy and key (a viewer looks ids up per request)."""
    return Redactor(policy, key=key)


_PROCESS_KEY = secrets.token_bytes(32)


def log_redactor() -> Redactor:
    """The redactor of this process's log lines (``otel_session.core.log``): the environment's policy,
    read again when ``OTEL_SESSION_REDACT*`` changes, with ``$OTEL_SESSION_REDACTION_KEY`` or a key
    of this process's."""
    return _log_redactor(tuple(sorted(item for item in os.environ.items() if item[0].startswith("OTEL_SESSION_REDACT"))))


@functools.lru_cache(maxsize=8)
def _log_redactor(settings: tuple[tuple[str, str], ...]) -> Redactor:
    key = dict(settings).get(ENV_REDACTION_KEY)
    return Redactor(RedactionPolicy.from_env(), key=key.encode("utf-8") if key else _PROCESS_KEY)


redact_with(log_redactor)
