"""The deterministic replay reducer (SPEC §7.1): journal events through a ``seq`` → replay state.

Contract::

    state = replay_state(events, seq=None)   # pure; the state after every event with seq <= seq
    canonical_json(state) -> bytes           # the byte-exact form the JavaScript twin also produces
    replayer = Replayer(events)              # seeks through checkpoints every 256 events
    replayer.state_at(seq) -> dict
    replayer.extend(more_events)             # a live tail grows the journal

The same rules are implemented in ``viewer/static/reducer.js``; the shared fixtures in
``fixtures/replay/`` hold the Python output at every ``seq`` and the JavaScript tests must match
them byte for byte. Regenerate them with ``python -m otel_session.replay.reduce --regenerate fixtures/replay``.

Rules (``docs/replay-and-facts.md`` explains them):

- Events are processed in ``seq`` order only; ``at`` is copied into tool times and never reorders.
  A skipped ``seq`` adds a ``seq_gap`` diagnostic; a repeated one adds ``duplicate_seq`` and is ignored.
- ``assistant_delta`` appends to the block ``payload.index`` of ``message_id`` (kinds ``text``,
  ``thinking``, ``tool_call``). A settled ``message_finished`` replaces the fold with its final
  content; if deltas were folded and differ, a ``reconcile_mismatch`` diagnostic is added and the
  final content wins. An unsettled ``message_finished`` keeps the fold (partial) and is marked
  finished. Deltas after a message finished add ``delta_after_finish`` and change nothing.
- Unknown event types advance ``seq`` and change nothing else.

Returned states are plain JSON values. States from a :class:`Replayer` share their message and tool
objects with its cache: treat them as read-only (serialize or copy before changing them).
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import operator
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from enum import Enum
from pathlib import Path
from typing import Any

from otel_session.bundle.read import parse_journal

__all__ = [
    "CHECKPOINT_INTERVAL",
    "ReducerCode",
    "Replayer",
    "canonical_json",
    "expected_states",
    "iter_states",
    "replay_state",
]

CHECKPOINT_INTERVAL = 256
"""Events between two reducer checkpoints (a seek folds at most this many events)."""

_BLOCK_KINDS = ("text", "thinking", "tool_call")
_TOOL_STATUSES = ("ok", "error")


class ReducerCode(str, Enum):
    """Diagnostic codes the reducer adds to a replay state."""

    SEQ_GAP = "seq_gap"
    DUPLICATE_SEQ = "duplicate_seq"
    RECONCILE_MISMATCH = "reconcile_mismatch"
    DELTA_AFTER_FINISH = "delta_after_finish"
    MALFORMED_EVENT = "malformed_event"
    UPSTREAM_DROP = "upstream_drop"


_SEVERITY = {
    ReducerCode.SEQ_GAP: "error",
    ReducerCode.DUPLICATE_SEQ: "error",
    ReducerCode.RECONCILE_MISMATCH: "warning",
    ReducerCode.DELTA_AFTER_FINISH: "warning",
    ReducerCode.MALFORMED_EVENT: "warning",
    ReducerCode.UPSTREAM_DROP: "warning",
}

_NO_PAYLOAD: dict[str, Any] = {}


class _Message:
    """One message being folded. Copied on write when it belongs to an older generation."""

    __slots__ = ("_rendered", "blocks", "finished", "folded", "message_id", "role", "settled", "turn_index")

    def __init__(self, message_id: str) -> None:
        self.message_id = message_id
        self.role: str | None = None
        self.turn_index: int | None = None
        self.settled = False
        self.finished = False
        self.folded = False
        self.blocks: dict[int, list[str]] = {}  # index -> [kind, text]
        self._rendered: dict[str, Any] | None = None

    def copy(self) -> _Message:
        clone = _Message(self.message_id)
        clone.role, clone.turn_index = self.role, self.turn_index
        clone.settled, clone.finished, clone.folded = self.settled, self.finished, self.folded
        clone.blocks = {index: list(block) for index, block in self.blocks.items()}
        return clone

    def render(self) -> dict[str, Any]:
        if self._rendered is None:
            self._rendered = {
                "message_id": self.message_id,
                "role": self.role,
                "turn_index": self.turn_index,
                "settled": self.settled,
                "finished": self.finished,
                "blocks": [
                    {"index": index, "kind": self.blocks[index][0], "text": self.blocks[index][1]}
                    for index in sorted(self.blocks)
                ],
            }
        return self._rendered


class _Tool:
    __slots__ = ("_rendered", "fields")

    def __init__(self, tool_call_id: str) -> None:
        self.fields: dict[str, Any] = {
            "tool_call_id": tool_call_id,
            "name": None,
            "status": "running",
            "updates": 0,
            "started_at": None,
            "finished_at": None,
            "turn_index": None,
            "arguments": None,
            "result": None,
            "error": None,
        }
        self._rendered: dict[str, Any] | None = None

    def copy(self) -> _Tool:
        clone = _Tool(self.fields["tool_call_id"])
        clone.fields = dict(self.fields)
        return clone

    def render(self) -> dict[str, Any]:
        if self._rendered is None:
            self._rendered = dict(self.fields)
        return self._rendered


class _State:
    """The reducer's state. A checkpoint is a frozen state; a seek works on an overlay of one
    (``snapshot()``): it holds only the messages, tools, slots, verdicts and diagnostics changed or
    added since, copies a message or tool on its first change, and renders by patching the
    checkpoint's rendered lists, so a seek costs O(events folded) plus one copy of those lists."""

    __slots__ = (
        "_lists",
        "base",
        "diagnostics",
        "messages",
        "run_id",
        "run_status",
        "seq",
        "slots",
        "state",
        "tools",
        "turn_index",
        "verdicts",
    )

    def __init__(self, base: _State | None = None) -> None:
        self.seq = 0 if base is None else base.seq
        self.run_id: str | None = None if base is None else base.run_id
        self.turn_index: int | None = None if base is None else base.turn_index
        self.state: str | None = None if base is None else base.state
        self.run_status: str | None = None if base is None else base.run_status
        # Without a base these hold everything; over a base, what changed since (in first-change order).
        self.messages: dict[str, _Message] = {}
        self.tools: dict[str, _Tool] = {}
        self.slots: dict[str, Any] = {}
        self.verdicts: list[dict[str, Any]] = []
        self.diagnostics: list[dict[str, Any]] = []
        self.base = base
        self._lists: tuple[list, dict, list, dict] | None = None

    def snapshot(self) -> _State:
        """Return a working state over this frozen one (which it never changes)."""
        return _State(self)

    def freeze(self) -> _State:
        """Merge the overlay into full collections; the state never changes again (a checkpoint)."""
        base = self.base
        if base is not None:
            self.messages = {**base.messages, **self.messages}
            self.tools = {**base.tools, **self.tools}
            self.slots = {**base.slots, **self.slots}
            self.verdicts = base.verdicts + self.verdicts
            self.diagnostics = base.diagnostics + self.diagnostics
            self.base = None
        return self

    def rendered_lists(self) -> tuple[list, dict, list, dict]:
        """A checkpoint's rendered messages and tools with their positions, built once."""
        if self._lists is None:
            self._lists = (
                [message.render() for message in self.messages.values()],
                {message_id: position for position, message_id in enumerate(self.messages)},
                [tool.render() for tool in self.tools.values()],
                {tool_call_id: position for position, tool_call_id in enumerate(self.tools)},
            )
        return self._lists

    def render(self) -> dict[str, Any]:
        base = self.base
        if base is None:
            messages = [message.render() for message in self.messages.values()]
            tools = [tool.render() for tool in self.tools.values()]
            slots, verdicts, diagnostics = dict(self.slots), list(self.verdicts), list(self.diagnostics)
        else:
            base_messages, message_positions, base_tools, tool_positions = base.rendered_lists()
            messages = _patched(base_messages, message_positions, self.messages)
            tools = _patched(base_tools, tool_positions, self.tools)
            slots = {**base.slots, **self.slots}
            verdicts, diagnostics = base.verdicts + self.verdicts, base.diagnostics + self.diagnostics
        return {
            "seq": self.seq,
            "run_id": self.run_id,
            "turn_index": self.turn_index,
            "state": self.state,
            "run_status": self.run_status,
            "messages": messages,
            "tools": tools,
            "slots": slots,
            "verdicts": verdicts,
            "diagnostics": diagnostics,
        }

    # -- folding -----------------------------------------------------------------------------

    def diagnose(self, code: ReducerCode, message: str, seq: int) -> None:
        self.diagnostics.append({"code": code.value, "severity": _SEVERITY[code], "message": message, "seq": seq})

    def find_message(self, message_id: str) -> _Message | None:
        """The message as it is now, without taking it for a change."""
        message = self.messages.get(message_id)
        if message is None and self.base is not None:
            message = self.base.messages.get(message_id)
        return message

    def message(self, message_id: str) -> _Message:
        """The message, ready to change (created, or copied from the base on its first change)."""
        message = self.messages.get(message_id)
        if message is None:
            existing = None if self.base is None else self.base.messages.get(message_id)
            message = self.messages[message_id] = _Message(message_id) if existing is None else existing.copy()
        else:
            message._rendered = None
        return message

    def tool(self, tool_call_id: str) -> _Tool:
        """The tool call, ready to change (created, or copied from the base on its first change)."""
        tool = self.tools.get(tool_call_id)
        if tool is None:
            existing = None if self.base is None else self.base.tools.get(tool_call_id)
            tool = self.tools[tool_call_id] = _Tool(tool_call_id) if existing is None else existing.copy()
        else:
            tool._rendered = None
        return tool

    def apply(self, event: dict[str, Any]) -> None:
        seq = event["seq"]
        if seq != self.seq + 1:
            if seq <= self.seq:
                self.diagnose(ReducerCode.DUPLICATE_SEQ, f"seq {_num(seq)} repeats; the later record is ignored", seq)
                return
            self.diagnose(ReducerCode.SEQ_GAP, f"expected seq {_num(self.seq + 1)}, found {_num(seq)}", seq)
        self.seq = seq
        run_id = event.get("run_id")
        if isinstance(run_id, str):
            self.run_id = run_id
        handler = _HANDLERS.get(event.get("type"))
        if handler is not None:
            payload = event.get("payload")
            handler(self, event, payload if isinstance(payload, dict) else _NO_PAYLOAD)


