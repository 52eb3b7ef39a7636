"""The whole-session transcript, a few runs a page: ``GET /api/sessions/<sid>/transcript``.

Contract::

    GET /api/sessions/<sid>/transcript?after=0&runs=5
    -> {"session_id", "run_count", "runs": [{run_id, kind, created_at, agent, capture_status,
        turns: [{turn_index, state_before, state, messages: [{role, text}], tools: [{name, status}]}],
        messages_omitted}], "next_after": N or null}

The session's live runs (an eval-only session's eval runs), oldest first, ``runs`` of them a page
(5 by default, at most 20) after the first ``after``. Each run is read from its facts (a sealed
run's are kept in its index, read once), so a page reads only its own runs, never the session's
other bundles. A run shows at most ``MAX_MESSAGES`` messages; ``messages_omitted`` counts the rest
(its replay has them). Texts are as the bundle holds them: redacted.
"""

from __future__ import annotations

from typing import Any

import orjson
from flask import Blueprint, Response

from .api import int_arg, store

__all__ = ["MAX_MESSAGES", "bp"]

bp = Blueprint("transcript", __name__, url_prefix="/api")

MAX_MESSAGES = 500
_DEFAULT_RUNS = 5
_MAX_RUNS = 20


def _run_transcript(facts: dict[str, Any], info: Any) -> dict[str, Any]:
    turns, shown, omitted = [], 0, 0
    for turn in facts.get("turns") or []:
        messages = [{"role": message.get("role"), "text": message.get("text", "")} for message in turn.get("messages") or []]
        room = max(0, MAX_MESSAGES - shown)
        omitted += max(0, len(messages) - room)
        messages = messages[:room]
        shown += len(messages)
        if messages or turn.get("tools"):
            turns.append({"turn_index": turn.get("turn_index"), "state_before": turn.get("state_before"),
                          "state": turn.get("state"), "messages": messages,
                          "tools": [{"name": tool.get("name"), "status": tool.get("status")} for tool in turn.get("tools") or []]})
    return {"run_id": info.run_id, "kind": info.kind, "created_at": info.created_at, "agent": info.agent,
            "capture_status": info.capture_status, "turns": turns, "messages_omitted": omitted}


@bp.get("/sessions/<path:session_id>/transcript")
def transcript(session_id: str) -> Response:
    """A page of the session's transcript, by run (oldest first)."""
    after = int_arg("after", 0, minimum=0)
    count = int_arg("runs", _DEFAULT_RUNS, minimum=1, maximum=_MAX_RUNS)
    found = store().runs(session_id)  # newest first, from run.json alone
    ordered = list(reversed([info for info in found if info.kind == "live"] or found))
    page = ordered[after : after + count]
    runs = [_run_transcript(orjson.loads(store().reader.facts(info.path, fallback_to_latest_run=False)), info)
            for info in page]
    answer = {"session_id": found[0].session_id, "run_count": len(ordered), "runs": runs,
              "next_after": after + count if after + count < len(ordered) else None}
    return Response(orjson.dumps(answer), mimetype="application/json")
