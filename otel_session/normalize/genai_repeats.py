"""A model call's new input messages that the run already holds, left out of its journal.

Contract::

    held = HeldMessages()            # one per run, kept as long as the run is open
    held = HeldMessages.of(run)      # or: the one kept for ``run`` (``per_run``)
    held.hold(turn_index, role, content)        # a message the run journaled itself (the API's)
    held.repeats(turn_index, role, content)     # whether a call's input message is one it holds
    events = held.without_repeats(events)       # a span's or request's events, redacted, in order

A model call's input repeats the conversation; only the messages after its last assistant message
are new to the run (``genai_messages.new_inputs``). Some of those can still be in the run: a
framework instrumentor (LangGraph's) journals the turn's user message, or a node's tool message,
through the ``otel_session`` API, and the official instrumentor of the client the model is called
with (openai-v2) puts the same message on its model-call span. A new input message (``{span
id}-in-N``, the GenAI mappings' ids) whose role and content blocks, redacted, equal those of a
message the run holds in the same turn — one it journaled before, from anything but a model call
(the API's, a voice mapping's) — is not journaled again. The comparison is on redacted content, so
a message with personal data in it matches its redacted twin. Model calls' messages (inputs and
replies) are not held: a call's new input that another call of the turn had too is journaled as
before. ``without_repeats`` holds the messages among ``events`` as well (the collector decodes the
API's records from their spans); the API, in process, holds its messages as it journals them.
At most ``MAX_HELD`` messages are held per run (the oldest forgotten first).
"""

from __future__ import annotations

from typing import Any

from otel_session.journal import EventType
from otel_session.normalize.per_run import PerRun
from otel_session.normalize.spans import JournalEvent

__all__ = ["MAX_HELD", "HeldMessages"]

MAX_HELD = 256
_MESSAGE_STARTED = EventType.MESSAGE_STARTED.value
_MESSAGE_FINISHED = EventType.MESSAGE_FINISHED.value
_CALL_INPUT = "-in-"
_CALL_OUTPUT = "-out-"

# (turn index, role, ((kind, text), …)): a message as the comparison sees it.
_Key = tuple[int | None, str, tuple[tuple[str, str], ...]]


class HeldMessages(PerRun):
    """The messages one run holds, by turn (see the module docstring)."""

    __slots__ = ("_held", "_roles")

    def __init__(self) -> None:
        self._held: dict[_Key, None] = {}
        """Held messages, oldest first (a dict: ordered, and a set's lookup)."""
        self._roles: dict[str, Any] = {}
        """Message id → role, from ``message_started`` until its ``message_finished``."""

    def hold(self, turn_index: Any, role: Any, content: Any) -> None:
        """Hold a message the run journaled: its role and (redacted) content blocks (an assistant's
        is not held: no model call's new input is one)."""
        key = _key(turn_index, role, content)
        if key is None:
            return
        held = self._held
        held.pop(key, None)  # the latest last: the oldest go first
        held[key] = None
        if len(held) > MAX_HELD:
            del held[next(iter(held))]

    def repeats(self, turn_index: Any, role: Any, content: Any) -> bool:
        """Whether a model call's input message (redacted content) is one the run holds in that turn."""
        key = _key(turn_index, role, content)
        return key is not None and key in self._held

    def without_repeats(self, events: list[JournalEvent]) -> list[JournalEvent]:
        """``events`` without the records of the model calls' input messages the run holds; the
        other messages among them (not a model call's) held, in their order."""
        repeated: set[str] | None = None
        roles = self._roles
        for event in events:
            kind = event.type
            if kind != _MESSAGE_STARTED and kind != _MESSAGE_FINISHED:
                continue
            message_id = event.message_id
            if message_id is None:
                continue
            if kind == _MESSAGE_STARTED:
                roles[message_id] = event.payload.get("role")
                if len(roles) > MAX_HELD:
                    del roles[next(iter(roles))]
                continue
            role = roles.pop(message_id, None)
            content = event.payload.get("content")
            made_by = _model_call_part(message_id, event.span_id)
            if made_by is None:
                self.hold(event.turn_index, role, content)
            elif made_by == _CALL_INPUT and self.repeats(event.turn_index, role, content):
                if repeated is None:
                    repeated = set()
                repeated.add(message_id)
        if repeated is None:
            return events
        return [event for event in events if event.message_id not in repeated]


def _model_call_part(message_id: str, span_id: str | None) -> str | None:
    """``-in-`` / ``-out-`` for a model call's input / output message id (``{span id}-in-N``), else None."""
    if span_id is None or not message_id.startswith(span_id):
        return None
    rest = message_id[len(span_id) :]
    for part in (_CALL_INPUT, _CALL_OUTPUT):
        if rest.startswith(part) and rest[len(part) :].isdigit():
            return part
    return None


def _key(turn_index: Any, role: Any, content: Any) -> _Key | None:
    """What a message is compared by: its turn, role and its blocks' kinds and texts, consecutive
    blocks of a kind as one (LangChain's ``message.text`` joins a message's text parts, openai-v2
    keeps them apart), empty ones left out; None for a message that is no new input's twin: an
    assistant's (no call's new input is one), one with no text, or one whose fields are not the
    journal's types."""
    if role.__class__ is not str or role == "assistant" or content.__class__ is not list:
        return None
    if turn_index is not None and turn_index.__class__ is not int:
        return None
    blocks = []
    for block in content:
        if block.__class__ is not dict:
            return None
        kind, text = block.get("kind"), block.get("text")
        if kind.__class__ is not str or text.__class__ is not str:
            return None
        if not text:
            continue
        if blocks and blocks[-1][0] == kind:
            blocks[-1] = (kind, blocks[-1][1] + text)
        else:
            blocks.append((kind, text))
    return (turn_index, role, tuple(blocks)) if blocks else None