def _patched(base: list, positions: dict[str, int], changed: dict[str, Any]) -> list:
    """``base`` (a checkpoint's rendered items) with the items ``changed`` since re-rendered.

    ``changed`` is in first-change order and an item is created by its first change, so new items
    come out in creation order."""
    rendered = base.copy()
    for key, item in changed.items():
        position = positions.get(key)
        if position is None:
            rendered.append(item.render())
        else:
            rendered[position] = item.render()
    return rendered


def _num(value: int) -> str:
    """An integer in a diagnostic message, written as JavaScript writes it (``1e+22`` past 1e21)."""
    return str(value) if -_MAX_SAFE_INTEGER <= value <= _MAX_SAFE_INTEGER else _js_number(float(value))


def _int_or_none(value: Any) -> int | None:
    """An integer, as JavaScript sees one: ``3`` and ``3.0`` are both 3 (JSON cannot tell them apart there)."""
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    return None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _require_id(state: _State, event: dict[str, Any], field: str) -> str | None:
    value = event.get(field)
    if isinstance(value, str) and value:
        return value
    state.diagnose(ReducerCode.MALFORMED_EVENT, f"{event.get('type')} without {field}; ignored", event["seq"])
    return None


def _on_run_started(state: _State, event: dict[str, Any], payload: dict[str, Any]) -> None:
    state.run_status = "running"


