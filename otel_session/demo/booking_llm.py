"""The demo's LLM: issue 4's deterministic mock server with a booking assistant's canned replies.

``booking_reply`` is a responder for :class:`otel_session.demo.mock_llm.MockLLMServer`: it reads
the agent's system prompt (one of :data:`otel_session.demo.booking.INSTRUCTIONS`) and answers
with a fixed phrasing, fills in the offer from a ``check_availability`` result, and — as real
assistants do — repeats the caller's contact details back (so the demo shows them redacted in the
stream). Tool calls and anything it does not recognise are left to the mock's
:func:`~otel_session.demo.mock_llm.canned_reply`. Same request, same bytes.

    otel-session demo llm --port 8781
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import orjson

from otel_session.demo.booking import INSTRUCTIONS, BookingState, find_contacts
from otel_session.demo.mock_llm import Reply, canned_reply
from otel_session.demo.mock_llm import main as serve

__all__ = ["booking_reply", "main"]

_REPLIES = {
    INSTRUCTIONS[BookingState.GREET]: "Hello! How can I help?",
    INSTRUCTIONS[BookingState.ASK_DATE]: "I can book you a table. Which day would you like to come?",
    INSTRUCTIONS[BookingState.ASK_PARTY_SIZE]: "Lovely. How many people is the table for?",
    INSTRUCTIONS[BookingState.CONFIRM]: "Shall I book the table for you?",
    INSTRUCTIONS[BookingState.DONE]: "Your table is booked. See you then, goodbye!",
}


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


def _offer(result: str) -> str:
    try:
        found = orjson.loads(result)
    except orjson.JSONDecodeError:
        found = None
    if not isinstance(found, dict) or not found.get("available"):
        detail = result.removeprefix("error: ")
        return f"Sorry, I could not check the reservation book ({detail}). Would a smaller party work?"
    day = dt.date.fromisoformat(found["date"]).strftime("%A %d %B")
    return f"Good news: {day} at {found['time']} is free for {found['party_size']}. Shall I book it?"


def booking_reply(request: dict[str, Any]) -> Reply:
    """The booking assistant's reply to one chat completion request (see the module docstring)."""
    messages = [m for m in request.get("messages") or () if isinstance(m, dict)]
    system = next((_text(m) for m in messages if m.get("role") == "system"), "")
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    tool_results = [m for m in messages[last_user + 1 :] if m.get("role") == "tool"]
    if (request.get("tools") and not tool_results) or (system not in _REPLIES and not tool_results):
        return canned_reply(request)
    if tool_results:
        text = _offer(_text(tool_results[-1]))
    else:
        text = _REPLIES[system]
    contacts = find_contacts(_text(messages[last_user])) if last_user >= 0 else []
    if contacts:
        text = f"Thanks, I will send the confirmation to {' and '.join(contacts)}. {text}"
    prompt_tokens = sum(len(_text(m).split()) for m in messages)
    return Reply(text, (), "stop", prompt_tokens, len(text.split()))


def main(argv: list[str] | None = None) -> None:
    serve(argv, responder=booking_reply, name="booking LLM", default_port=8781, prog="otel-session demo llm")


if __name__ == "__main__":
    main()
