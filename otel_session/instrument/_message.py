"""A message: its span ``message {role}``, its text or its streamed deltas, its final content.

Contract::

    with message("assistant") as handle:       # a Section; message_started … message_finished
        handle.delta(chunk, kind="text", index=0)   # one streamed chunk of a content block
        handle.text(whole, index=0)                 # or a block's whole text
        handle.model_call("gpt-x", input_tokens=12, output_tokens=40)  # a model's reply: model, usage
        handle.finish(stop_reason="stop")           # final content, redacted (the section does it too)

Deltas are the hot path: each passes through its block's redacting ``DeltaStream`` (its one
redaction step) and is encoded onto the span with the codec's encoder looked up once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opentelemetry import trace

from otel_session.core import semconv as sc
from otel_session.instrument import _clock
from otel_session.instrument._log import capture_failed, warn_once
from otel_session.instrument._run import ChildSection
from otel_session.instrument._section import Nothing, label
from otel_session.instrument._spans import event_adder
from otel_session.core.journal import EventType
from otel_session.normalize import JournalEvent
from otel_session.normalize.codec import EVENT_NAMES, encode, encoder
from otel_session.normalize.genai_repeats import HeldMessages
from otel_session.redact import DeltaStream

if TYPE_CHECKING:
    from otel_session.instrument._handles import OpenRun, OpenTurn

__all__ = ["MessageHandle", "message"]

_E = {member: member.value for member in EventType}  # an enum member's ``.value`` is a descriptor call


class MessageHandle:
    """One message: ``text()`` for a whole utterance, ``delta()`` per streamed chunk."""

    def __init__(self, run_handle: OpenRun, turn_index: int | None, span: trace.Span, role: str, message_id: str) -> None:
        self.run = run_handle
        self.turn_index = turn_index
        self.span = span
        self.role = role
        self.message_id = message_id
        self.span_id_hex = f"{span.get_span_context().span_id:016x}"
        self.finished = False
        self.delta_count = 0
        self._model_call: dict[str, Any] = {}
        """``model`` and ``usage`` of the model call this message is the reply of (its finish has them)."""
        self._blocks: dict[int, tuple[str, list[str]]] = {}
        self._streams: dict[int, DeltaStream[int]] = {}
        """Per content block: the redacting stream its deltas pass through (PII split across
        deltas is held back until it is whole)."""
        self._add_event = event_adder(span)
        journal = self._journal = run_handle.journal_recorder
        self._delta_head = None if journal is None else journal.head(
            _DELTA, turn_index=turn_index, message_id=message_id, trace_id=run_handle.trace_id_hex,
            span_id=self.span_id_hex,
        )
        """The fields every delta record of this message shares, encoded once."""

    def text(self, text: str, *, index: int = 0, kind: str = "text") -> None:
        """Set the whole text of content block ``index`` (a message that does not stream)."""
        if self.finished:
            warn_once("message-finished", "otel_session: text()/delta() on a finished message is ignored")
            return
        self._blocks[index] = (kind, [str(text)])

    def model_call(self, model: str | None, *, input_tokens: int | None = None, output_tokens: int | None = None) -> None:
        """Say this message is a model's reply: the model that answered and the call's token usage
        (each only when known). ``message_finished`` carries them (``model``, ``usage``) and the span
        the official ``gen_ai.response.model`` / ``gen_ai.usage.*`` attributes."""
        usage = {
            key: value
            for key, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens))
            if isinstance(value, int) and not isinstance(value, bool)
        }
        if model:
            self._model_call["model"] = str(model)
        if usage:
            self._model_call["usage"] = usage
            self.span.set_attributes({f"gen_ai.usage.{key}": value for key, value in usage.items()})

    def delta(self, chunk: str, *, kind: str = "text", index: int = 0) -> None:
        """Record one streamed chunk of content block ``index`` (``text``, ``thinking``, ``tool_call``)."""
        if self.finished:
            warn_once("message-finished", "otel_session: text()/delta() on a finished message is ignored")
            return
        try:
            now = _clock.now_ns()
            if type(chunk) is not str or type(kind) is not str or type(index) is not int:
                chunk, kind, index = str(chunk), label(kind), int(index)
            block = self._blocks.get(index)
            if block is None:
                block = self._blocks[index] = (kind, [])
            block[1].append(chunk)
            stream = self._streams.get(index)
            if stream is None:
                stream = self._streams[index] = self.run.redactor.delta_stream()
            self.delta_count += 1
            for at_ns, redacted in stream.feed(chunk, now):  # records held until a token ends
                self._record_delta(index, kind, redacted, at_ns)
        except Exception:  # noqa: BLE001
            capture_failed("a delta")

    def _record_delta(self, index: int, kind: str, redacted: str, at_ns: int) -> None:
        """One delta its block's stream redacted (the stream is a delta's one redaction step)."""
        payload = {"index": index, "kind": kind, "delta": redacted}
        self._add_event(_DELTA_EVENT, _encode_delta(payload), at_ns)
        journal = self._journal
        if journal is not None:
            journal.append_to(self._delta_head, payload, at_ns)  # type: ignore[arg-type]

    def event(self, event_type: str, payload: dict[str, Any]) -> JournalEvent:
        """A raw record of this message, now, redacted once."""
        return self.run.event(
            event_type, payload, span_id=self.span_id_hex, turn_index=self.turn_index, message_id=self.message_id
        )

    def _release_held_text(self) -> None:
        """At the end of the message: each block's held-back deltas, each with its own timestamp."""
        for index, stream in sorted(self._streams.items()):
            for at_ns, redacted in stream.flush():
                self._record_delta(index, self._blocks[index][0], redacted, at_ns)

    def finish(self, *, stop_reason: str | None = None, settled: bool = True) -> None:
        """Seal the message: its final content (the whole text of each block, redacted)."""
        if self.finished:
            return
        self.finished = True
        try:
            self._release_held_text()
            content = [
                {"index": index, "kind": kind, "text": "".join(parts)}
                for index, (kind, parts) in sorted(self._blocks.items())
            ]
            payload: dict[str, Any] = {"settled": settled, "content": content}
            if stop_reason is not None:
                payload["stop_reason"] = stop_reason
            payload.update(self._model_call)
            event = self.event(_E[EventType.MESSAGE_FINISHED], payload)
            self.span.set_attributes({**encode(event.type, event.payload), sc.DELTA_COUNT: self.delta_count})
            self.run.append(event)
            if self._journal is not None:  # a model call's span that repeats it does not journal it again
                HeldMessages.of(self.run).hold(self.turn_index, self.role, event.payload.get("content"))
        except Exception:  # noqa: BLE001
            capture_failed("the end of a message")
        finally:
            self.span.end()


