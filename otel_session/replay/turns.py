"""Per-turn summaries of a run: what a long run's timeline is drawn from instead of every event.

Contract::

    turn_summaries(events) -> [{"turn_index", "state_before", "state", "start_seq", "end_seq", "start_at",
                                "end_at", "open", "interrupted", "latency", "missing_required_slots",
                                "verdict", "messages", "tools", "tool_errors"}]

    as_rows(summaries) -> {"fields": [...], "rows": [[...], ...]}   # the compact form ``…/turns`` answers

``events`` are one run's records in seq order (``facts.run_events``). A turn spans from its
``turn_started`` to its ``turn_finished`` (``open`` without one); records naming the turn's index
count toward it (messages started, tools started, tools that finished with an error); ``span``
records count toward none. ``verdict``
is the turn's last transition verdict (``{from, to, reason}``), the dialogue-state graph's edge.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["as_rows", "from_rows", "turn_summaries"]


def turn_summaries(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One compact entry per turn, in the order the turns started."""
    turns: dict[Any, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    for event in events:
        event_type = event["type"]
        if event_type == "span":
            continue  # a span's own record (opt-in): it neither opens, ends nor extends a turn
        turn_index = event.get("turn_index")
        if event_type == "turn_started":
            payload = event.get("payload") if isinstance(event.get("payload"), dict) else {}
            key = turn_index if type(turn_index) is int else f"#{len(turns)}"
            state = payload.get("state") if isinstance(payload.get("state"), str) else None
            current = turns[key] = {
                "turn_index": turn_index if type(turn_index) is int else None,
                "state_before": state, "state": state, "missing_required_slots": None, "verdict": None,
                "start_seq": event["seq"], "end_seq": event["seq"], "start_at": event["at"], "end_at": event["at"],
                "open": True, "interrupted": False, "latency": None, "messages": 0, "tools": 0, "tool_errors": 0,
            }
            continue
        turn = turns.get(turn_index) if type(turn_index) is int else current
        if turn is None:
            continue
        turn["end_seq"], turn["end_at"] = event["seq"], event["at"]
        payload = event.get("payload") if isinstance(event.get("payload"), dict) else {}
        if event_type == "turn_finished":
            turn["open"] = False
            turn["interrupted"] = payload.get("interrupted") is True
            if isinstance(payload.get("state"), str):
                turn["state"] = payload["state"]
            if isinstance(payload.get("latency"), dict):
                turn["latency"] = payload["latency"]
            if isinstance(payload.get("missing_required_slots"), list):
                turn["missing_required_slots"] = payload["missing_required_slots"]
        elif event_type == "transition_verdict":
            turn["verdict"] = {key: payload.get(key) for key in ("from", "to", "reason")}
        elif event_type == "message_started":
            turn["messages"] += 1
        elif event_type == "tool_execution_started":
            turn["tools"] += 1
        elif event_type == "tool_execution_finished" and payload.get("status") == "error":
            turn["tool_errors"] += 1
    return list(turns.values())


def as_rows(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """The summaries as one list of field names and one row of values per turn (half the bytes)."""
    fields = list(summaries[0]) if summaries else []
    return {"fields": fields, "rows": [[turn[name] for name in fields] for turn in summaries]}


def from_rows(table: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(zip(table["fields"], row)) for row in table["rows"]]
