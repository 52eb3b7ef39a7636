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
At most ``MAX_HELD`` messages are held per run, each by a hash of what it is compared by (the
oldest forgotten first).
"""

from __future__ import annotations

import re
import threading
from typing import Any

from otel_session.core.journal import EventType
from otel_session.core.log import get_logger
from otel_session.normalize.per_run import PerRun
from otel_session.normalize.spans import JournalEvent

__all__ = ["MAX_HELD", "HeldMessages"]

logger = get_logger(__name__)

MAX_HELD = 256
_MESSAGE_STARTED = EventType.MESSAGE_STARTED.value
_MESSAGE_FINISHED = EventType.MESSAGE_FINISHED.value
_CALL_INPUT = "-in-"
_CALL_OUTPUT = "-out-"

# (turn index, role, ((kind, text), …)): a message as the comparison sees it (held by its hash).
_Key = tuple[int | None, str, tuple[tuple[str, str], ...]]


class HeldMessages(PerRun):
    """The messages one run holds, by turn (see the module docstring). Thread-safe; never raises
    (a failure leaves the events as they are: a repeat journaled rather than a message lost)."""

    __slots__ = ("_held", "_lock", "_roles")

    def __init__(self) -> None:
        self._held: dict[int, None] = {}
        """The hashes of held messages' keys (``_key``), oldest first (a dict: ordered, a set's
        lookup): a few bytes a message, whatever its length; two distinct messages of a run whose
        64-bit hashes meet (with ``MAX_HELD`` held, a chance of 2**-56 a comparison) would count as the same."""
        self._roles: dict[str, Any] = {}
        """Message id → role, from ``message_started`` until its ``message_finished``."""
        self._lock = threading.Lock()

    def hold(self, turn_index: Any, role: Any, content: Any) -> None:
        """Hold a message the run journaled: its role and (redacted) content blocks (an assistant's
        is not held: no model call's new input is one)."""
        try:
            key = _key(turn_index, role, content)
            if key is not None:
                with self._lock:
                    self._hold(hash(key))
        except Exception:  # noqa: BLE001
            logger.debug("could not hold a message", exc_info=True)

    def repeats(self, turn_index: Any, role: Any, content: Any) -> bool:
        """Whether a model call's input message (redacted content) is one the run holds in that turn."""
        try:
            key = _key(turn_index, role, content)
            return key is not None and hash(key) in self._held
        except Exception:  # noqa: BLE001
            logger.debug("could not compare a message", exc_info=True)
            return False

    def without_repeats(self, events: list[JournalEvent]) -> list[JournalEvent]:
        """``events`` without the records of the model calls' input messages the run holds; the
        other messages among them (not a model call's) held, in their order."""
        try:
            with self._lock:
                repeated = self._repeated(events)
        except Exception:  # noqa: BLE001
            logger.warning("could not tell a model call's repeated input messages; kept", exc_info=True)
            return events
        if repeated is None:
            return events
        return [event for event in events if event.message_id not in repeated]

    def _repeated(self, events: list[JournalEvent]) -> set[str] | None:
        """The ids of the call input messages among ``events`` that the run holds (``_lock`` held)."""
        repeated: set[str] | None = None
        roles, held = self._roles, self._held
        for event in events:
            kind = event.type
            if kind == _MESSAGE_STARTED:
                roles[event.message_id] = event.payload.get("role")
                continue
            if kind != _MESSAGE_FINISHED or event.message_id.__class__ is not str:
                continue
            message_id = event.message_id
            role = roles.pop(message_id, None)
            span_id = event.span_id
            call_input = False
            if span_id is not None and message_id.startswith(span_id):  # a model call's: {span id}-in-N / -out-N
                rest = message_id[len(span_id) :]
                if rest[:5] == _CALL_OUTPUT:
                    continue
                call_input = rest[:4] == _CALL_INPUT and rest[4:].isdigit()
                if call_input and not held:
                    continue
            key = _key(event.turn_index, role, event.payload.get("content"))
            if key is None:
                continue
            if not call_input:
                self._hold(hash(key))
            elif hash(key) in held:
                if repeated is None:
                    repeated = set()
                repeated.add(message_id)
        while len(roles) > MAX_HELD:  # started, never finished here: the oldest go first
            del roles[next(iter(roles))]
        return repeated

    def _hold(self, key_hash: int) -> None:
        held = self._held
        held.pop(key_hash, None)  # the latest last: the oldest go first
        held[key_hash] = None
        if len(held) > MAX_HELD:
            del held[next(iter(held))]


_REDACTED = re.compile(r"\[[a-z][a-z0-9_]{0,31}\]|hmac-sha256:[0-9a-f]{16}|<redacted ").search
"""Where redaction put a token (a detection's ``[label]``, a keyed hash, a mask: ``redact``'s forms,
``tests/genai/test_repeated_inputs.py`` checks them): two different texts may read the same there."""


def _key(turn_index: Any, role: Any, content: Any) -> _Key | None:
    """What a message is compared by: its turn, role and its blocks' kinds and texts, consecutive
    blocks of a kind as one (LangChain's ``message.text`` joins a message's text parts, openai-v2
    keeps them apart), empty ones left out; None for a message that is no new input's twin: an
    assistant's (no call's new input is one), one with no text, one whose fields are not the
    journal's types, or one redaction changed (``mail me at [email]`` may stand for two different
    messages: the rule must never take one for the other, so such a repeat is journaled)."""
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
        if _REDACTED(text) is not None:
            return None
        if blocks and blocks[-1][0] == kind:
            blocks[-1] = (kind, blocks[-1][1] + text)
        else:
            blocks.append((kind, text))
    return (turn_index, role, tuple(blocks)) if blocks else None