def _on_run_finished(state: _State, event: dict[str, Any], payload: dict[str, Any]) -> None:
    state.run_status = _str_or_none(payload.get("status")) or "unknown"


def _on_turn_started(state: _State, event: dict[str, Any], payload: dict[str, Any]) -> None:
    turn_index = _int_or_none(event.get("turn_index"))
    if turn_index is None:
        turn_index = 0 if state.turn_index is None else state.turn_index + 1
    state.turn_index = turn_index
    state.state = _str_or_none(payload.get("state")) or state.state


def _on_turn_finished(state: _State, event: dict[str, Any], payload: dict[str, Any]) -> None:
    state.state = _str_or_none(payload.get("state")) or state.state


def _touch_message(state: _State, event: dict[str, Any]) -> _Message | None:
    message_id = _require_id(state, event, "message_id")
    if message_id is None:
        return None
    return _adopt_turn(state, state.message(message_id), event)


def _adopt_turn(state: _State, message: _Message, event: dict[str, Any]) -> _Message:
    """A message belongs to the turn of the first of its events that knows one."""
    if message.turn_index is None:
        message.turn_index = _int_or_none(event.get("turn_index"))
        if message.turn_index is None:
            message.turn_index = state.turn_index
    return message


def _on_message_started(state: _State, event: dict[str, Any], payload: dict[str, Any]) -> None:
    message = _touch_message(state, event)
    if message is not None:
        message.role = _str_or_none(payload.get("role")) or message.role


