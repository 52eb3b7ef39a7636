"""Reducer checkpoints of a sealed run kept on disk: one delta line every 256 events (SPEC §7.1).

Contract::

    built = build_checkpoints(events)        # events: one run's records in seq order
    built.lines                              # bytes of checkpoints.ndjson (line k: the state after 256·k events)
    built.objects                            # the object directory: ids, first seqs, lines changing each
    book = CheckpointBook(lines_reader, objects)   # lines_reader(k) -> parsed line k
    book.full_state(k) -> State              # the whole state at checkpoint k (every line up to k)
    book.view(k, recent=K, ids=...) -> dict  # the last K messages/tools/verdicts/diagnostics, plus ``ids``

A line holds what changed since the line before (the messages and tools changed, rendered whole,
each with its position; the verdicts and diagnostics added), the slots and scalar fields in full,
the counts, and the previous lines that added verdicts and diagnostics, so a view walks back only
through lines that matter. Checkpoints are cache: never written into a bundle, always rebuildable
from its journal (``otel_session.replay.index`` keeps and validates them).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from otel_session.replay.fold import CHECKPOINT_INTERVAL, State

__all__ = ["BuiltCheckpoints", "CheckpointBook", "build_checkpoints"]


@dataclass
class BuiltCheckpoints:
    lines: list[bytes]
    objects: dict[str, Any]
    """``{"messages": {"ids", "first_seq", "lines"}, "tools": {...}}``: per position, in creation order."""


class _Directory:
    """Per kind (messages or tools): ids in creation order, each one's first seq and the lines that changed it."""

    def __init__(self) -> None:
        self.positions: dict[str, int] = {}
        self.first_seq: list[int] = []
        self.lines: list[list[int]] = []

    def note(self, object_id: str, line: int, seq: int) -> int:
        position = self.positions.get(object_id)
        if position is None:
            position = self.positions[object_id] = len(self.first_seq)
            self.first_seq.append(seq)
            self.lines.append([])
        self.lines[position].append(line)
        return position

    def as_json(self) -> dict[str, Any]:
        return {"ids": list(self.positions), "first_seq": self.first_seq, "lines": self.lines}


def build_checkpoints(events: Sequence[dict[str, Any]]) -> BuiltCheckpoints:
    """Fold ``events`` once, writing a delta line every :data:`CHECKPOINT_INTERVAL` events."""
    full = State()
    messages, tools = _Directory(), _Directory()
    first_seen: dict[str, int] = {}
    lines = [_line(0, full, State(full), [], [], (-1, -1))]
    last_verdicts = last_diagnostics = -1
    for start in range(0, len(events) - CHECKPOINT_INTERVAL + 1, CHECKPOINT_INTERVAL):
        line = start // CHECKPOINT_INTERVAL + 1
        overlay = full.snapshot()
        for event in events[start : start + CHECKPOINT_INTERVAL]:
            overlay.apply(event)
            for key in ("message_id", "tool_call_id"):
                object_id = event.get(key)
                if isinstance(object_id, str):
                    first_seen.setdefault(key[0] + object_id, event["seq"])
        changed_messages = [
            [messages.note(message_id, line, first_seen.get("m" + message_id, overlay.seq)), message.render(), message.folded]
            for message_id, message in overlay.messages.items()
        ]
        changed_tools = [
            [tools.note(tool_call_id, line, first_seen.get("t" + tool_call_id, overlay.seq)), tool.render()]
            for tool_call_id, tool in overlay.tools.items()
        ]
        lines.append(_line(line, full, overlay, changed_messages, changed_tools, (last_verdicts, last_diagnostics)))
        if overlay.verdicts:
            last_verdicts = line
        if overlay.diagnostics:
            last_diagnostics = line
        full.merge(overlay)
    return BuiltCheckpoints(lines, {"messages": messages.as_json(), "tools": tools.as_json()})


def _line(line: int, full: State, overlay: State, changed_messages: list, changed_tools: list,
          previous: tuple[int, int]) -> bytes:
    return orjson.dumps(
        {
            "k": line,
            "seq": overlay.seq,
            "run_id": overlay.run_id,
            "turn_index": overlay.turn_index,
            "state": overlay.state,
            "run_status": overlay.run_status,
            "slots": {**full.slots, **overlay.slots},
            "messages": changed_messages,
            "tools": changed_tools,
            "verdicts": overlay.verdicts,
            "diagnostics": overlay.diagnostics,
            "counts": [len(full.messages) + sum(1 for m in overlay.messages if m not in full.messages),
                       len(full.tools) + sum(1 for t in overlay.tools if t not in full.tools),
                       len(full.verdicts) + len(overlay.verdicts), len(full.diagnostics) + len(overlay.diagnostics)],
            "previous": list(previous),
        },
        option=orjson.OPT_APPEND_NEWLINE,
    )


