"""A redacted ``span`` record within bounds, so it is never the record that fails a capture.

Contract::

    payload = bounded(redacted_payload)  # sizes, nesting and counts bounded, a ``cut`` count where cut

A string past ``MAX_TEXT`` characters keeps its start and ends with ``…[cut N chars]`` (a key past
``MAX_KEY``; two keys cut alike are kept apart, ``key#2``), a value nested past ``MAX_NESTING``
levels becomes ``NESTING_MARKER``, a map past ``MAX_ENTRIES`` entries or a list past ``MAX_ITEMS``
items keeps its first ones, and once the record's budget is spent the rest is left out; ``cut``
counts, per section, what went. Events and links are kept whole (their own fields, their attribute
map bounded) or left out whole.

The budget is ``MAX_RECORD_CHARS`` units, and what the JSON line spends is charged in units that
each stand for at most ``_BYTES_PER_UNIT`` bytes of it (a character may be a 6-byte ``\\u00XX``
escape; numbers, quotes and punctuation are charged too). A record whose charge could pass
``MAX_RECORD_BYTES`` is encoded and, when it does, bounded again with the budget that cannot
(the writer refuses a record past 1 MiB, and that fails the whole run's capture).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from otel_session.redact.attributes import distinct_key

__all__ = [
    "MAX_ENTRIES",
    "MAX_ITEMS",
    "MAX_KEY",
    "MAX_NESTING",
    "MAX_RECORD_BYTES",
    "MAX_RECORD_CHARS",
    "MAX_TEXT",
    "NESTING_MARKER",
    "bounded",
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
"""The record's budget: characters of text (and the units numbers and punctuation are charged)."""
MAX_RECORD_BYTES = 768 * 1024
"""Bytes of the record's payload as JSON, at most (the writer's limit for a whole line is 1 MiB)."""
NESTING_MARKER = f"[cut: nested deeper than {MAX_NESTING} levels]"

_BYTES_PER_UNIT = 6  # a character's worst JSON form (``\u00XX``); a string's quotes and comma are one unit
_FIXED_BYTES = 4096  # what no unit pays for: the record's own braces, its ``cut`` map, ``#2`` on a key
_SAFE_BUDGET = (MAX_RECORD_BYTES - _FIXED_BYTES) // _BYTES_PER_UNIT
_ATTRIBUTE_MAPS = frozenset({"attributes", "resource"})
_ENTRY_LISTS = frozenset({"events", "links"})


def bounded(payload: Mapping[str, Any]) -> dict[str, Any]:
    """``payload`` (a redacted ``span`` record's) within the bounds, ``cut`` saying what went."""
    bounds = _Bounds(MAX_RECORD_CHARS)
    result = bounds.record(payload)
    if bounds.spent * _BYTES_PER_UNIT + _FIXED_BYTES > MAX_RECORD_BYTES and len(orjson.dumps(result)) > MAX_RECORD_BYTES:
        result = _Bounds(_SAFE_BUDGET).record(payload)
    return result


class _Bounds:
    """One record's walk: the budget left and the counts of what was cut, by section."""

    __slots__ = ("budget", "cut", "left")

    def __init__(self, budget: int) -> None:
        self.budget = self.left = budget
        self.cut: dict[str, int] = {}

    @property
    def spent(self) -> int:
        return self.budget - self.left

    def record(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in payload.items():
            if key == "cut":
                continue
            if key in _ATTRIBUTE_MAPS and isinstance(value, Mapping):
                result[key] = self.mapping(value, key, 0)
            elif key in _ENTRY_LISTS and isinstance(value, (list, tuple)):
                result[key] = self.entries(value, key)
            else:
                result[key] = self.value(value, key, 0)
        if self.cut:
            result["cut"] = self.cut
        return result

    def _count(self, section: str, number: int = 1) -> None:
        self.cut[section] = self.cut.get(section, 0) + number

    def text(self, value: str, section: str, limit: int = MAX_TEXT) -> str:
        size = len(value)
        if size <= limit and size < self.left:
            self.left -= size + 1
            return value
        keep = max(0, min(limit, self.left - 1))
        self._count(section)
        kept = f"{value[:keep]}…[cut {size - keep} chars]"
        self.left -= len(kept) + 1
        return kept

    def entries(self, entries: list[Any] | tuple[Any, ...], section: str) -> list[Any]:
        """Events or links: each whole (its fields bounded, its attribute map too) while the budget lasts."""
        result: list[Any] = []
        for number, entry in enumerate(entries):
            if number >= MAX_ITEMS or self.left <= 0:
                self._count(section, len(entries) - number)
                break
            if isinstance(entry, Mapping):
                self.left -= 1
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
                return self.text(NESTING_MARKER, section)
            return self.mapping(value, section, depth + 1) if isinstance(value, Mapping) else self.items(value, section, depth + 1)
        # a number's digits (6 bytes a unit, at least one), true, false or null: one unit
        self.left -= 1 + value.bit_length() // 16 if type(value) is int else 5 if type(value) is float else 1
        return value

    def mapping(self, value: Mapping[Any, Any], section: str, depth: int) -> dict[str, Any]:
        self.left -= 1
        result: dict[str, Any] = {}
        for number, (key, item) in enumerate(value.items()):
            if number >= MAX_ENTRIES or self.left <= 0:
                self._count(section, len(value) - number)
                break
            result[distinct_key(result, self.text(str(key), section, MAX_KEY))] = self.value(item, section, depth)
        return result

    def items(self, value: list[Any] | tuple[Any, ...], section: str, depth: int) -> list[Any]:
        self.left -= 1
        result = []
        for number, item in enumerate(value):
            if number >= MAX_ITEMS or self.left <= 0:
                self._count(section, len(value) - number)
                break
            result.append(self.value(item, section, depth))
        return result