def _on_assistant_delta(state: _State, event: dict[str, Any], payload: dict[str, Any]) -> None:
    index, delta, kind = payload.get("index"), payload.get("delta"), payload.get("kind", "text")
    if type(index) is not int:
        index = _int_or_none(index)
    if index is None or not isinstance(delta, str) or kind not in _BLOCK_KINDS:
        state.diagnose(
            ReducerCode.MALFORMED_EVENT, "assistant_delta needs an integer index, a string delta and a known kind; ignored",
            event["seq"],
        )
        return
    message_id = event.get("message_id")
    message = state.messages.get(message_id) if isinstance(message_id, str) else None
    if message is not None and not message.finished:  # the hot path: a message this state already changed
        message._rendered = None
        if message.turn_index is None:
            _adopt_turn(state, message, event)
    else:
        existing = message if message is not None else state.find_message(message_id) if isinstance(message_id, str) else None
        if existing is not None and existing.finished:
            state.diagnose(
                ReducerCode.DELTA_AFTER_FINISH, f"delta for message {existing.message_id} after it finished; ignored",
                event["seq"],
            )
            return
        message = _touch_message(state, event)
        if message is None:
            return
    if message.role is None:
        message.role = "assistant"
    message.folded = True
    block = message.blocks.get(index)
    if block is None:
        message.blocks[index] = [kind, delta]
    else:
        block[1] += delta


def _final_blocks(content: Any) -> dict[int, list[str]]:
    blocks: dict[int, list[str]] = {}
    if not isinstance(content, list):
        return blocks
    for position, entry in enumerate(content):
        if not isinstance(entry, dict):
            continue
        index = _int_or_none(entry.get("index"))
        kind = entry.get("kind")
        text = entry.get("text")
        blocks[position if index is None else index] = [
            kind if kind in _BLOCK_KINDS else "text",
            text if isinstance(text, str) else "",
        ]
    return blocks


