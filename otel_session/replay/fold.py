"""The reducer's fold (SPEC §7.1): one journal record at a time into a replay state.

Contract::

    replay_state(events, seq=None) -> dict   # pure; the state after every event with seq <= seq
    iter_states(events)                      # the initial state, then the state after each event
    State()                                  # the mutable fold; state.apply(event), state.render()
    state.snapshot() / state.freeze()        # an overlay over a frozen checkpoint / a new checkpoint
    ordered_events(records) -> list          # records with an integer seq, stably sorted by it

``State`` and ``ordered_events`` serve the checkpointed readers of this package (``replayer``,
``index``); callers outside it use ``otel_session.replay.reduce``. The rules are listed there.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Sequence
from enum import Enum
from typing import Any

from otel_session.replay.canonical import MAX_SAFE_INTEGER, js_number

__all__ = ["CHECKPOINT_INTERVAL", "ReducerCode", "State", "iter_states", "ordered_events", "replay_state"]

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


class State:
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

    def __init__(self, base: State | None = None) -> None:
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

    def snapshot(self) -> State:
        """Return a working state over this frozen one (which it never changes)."""
        return State(self)

    def freeze(self) -> State:
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

    def merge(self, overlay: State) -> None:
        """Take ``overlay``'s changes into this state in place (a builder's full state; nothing else holds it)."""
        self.seq, self.run_id, self.turn_index = overlay.seq, overlay.run_id, overlay.turn_index
        self.state, self.run_status = overlay.state, overlay.run_status
        self.messages.update(overlay.messages)
        self.tools.update(overlay.tools)
        self.slots.update(overlay.slots)
        self.verdicts += overlay.verdicts
        self.diagnostics += overlay.diagnostics
        self._lists = None

    def adopt(self, messages: list[tuple[dict[str, Any], bool]], tools: list[dict[str, Any]]) -> None:
        """Take rendered messages (each with its ``folded`` flag, which rendering leaves out) and
        tools back into this state, as a restored checkpoint holds them."""
        for rendered, folded in messages:
            message = _Message(rendered["message_id"])
            message.role, message.turn_index = rendered["role"], rendered["turn_index"]
            message.settled, message.finished, message.folded = rendered["settled"], rendered["finished"], folded
            message.blocks = {block["index"]: [block["kind"], block["text"]] for block in rendered["blocks"]}
            self.messages[message.message_id] = message
        for rendered in tools:
            tool = _Tool(rendered["tool_call_id"])
            tool.fields = dict(rendered)
            self.tools[rendered["tool_call_id"]] = tool
        self._lists = None

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
    return str(value) if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER else js_number(float(value))


def _int_or_none(value: Any) -> int | None:
    """An integer, as JavaScript sees one: ``3`` and ``3.0`` are both 3 (JSON cannot tell them apart there)."""
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    return None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _require_id(state: State, event: dict[str, Any], field: str) -> str | None:
    value = event.get(field)
    if isinstance(value, str) and value:
        return value
    state.diagnose(ReducerCode.MALFORMED_EVENT, f"{event.get('type')} without {field}; ignored", event["seq"])
    return None


def _on_run_started(state: State, event: dict[str, Any], payload: dict[str, Any]) -> None:
    state.run_status = "running"


def _on_run_finished(state: State, event: dict[str, Any], payload: dict[str, Any]) -> None:
    state.run_status = _str_or_none(payload.get("status")) or "unknown"


def _on_turn_started(state: State, event: dict[str, Any], payload: dict[str, Any]) -> None:
    turn_index = _int_or_none(event.get("turn_index"))
    if turn_index is None:
        turn_index = 0 if state.turn_index is None else state.turn_index + 1
    state.turn_index = turn_index
    state.state = _str_or_none(payload.get("state")) or state.state


def _on_turn_finished(state: State, event: dict[str, Any], payload: dict[str, Any]) -> None:
    state.state = _str_or_none(payload.get("state")) or state.state


def _touch_message(state: State, event: dict[str, Any]) -> _Message | None:
    message_id = _require_id(state, event, "message_id")
    if message_id is None:
        return None
    return _adopt_turn(state, state.message(message_id), event)


def _adopt_turn(state: State, message: _Message, event: dict[str, Any]) -> _Message:
    """A message belongs to the turn of the first of its events that knows one."""
    if message.turn_index is None:
        message.turn_index = _int_or_none(event.get("turn_index"))
        if message.turn_index is None:
            message.turn_index = state.turn_index
    return message


def _on_message_started(state: State, event: dict[str, Any], payload: dict[str, Any]) -> None:
    message = _touch_message(state, event)
    if message is not None:
        message.role = _str_or_none(payload.get("role")) or message.role


def _on_assistant_delta(state: State, event: dict[str, Any], payload: dict[str, Any]) -> None:
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


def _on_message_finished(state: State, event: dict[str, Any], payload: dict[str, Any]) -> None:
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


def _touch_tool(state: State, event: dict[str, Any]) -> _Tool | None:
    tool_call_id = _require_id(state, event, "tool_call_id")
    if tool_call_id is None:
        return None
    tool = state.tool(tool_call_id)
    if tool.fields["turn_index"] is None:
        turn_index = _int_or_none(event.get("turn_index"))
        tool.fields["turn_index"] = state.turn_index if turn_index is None else turn_index
    return tool


def _on_tool_started(state: State, event: dict[str, Any], payload: dict[str, Any]) -> None:
    tool = _touch_tool(state, event)
    if tool is not None:
        fields = tool.fields
        fields["name"] = _str_or_none(payload.get("name")) or fields["name"]
        fields["status"] = "running"
        fields["started_at"] = event.get("at")
        fields["arguments"] = payload.get("arguments")


def _on_tool_updated(state: State, event: dict[str, Any], payload: dict[str, Any]) -> None:
    tool = _touch_tool(state, event)
    if tool is not None:
        tool.fields["updates"] += 1


def _on_tool_finished(state: State, event: dict[str, Any], payload: dict[str, Any]) -> None:
    tool = _touch_tool(state, event)
    if tool is not None:
        fields = tool.fields
        status = payload.get("status")
        fields["status"] = status if status in _TOOL_STATUSES else "error"
        fields["finished_at"] = event.get("at")
        fields["result"] = payload.get("result")
        fields["error"] = payload.get("error")


def _on_slot(state: State, event: dict[str, Any], payload: dict[str, Any]) -> None:
    slot = payload.get("slot")
    if not isinstance(slot, str):
        state.diagnose(ReducerCode.MALFORMED_EVENT, f"{event['type']} without a slot name; ignored", event["seq"])
        return
    state.slots[slot] = payload.get("value")


def _on_verdict(state: State, event: dict[str, Any], payload: dict[str, Any]) -> None:
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


def _on_upstream_drop(state: State, event: dict[str, Any], payload: dict[str, Any]) -> None:
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


def ordered_events(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records with an integer ``seq``, stably sorted by it (file order breaks no ties)."""
    return sorted([event for event in events if isinstance(event, dict) and type(event.get("seq")) is int], key=_by_seq)


def replay_state(events: Sequence[dict[str, Any]], seq: int | None = None) -> dict[str, Any]:
    """Return the replay state after every event with ``seq <= seq`` (all events when ``None``)."""
    state = State()
    for event in ordered_events(events):
        if seq is not None and event["seq"] > seq:
            break
        state.apply(event)
    return state.render()


def iter_states(events: Sequence[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Yield the initial state, then the state after each event in ``seq`` order (one fold)."""
    state = State()
    yield state.render()
    for event in ordered_events(events):
        state.apply(event)
        yield state.render()
