"""A framework's own state object read as slots: its fields as a mapping, and what changed in it.

    fields = fields_of(context)              # a dict, a dataclass, a pydantic model, an object: its fields
    for slot, value in changed(context, slots):   # the fields that differ from ``slots`` (copied)
        otel_session.slot_write(slot, value, source=…)

The Agents SDK's run context (``RunContextWrapper.context``) is such an object: the app's tools
and hooks change it in place, so the instrumentor compares it with the slots recorded so far.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from otel_session.instrument._log import warn_once
from otel_session.instrument.reconcile import MISSING, copy_value, equal

__all__ = ["INPUT_SOURCE", "changed", "fields_of"]

INPUT_SOURCE = "input"
"""The ``source`` of the slot writes of what the app gave a run (a graph's input, a run's context)."""

_SCALARS = (str, bytes, int, float, bool)


def fields_of(state: Any) -> dict[str, Any] | None:
    """The fields of ``state``: a mapping's text keys, a dataclass's fields, a pydantic model's dump,
    else an object's public attributes; None for no state (None, a scalar, an object without fields)
    and for one that fails to be read (said once: the app's object is the app's, never our failure)."""
    try:
        return _fields(state)
    except Exception:  # noqa: BLE001
        warn_once("state:read", "otel_session: a run's state object could not be read; its slots are not recorded",
                  exc_info=True)
        return None


def _fields(state: Any) -> dict[str, Any] | None:
    if state is None or isinstance(state, _SCALARS):
        return None
    if isinstance(state, Mapping):
        return {key: value for key, value in state.items() if isinstance(key, str)}
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        return {field.name: getattr(state, field.name, None) for field in dataclasses.fields(state)}
    dump = getattr(state, "model_dump", None)
    if callable(dump):
        dumped = dump()
        return dict(dumped) if isinstance(dumped, Mapping) else None
    attributes = getattr(state, "__dict__", None)
    if isinstance(attributes, dict):
        return {key: value for key, value in attributes.items() if not key.startswith("_")}
    return None


def changed(state: Any, slots: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """``(slot, value)`` for each field of ``state`` that differs from ``slots`` (a field gone is
    None; a None field never recorded is left out: it is as unset as an absent slot), the value a
    deep copy: later changes in place are seen at the next comparison."""
    fields = fields_of(state)
    if fields is None:
        return  # none to compare: not a state that emptied
    for name, value in fields.items():
        before = slots.get(name, MISSING)
        if not (before is MISSING and value is None) and not equal(before, value):
            yield name, copy_value(value)
    for name in [name for name in slots if name not in fields and slots[name] is not None]:
        yield name, None