def _on_message_finished(state: _State, event: dict[str, Any], payload: dict[str, Any]) -> None:
    message = _touch_message(state, event)
    if message is None:
        return
    message.finished = True
    final = _final_blocks(payload.get("content"))
    if payload.get("settled") is True:
        message.settled = True
        if message.folded and final != message.blocks:
            differing = sorted(
                index for index in set(final) | set(message.blocks) if final.get(index) != message.blocks.get(index)
            )
            state.diagnose(
                ReducerCode.RECONCILE_MISMATCH,
                f"message {message.message_id}: folded deltas differ from the final content at block "
                f"{', '.join(map(_num, differing))}; the final content wins",
                event["seq"],
            )
        message.blocks = final
    elif not message.blocks:
        message.blocks = final


def _touch_tool(state: _State, event: dict[str, Any]) -> _Tool | None:
    tool_call_id = _require_id(state, event, "tool_call_id")
    if tool_call_id is None:
        return None
    tool = state.tool(tool_call_id)
    if tool.fields["turn_index"] is None:
        turn_index = _int_or_none(event.get("turn_index"))
        tool.fields["turn_index"] = state.turn_index if turn_index is None else turn_index
    return tool


def _on_tool_started(state: _State, event: dict[str, Any], payload: dict[str, Any]) -> None:
    tool = _touch_tool(state, event)
    if tool is not None:
        fields = tool.fields
        fields["name"] = _str_or_none(payload.get("name")) or fields["name"]
        fields["status"] = "running"
        fields["started_at"] = event.get("at")
        fields["arguments"] = payload.get("arguments")


def _on_tool_updated(state: _State, event: dict[str, Any], payload: dict[str, Any]) -> None:
    tool = _touch_tool(state, event)
    if tool is not None:
        tool.fields["updates"] += 1


def _on_tool_finished(state: _State, event: dict[str, Any], payload: dict[str, Any]) -> None:
    tool = _touch_tool(state, event)
    if tool is not None:
        fields = tool.fields
        status = payload.get("status")
        fields["status"] = status if status in _TOOL_STATUSES else "error"
        fields["finished_at"] = event.get("at")
        fields["result"] = payload.get("result")
        fields["error"] = payload.get("error")


def _on_slot(state: _State, event: dict[str, Any], payload: dict[str, Any]) -> None:
    slot = payload.get("slot")
    if not isinstance(slot, str):
        state.diagnose(ReducerCode.MALFORMED_EVENT, f"{event['type']} without a slot name; ignored", event["seq"])
        return
    state.slots[slot] = payload.get("value")


def _on_verdict(state: _State, event: dict[str, Any], payload: dict[str, Any]) -> None:
    turn_index = _int_or_none(event.get("turn_index"))
    candidates = payload.get("candidates")
    state.verdicts.append(
        {
            "seq": event["seq"],
            "turn_index": state.turn_index if turn_index is None else turn_index,
            "from": payload.get("from"),
            "to": payload.get("to"),
            "reason": payload.get("reason"),
            "candidates": candidates if isinstance(candidates, list) else [],
        }
    )
    state.state = _str_or_none(payload.get("to")) or state.state


def _on_upstream_drop(state: _State, event: dict[str, Any], payload: dict[str, Any]) -> None:
    events = _int_or_none(payload.get("dropped_events")) or 0
    attributes = _int_or_none(payload.get("dropped_attributes")) or 0
    state.diagnose(
        ReducerCode.UPSTREAM_DROP,
        f"a span lost {_num(events)} events and {_num(attributes)} attributes before it was received",
        event["seq"],
    )


_HANDLERS = {
    "run_started": _on_run_started,
    "run_finished": _on_run_finished,
    "turn_started": _on_turn_started,
    "turn_finished": _on_turn_finished,
    "message_started": _on_message_started,
    "assistant_delta": _on_assistant_delta,
    "message_finished": _on_message_finished,
    "tool_execution_started": _on_tool_started,
    "tool_execution_updated": _on_tool_updated,
    "tool_execution_finished": _on_tool_finished,
    "slot_write": _on_slot,
    "slot_diff": _on_slot,
    "transition_verdict": _on_verdict,
    "upstream_drop": _on_upstream_drop,
}


