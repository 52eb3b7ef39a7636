"""Slot reconciliation: attributed writes plus a before/after diff, so no slot change goes unseen.

``reconcile_slot_diff(before, after, writes)`` is pure. Attributed writes pass through (they are
journaled when they happen); a slot whose change is not explained by them becomes an unattributed
diff: a direct mutation with no write, a direct mutation *before* the first attributed write (its
recorded ``previous`` differs from the snapshot), or one *after* the last attributed write (the
final shape differs from the value last written). Dict- and list-valued slots compare deeply.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = ["MISSING", "UNKNOWN", "AttributedWrite", "SlotDiff", "copy_value", "equal", "reconcile_slot_diff", "snapshot"]


class _Sentinel:
    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name

    def __deepcopy__(self, memo: dict[int, Any]) -> _Sentinel:
        return self


MISSING: Any = _Sentinel("MISSING")
"""A slot absent from the mapping (recorded as ``null``)."""
UNKNOWN: Any = _Sentinel("UNKNOWN")
"""A write whose previous value nobody knows (no slot mapping to read it from)."""


class AttributedWrite(NamedTuple):
    slot: str
    value: Any
    previous: Any = UNKNOWN


@dataclass(frozen=True)
class SlotDiff:
    slot: str
    value: Any
    previous: Any


_IMMUTABLE = (str, int, float, bool, type(None), bytes)


def copy_value(value: Any) -> Any:
    """A deep copy of one slot value; immutable scalars and uncopyable values are kept as they are."""
    if type(value) in _IMMUTABLE:
        return value
    try:
        return copy.deepcopy(value)
    except Exception:  # noqa: BLE001 - an odd value must not break the app's turn
        return value


def snapshot(slots: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A deep copy of a slot mapping (None stays None)."""
    if slots is None:
        return None
    return {key: copy_value(value) for key, value in list(slots.items())}


def equal(left: Any, right: Any) -> bool:
    """``left == right``, by identity when comparing them fails."""
    try:
        return bool(left == right)
    except Exception:  # noqa: BLE001
        return left is right


def reconcile_slot_diff(
    before: Mapping[str, Any], after: Mapping[str, Any], writes: Sequence[AttributedWrite]
) -> list[SlotDiff]:
    """The changes between ``before`` and ``after`` that ``writes`` do not explain, in slot order."""
    by_slot: dict[str, list[AttributedWrite]] = {}
    for write in writes:
        by_slot.setdefault(write.slot, []).append(write)
    diffs: list[SlotDiff] = []
    for slot in list(dict.fromkeys([*before, *after, *by_slot])):
        old = before.get(slot, MISSING)
        new = after.get(slot, MISSING)
        slot_writes = by_slot.get(slot)
        if not slot_writes:
            if not equal(old, new):
                diffs.append(SlotDiff(slot, new, old))
            continue
        first_previous = slot_writes[0].previous
        if first_previous is not UNKNOWN and not equal(first_previous, old):
            diffs.append(SlotDiff(slot, first_previous, old))
        last_written = slot_writes[-1].value
        if not equal(last_written, new):
            diffs.append(SlotDiff(slot, new, last_written))
    return diffs