class CheckpointBook:
    """Restores checkpoints from their lines. ``read_line(k)`` returns line ``k`` parsed (and is
    expected to raise ``ValueError`` for a line that is not what the index promised)."""

    def __init__(self, read_line: Callable[[int], dict[str, Any]], objects: dict[str, Any]) -> None:
        self._read_line = read_line
        self._objects = objects
        self._positions: dict[str, dict[str, int]] = {}

    def full_state(self, k: int) -> State:
        """The whole reducer state after ``256·k`` events: every line up to ``k`` taken in order."""
        state = State()
        for line_number in range(1, k + 1):
            line = self._read_line(line_number)
            state.adopt([(rendered, folded) for _position, rendered, folded in line["messages"]],
                        [rendered for _position, rendered in line["tools"]])
            state.verdicts += line["verdicts"]
            state.diagnostics += line["diagnostics"]
            _take_scalars(state, line)
        return state

    def view(self, k: int, *, recent: int, ids: Iterable[str] = ()) -> dict[str, Any]:
        """Checkpoint ``k`` trimmed for a page: the last ``recent`` messages, tools, verdicts and
        diagnostics, and the messages and tools named in ``ids`` (``m:<id>``/``t:<id>``) that exist
        there. Its ``state`` is a replay state over those; ``omitted`` counts what was left out,
        ``folded`` names the messages among them that folded deltas, ``first_seq`` where each began."""
        line = self._read_line(k)
        message_count, tool_count, verdict_count, diagnostic_count = line["counts"]
        wanted = {"messages": set(range(max(0, message_count - recent), message_count)),
                  "tools": set(range(max(0, tool_count - recent), tool_count))}
        for key in ids:
            kind = "messages" if key.startswith("m:") else "tools"
            position = self._position(kind, key[2:])
            if position is not None and position < (message_count if kind == "messages" else tool_count):
                wanted[kind].add(position)
        lines: dict[int, dict[str, Any]] = {k: line}
        found = {kind: self._versions(kind, sorted(positions), k, lines) for kind, positions in wanted.items()}
        state = State()
        state.adopt([(rendered, folded) for rendered, folded in found["messages"]], [rendered for rendered, _ in found["tools"]])
        state.verdicts = self._tail(k, 0, "verdicts", recent, lines)
        state.diagnostics = self._tail(k, 1, "diagnostics", recent, lines)
        _take_scalars(state, line)
        first_seq = {
            **{f"m:{rendered['message_id']}": seq for (rendered, _), seq in zip(found["messages"], self._first(found, "messages"))},
            **{f"t:{rendered['tool_call_id']}": seq for (rendered, _), seq in zip(found["tools"], self._first(found, "tools"))},
        }
        return {
            "state": state.render(),
            "omitted": {
                "messages": message_count - len(found["messages"]),
                "tools": tool_count - len(found["tools"]),
                "verdicts": verdict_count - len(state.verdicts),
                "diagnostics": diagnostic_count - len(state.diagnostics),
            },
            "folded": [rendered["message_id"] for rendered, folded in found["messages"] if folded],
            "first_seq": first_seq,
        }

    def _position(self, kind: str, object_id: str) -> int | None:
        positions = self._positions.get(kind)
        if positions is None:
            positions = self._positions[kind] = {value: p for p, value in enumerate(self._objects[kind]["ids"])}
        return positions.get(object_id)

    def _versions(self, kind: str, positions: list[int], k: int, lines: dict[int, dict[str, Any]]) -> list[tuple[Any, Any]]:
        """Each position's version at line ``k`` (the last line up to ``k`` that changed it), with the
        message's folded flag (``None`` for tools); in position order."""
        directory = self._objects[kind]
        versions = []
        for position in positions:
            changed = directory["lines"][position]
            line_number = changed[bisect.bisect_right(changed, k) - 1]
            line = lines.get(line_number)
            if line is None:
                line = lines[line_number] = self._read_line(line_number)
            for entry in line[kind]:
                if entry[0] == position:
                    versions.append((entry[1], entry[2] if kind == "messages" else None))
                    break
            else:
                raise ValueError(f"checkpoint line {line_number} lacks {kind} position {position}")
        return versions

    def _first(self, found: dict[str, list], kind: str) -> list[int]:
        directory = self._objects[kind]
        key = "message_id" if kind == "messages" else "tool_call_id"
        return [directory["first_seq"][self._position(kind, rendered[key])] for rendered, _ in found[kind]]

    def _tail(self, k: int, chain: int, field: str, recent: int, lines: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
        """The last ``recent`` entries of an append-only list (verdicts, diagnostics) at line ``k``."""
        collected: list[list[dict[str, Any]]] = []
        total = 0
        line_number = k
        while line_number > 0 and total < recent:
            line = lines.get(line_number)
            if line is None:
                line = lines[line_number] = self._read_line(line_number)
            if line[field]:
                collected.append(line[field])
                total += len(line[field])
            line_number = line["previous"][chain]
        entries = [entry for added in reversed(collected) for entry in added]
        return entries[-recent:] if recent else []


def _take_scalars(state: State, line: dict[str, Any]) -> None:
    state.seq, state.run_id, state.turn_index = line["seq"], line["run_id"], line["turn_index"]
    state.state, state.run_status = line["state"], line["run_status"]
    state.slots = dict(line["slots"])