_by_seq = operator.itemgetter("seq")


def _ordered(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records with an integer ``seq``, stably sorted by it (file order breaks no ties)."""
    return sorted([event for event in events if isinstance(event, dict) and type(event.get("seq")) is int], key=_by_seq)


def replay_state(events: Sequence[dict[str, Any]], seq: int | None = None) -> dict[str, Any]:
    """Return the replay state after every event with ``seq <= seq`` (all events when ``None``)."""
    state = _State()
    for event in _ordered(events):
        if seq is not None and event["seq"] > seq:
            break
        state.apply(event)
    return state.render()


def iter_states(events: Sequence[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Yield the initial state, then the state after each event in ``seq`` order (one fold)."""
    state = _State()
    yield state.render()
    for event in _ordered(events):
        state.apply(event)
        yield state.render()


class Replayer:
    """Seekable replay of one journal. Checkpoints every :data:`CHECKPOINT_INTERVAL` events are
    built lazily as seeks reach them (a cache, never written anywhere), so a seek folds at most
    that many events whatever its position."""

    def __init__(self, events: Iterable[dict[str, Any]] = ()) -> None:
        self._events: list[dict[str, Any]] = []
        self._seqs: list[int] = []
        self._checkpoints: list[_State] = [_State()]  # state after the first k * interval events
        self.extend(events)

    def extend(self, events: Iterable[dict[str, Any]]) -> None:
        """Add events (e.g. from a live tail). Out-of-order additions drop the affected checkpoints."""
        added = _ordered(events)
        if not added:
            return
        if self._seqs and added[0]["seq"] < self._seqs[-1]:
            merged = _ordered(self._events + added)
            first_changed = bisect.bisect_left(self._seqs, added[0]["seq"])
            del self._checkpoints[first_changed // CHECKPOINT_INTERVAL + 1 :]
            self._events = merged
        else:
            self._events += added
        self._seqs = [event["seq"] for event in self._events]

    def __len__(self) -> int:
        return len(self._events)

    @property
    def last_seq(self) -> int:
        """The highest ``seq`` known (0 for an empty journal)."""
        return self._seqs[-1] if self._seqs else 0

    def state_at(self, seq: int | None = None) -> dict[str, Any]:
        """Return the replay state after every event with ``seq <= seq`` (the newest when ``None``)."""
        count = len(self._events) if seq is None else bisect.bisect_right(self._seqs, seq)
        slot = count // CHECKPOINT_INTERVAL
        self._build_checkpoints(slot)
        state = self._checkpoints[slot].snapshot()
        for event in self._events[slot * CHECKPOINT_INTERVAL : count]:
            state.apply(event)
        return state.render()

    def _build_checkpoints(self, slot: int) -> None:
        while len(self._checkpoints) <= slot:
            built = len(self._checkpoints) - 1
            state = self._checkpoints[built].snapshot()
            for event in self._events[built * CHECKPOINT_INTERVAL : (built + 1) * CHECKPOINT_INTERVAL]:
                state.apply(event)
            self._checkpoints.append(state.freeze())


# -- canonical JSON ------------------------------------------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")
_MAX_SAFE_INTEGER = 2**53


def _js_number(value: float) -> str:
    """Format a float exactly as ECMAScript ``Number.prototype.toString`` (hence ``JSON.stringify``)."""
    if not math.isfinite(value):
        return "null"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    text = repr(abs(value))  # the shortest round-trip digits, as in JavaScript
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    significant = (whole + fraction).lstrip("0")
    # value = 0.<digits> * 10**n, with digits free of leading and trailing zeros (ECMA-262 Number::toString)
    n = len(whole) + int(exponent or 0) - (len(whole + fraction) - len(significant))
    digits = significant.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * -n + digits
    else:
        e = n - 1
        body = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return sign + body


def _escape_surrogates(text: str) -> str:
    """Escape lone surrogates as ``JSON.stringify`` does (they cannot be encoded as UTF-8)."""
    if _SURROGATE.search(text):
        return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
    return text


def _js_string(value: str) -> str:
    return _escape_surrogates(json.dumps(value, ensure_ascii=False))


def _utf16_order(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _encode(value: Any, parts: list[str]) -> None:
    if isinstance(value, str):
        parts.append(_js_string(value))
    elif value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, int):
        parts.append(str(value) if -_MAX_SAFE_INTEGER <= value <= _MAX_SAFE_INTEGER else _js_number(float(value)))
    elif isinstance(value, float):
        parts.append(_js_number(value))
    elif isinstance(value, dict):
        parts.append("{")
        items = sorted(((str(key), item) for key, item in value.items()), key=lambda pair: _utf16_order(pair[0]))
        for position, (key, item) in enumerate(items):
            if position:
                parts.append(",")
            parts.append(_js_string(key))
            parts.append(":")
            _encode(item, parts)
        parts.append("}")
    elif isinstance(value, (list, tuple)):
        parts.append("[")
        for position, item in enumerate(value):
            if position:
                parts.append(",")
            _encode(item, parts)
        parts.append("]")
    else:
        raise TypeError(f"{type(value).__name__} is not a JSON value")


def _plain(value: Any) -> bool:
    """True when the C ``json`` encoder already writes the canonical form: no floats, integers
    within ±2**53, ASCII object keys (so code point order is UTF-16 order)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str or item is None or kind is bool:
            continue
        if kind is int:
            if not -_MAX_SAFE_INTEGER <= item <= _MAX_SAFE_INTEGER:
                return False
        elif kind is dict:
            for key in item:
                if type(key) is not str or not key.isascii():
                    return False
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
        else:
            return False
    return True


def canonical_json(value: Any) -> bytes:
    """Return the canonical JSON of ``value``: UTF-8, no whitespace, object keys sorted by UTF-16
    code units, numbers and string escapes exactly as JavaScript's ``JSON.stringify`` writes them
    (non-finite numbers become ``null``, lone surrogates are escaped as ``\\udxxx``)."""
    if _plain(value):
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        return _escape_surrogates(text).encode("utf-8")
    parts: list[str] = []
    _encode(value, parts)
    return "".join(parts).encode("utf-8")


# -- shared fixtures -----------------------------------------------------------------------------


def expected_states(journal: bytes) -> bytes:
    """The ``*.expected.ndjson`` body for a journal: the canonical state before any event, then
    after each complete record in ``seq`` order (garbage lines skipped, a torn tail left out)."""
    events, _garbage, _torn = parse_journal(journal)
    return b"".join(canonical_json(state) + b"\n" for state in iter_states(events))


def _regenerate(directory: Path, *, check: bool) -> int:
    """Write (or with ``check`` only compare) ``<name>.expected.ndjson`` beside each journal."""
    stale = []
    for journal in sorted(directory.glob("*.ndjson")):
        if journal.name.endswith(".expected.ndjson"):
            continue
        target = journal.with_name(journal.name[: -len(".ndjson")] + ".expected.ndjson")
        body = expected_states(journal.read_bytes())
        if target.exists() and target.read_bytes() == body:
            continue
        stale.append(target)
        if not check:
            target.write_bytes(body)
    verb = "stale" if check else "rewrote"
    for target in stale:
        print(f"{verb}: {target}", file=sys.stderr)
    return 1 if check and stale else 0


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m otel_session.replay.reduce", description="Regenerate or check the shared reducer fixtures.")
    parser.add_argument("directory", type=Path, help="fixture directory holding *.ndjson journals")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--regenerate", action="store_true", help="write <name>.expected.ndjson for every journal")
    mode.add_argument("--check", action="store_true", help="exit 1 if any expectation is stale")
    args = parser.parse_args(argv)
    return _regenerate(args.directory, check=args.check)


if __name__ == "__main__":
    sys.exit(_main())
