"""What the sessions list and a session page show about one run, read from its journal.

Contract::

    summary = summarize_run(bundle)   # JSON-ready dict; the store caches it per sealed bundle
    summary["problems"]               # [{kind, message, seq?}]: what went wrong in this run
    summary["search_text"]            # lower-cased message text (capped), for text filters only

Fields: ``agent``, ``status`` (``ok``/``error``/``interrupted``/``running``), ``started_at``,
``ended_at``, ``duration_ms``, ``turns``, ``model_calls`` (assistant messages whose
``message_finished`` names a ``model`` or ``usage``: interfaces §2), ``input_tokens``,
``output_tokens`` (None when no call reported them), ``tool_calls``, ``tool_errors``.
A run is ``error`` when it finished with ``error`` or a tool failed; ``interrupted`` when it or a
turn was interrupted; ``running`` while it has no ``run_finished``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from otel_session.bundle.read import BundleRead

__all__ = ["MAX_SEARCH_TEXT", "summarize_run"]

MAX_SEARCH_TEXT = 4000
"""Characters of message text kept per run for the text filter."""

_MAX_PROBLEMS = 20


def _ms(at: Any) -> float | None:
    if not isinstance(at, str):
        return None
    try:
        return datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp() * 1000
    except ValueError:
        return None


def _payload(event: dict[str, Any]) -> dict[str, Any]:
    payload = event.get("payload")
    return payload if isinstance(payload, dict) else {}


def _count(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


class _Tally:
    """One pass over a run's records."""

    def __init__(self) -> None:
        self.agent: str | None = None
        self.run_status: str | None = None
        self.interrupted_turn = False
        self.turns = 0
        self.model_calls = 0
        self.tokens: dict[str, int | None] = {"input_tokens": None, "output_tokens": None}
        self.tool_calls = 0
        self.tool_errors = 0
        self.tool_names: dict[str, str] = {}
        self.roles: dict[str, str] = {}
        self.problems: list[dict[str, Any]] = []
        self.text: list[str] = []
        self.text_chars = 0

    def problem(self, kind: str, message: str, seq: int | None = None) -> None:
        if len(self.problems) < _MAX_PROBLEMS:
            self.problems.append({"kind": kind, "message": message, **({"seq": seq} if seq is not None else {})})

    def add_text(self, text: Any) -> None:
        if isinstance(text, str) and self.text_chars < MAX_SEARCH_TEXT:
            piece = text[: MAX_SEARCH_TEXT - self.text_chars]
            self.text.append(piece)
            self.text_chars += len(piece) + 1

    def feed(self, event: dict[str, Any]) -> None:
        kind, payload, seq = event["type"], _payload(event), event["seq"]
        if kind == "run_started":
            self.agent = payload.get("agent") if isinstance(payload.get("agent"), str) else self.agent
        elif kind == "run_finished":
            self.run_status = payload.get("status") if isinstance(payload.get("status"), str) else "unknown"
            if self.run_status != "ok":
                reason = f" ({payload['reason']})" if isinstance(payload.get("reason"), str) else ""
                self.problem(f"run_{self.run_status}", f"the run finished {self.run_status}{reason}", seq)
        elif kind == "turn_started":
            self.turns += 1
        elif kind == "turn_finished" and payload.get("interrupted") is True:
            self.interrupted_turn = True
            self.problem("turn_interrupted", f"turn {event.get('turn_index', '?')} was interrupted", seq)
        elif kind == "message_started" and isinstance(event.get("message_id"), str):
            self.roles[event["message_id"]] = str(payload.get("role", ""))
        elif kind == "message_finished":
            self._message_finished(event, payload)
        elif kind == "tool_execution_started":
            self.tool_calls += 1
            self.tool_names[str(event.get("tool_call_id"))] = str(payload.get("name", "tool"))
        elif kind == "tool_execution_finished" and payload.get("status") == "error":
            self.tool_errors += 1
            name = self.tool_names.get(str(event.get("tool_call_id")), "tool")
            error = payload.get("error")
            detail = f": {error}" if isinstance(error, str) else ""
            self.problem("tool_error", f"tool {name} failed{detail}", seq)

    def _message_finished(self, event: dict[str, Any], payload: dict[str, Any]) -> None:
        for block in payload.get("content") or ():
            if isinstance(block, dict) and block.get("kind", "text") == "text":
                self.add_text(block.get("text"))
        role = self.roles.get(str(event.get("message_id")), "assistant")
        usage = payload.get("usage")
        if role != "assistant" or not (isinstance(payload.get("model"), str) or isinstance(usage, dict)):
            return
        self.model_calls += 1
        for key in self.tokens:
            value = _count(usage.get(key)) if isinstance(usage, dict) else None
            if value is not None:
                self.tokens[key] = (self.tokens[key] or 0) + value

    def status(self) -> str:
        if self.run_status == "error" or self.tool_errors:
            return "error"
        if self.run_status == "interrupted" or self.interrupted_turn:
            return "interrupted"
        return "running" if self.run_status is None else "ok"


def summarize_run(bundle: BundleRead) -> dict[str, Any]:
    """The run's listing fields (see the module docstring), from one pass over its records."""
    tally = _Tally()
    for event in bundle.events:
        tally.feed(event)
    capture = bundle.capture or {}
    if capture.get("status") == "failed":
        failure = capture.get("failure") if isinstance(capture.get("failure"), dict) else {}
        tally.problem("capture_failed", f"capture failed: {failure.get('code', '?')} {failure.get('message', '')}".strip())
    if bundle.status.value == "invalid":
        codes = sorted({diagnostic.code.value for diagnostic in bundle.diagnostics})
        tally.problem("invalid_bundle", f"the bundle is invalid: {', '.join(codes)}")
    started = bundle.events[0]["at"] if bundle.events else None
    ended = bundle.events[-1]["at"] if bundle.events else None
    start_ms, end_ms = _ms(started), _ms(ended)
    return {
        "agent": tally.agent or (bundle.manifest or {}).get("agent"),
        "status": tally.status(),
        "started_at": started,
        "ended_at": ended,
        "duration_ms": round(end_ms - start_ms, 3) if start_ms is not None and end_ms is not None else None,
        "turns": tally.turns,
        "model_calls": tally.model_calls,
        **tally.tokens,
        "tool_calls": tally.tool_calls,
        "tool_errors": tally.tool_errors,
        "problems": tally.problems,
        "search_text": "\n".join(tally.text).lower(),
    }
