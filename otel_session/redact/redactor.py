"""The redactor of values: hashing, masking, scanning free text, ids (SPEC §6).

``Redactor(policy, key=)`` builds each field's function once from the policy; its record-level
methods (``redact_payload``, ``redact_events``, ``redact_event``) come from
:class:`~otel_session.redact.records.RecordRedaction`. The package's docstring is the contract.
"""

from __future__ import annotations

import hmac
import os
import re
import secrets
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from otel_session.core.log import get_logger
from otel_session.redact.attributes import AttributeRedaction, distinct_key
from otel_session.redact.detectors import IS_MASK, Scanner
from otel_session.redact.policy import (
    REDACTED_ERROR,
    FieldMode,
    RedactionPolicy,
    load_or_create_key,
)
from otel_session.redact.records import RecordRedaction
from otel_session.redact.stream import DeltaStream

__all__ = ["Redactor"]

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

class Redactor(RecordRedaction):
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
        self._attribute_rules = AttributeRedaction(self)
        """Each span attribute by the field it feeds (``span`` records: ``redact.attributes``)."""
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
                    redacted_key = distinct_key(result, redacted_key)
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


def _kept(value: Any) -> Any:
    """The leaf function of ``keep``: values (and keys) as they are."""
    return value