_DELTA = _E[EventType.ASSISTANT_DELTA]
_DELTA_EVENT = EVENT_NAMES[_DELTA]
_encode_delta = encoder(_DELTA)


_NO_MESSAGE = Nothing(("text", "delta", "model_call", "finish"), message_id=None)


class message(ChildSection):  # noqa: N801
    """One message by ``role`` (span ``message {role}``): ``message_started`` … ``message_finished``."""

    api, what, null = "message", "a message", _NO_MESSAGE

    def __init__(self, role: str, *, message_id: str | None = None) -> None:
        super().__init__(role, message_id=message_id)
        self.role = label(role)
        self.message_id = message_id

    def _open(self, run_handle: OpenRun, turn_handle: OpenTurn | None) -> MessageHandle:
        turn_index = turn_handle.index if turn_handle is not None else None
        started = run_handle.event(_E[EventType.MESSAGE_STARTED], {"role": self.role}, turn_index=turn_index)
        attributes = {} if turn_index is None else {sc.TURN_INDEX: turn_index}
        span = run_handle.start_span(f"message {self.role}", started, attributes)
        # An id given by the app may hold PII (a caller's number): stored as ids are (``identifier``).
        message_id = run_handle.redactor.identifier(self.message_id) if self.message_id else (
            f"msg-{span.get_span_context().span_id:016x}")
        span.set_attribute(sc.MESSAGE_ID, message_id)
        handle = MessageHandle(run_handle, turn_index, span, self.role, message_id)
        started.message_id = message_id
        run_handle.append(started)
        return handle

    def _close(self, handle: MessageHandle, exc: BaseException | None) -> None:
        handle.finish(settled=exc is None)
