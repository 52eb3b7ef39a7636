"""Every chunk of an ``openai`` client stream as an ``assistant_delta``, with no code (issue 16 §2).

Contract::

    install()       # the otel_session instrumentor calls it (opentelemetry-instrument); idempotent
    uninstall()

Third-party instrumentors (openai-v2, OpenInference, OpenLLMetry) put only a streamed call's final
text on its span. ``install`` wraps ``openai``'s ``Stream.__init__`` and ``AsyncStream.__init__``
(the objects every Chat Completions and Responses stream is, sync and async, whoever wraps
``create``): a stream made while a foreign model-call span is current (openai-v2 makes it current
for the call) has its iterator tapped. Each chunk's text, tool-call arguments and reasoning become
deltas of the call's output message ``{span_id}-out-{choice}``, redacted as they stream
(``Redactor.delta_stream``) and recorded twice:

* in process, journaled into the open run of the span's trace as they are released (live),
  after the call's new input messages, read from its request (the span gives them only at its
  end, and the journal's order is the replay's); the span processor leaves out the span's own
  copies of them (``live_records``);
* as ``otel_session.delta`` span events on the model-call span, for the collector path
  (``normalize.genai_deltas``): within the span's event limit, keeping room for the
  instrumentor's own events; the deltas beyond it are not added and the span says how many in
  ``otel_session.deltas.dropped`` (the collector journals an ``upstream_drop``).

The instrumentor's final content still settles the message (``message_finished`` from the span,
at its end). A tool call's block streams as the text of its final block would read:
``{"id":…,"name":…,"arguments":`` first, then the argument fragments, then ``}``; when the final
block reads otherwise (arguments not in compact JSON), the replay says so (``reconcile_mismatch``).
Reasoning deltas (Responses ``reasoning_*`` events, Chat Completions ``reasoning_content``) are
``thinking`` blocks. A non-streamed call constructs no stream and costs nothing; a stream made with
no foreign model-call span current (none instruments the call) is left alone.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import orjson
from opentelemetry import trace

from otel_session import semconv as sc
from otel_session.instrument._log import warn_once
from otel_session.instrument._runtime import current_recorder
from otel_session.instrument.live_records import LIVE_INPUT, LIVE_OUTPUT, remember_live
from otel_session.journal import EventType
from otel_session.normalize import genai
from otel_session.normalize.genai_deltas import DELTA_MESSAGE, DELTAS_DROPPED
from otel_session.normalize.genai_messages import new_inputs, request_inputs
from otel_session.redact import DeltaStream

__all__ = ["install", "uninstall"]

_RESERVED_EVENTS = 16  # room left on a span for its instrumentor's own events
_MESSAGE_STARTED = EventType.MESSAGE_STARTED.value
_MESSAGE_FINISHED = EventType.MESSAGE_FINISHED.value
_ASSISTANT_DELTA = EventType.ASSISTANT_DELTA.value

_originals: dict[type, Callable[..., None]] = {}


def install() -> None:
    """Tap the streams of the ``openai`` client from now on (nothing if it is not installed)."""
    try:
        from openai import _streaming
    except ImportError:
        return
    for cls, tap in ((_streaming.Stream, _tap_sync), (_streaming.AsyncStream, _tap_async)):
        if cls in _originals:
            continue
        original = cls.__init__

        @functools.wraps(original)
        def __init__(self: Any, *args: Any, _original: Callable[..., None] = original, _tap: Callable[[Any], None] = tap,
                     **kwargs: Any) -> None:
            _original(self, *args, **kwargs)
            _tap(self)

        _originals[cls] = original
        cls.__init__ = __init__  # type: ignore[method-assign]


def uninstall() -> None:
    for cls, original in _originals.items():
        cls.__init__ = original  # type: ignore[method-assign]
    _originals.clear()


def _deltas_for(stream: Any) -> _StreamDeltas | None:
    """The recorder of ``stream``'s deltas, when a foreign model-call span is current."""
    try:
        recorder = current_recorder()
        if recorder is None or not recorder.active:
            return None
        span = trace.get_current_span()
        scope = getattr(span, "instrumentation_scope", None)
        if not span.is_recording() or scope is None or scope.name == sc.SCOPE_NAME:
            return None
        if not genai.is_model_call(getattr(span, "attributes", None) or {}):
            return None
        return _StreamDeltas(recorder, span, getattr(stream, "_options", None))
    except Exception:  # noqa: BLE001 - capture failures never reach the app
        warn_once("stream-tap", "otel_session: could not tap an openai stream; its deltas are not recorded", exc_info=True)
        return None


def _tap_sync(stream: Any) -> None:
    _tap(stream, _tapped)


def _tap_async(stream: Any) -> None:
    _tap(stream, _tapped_async)


def _tap(stream: Any, tapped: Callable[[Any, _StreamDeltas], Any]) -> None:
    iterator = getattr(stream, "_iterator", None)  # what Stream.__iter__/__next__ read (openai 1.x-3.x)
    if iterator is None:
        warn_once("stream-shape", "otel_session: this openai version's streams cannot be tapped; no deltas recorded")
        return
    deltas = _deltas_for(stream)
    if deltas is not None:
        stream._iterator = tapped(iterator, deltas)


def _tapped(iterator: Iterator[Any], deltas: _StreamDeltas) -> Iterator[Any]:
    try:
        for item in iterator:
            deltas.feed(item)
            yield item
    finally:
        deltas.close()


async def _tapped_async(iterator: AsyncIterator[Any], deltas: _StreamDeltas) -> AsyncIterator[Any]:
    try:
        async for item in iterator:
            deltas.feed(item)
            yield item
    finally:
        deltas.close()


class _Block:
    __slots__ = ("index", "kind", "stream")

    def __init__(self, index: int, kind: str, stream: DeltaStream[int]) -> None:
        self.index = index
        self.kind = kind
        self.stream = stream


class _StreamDeltas:
    """One tapped stream: its blocks, the span events it may still add, the run it journals into."""

    def __init__(self, recorder: Any, span: Any, options: Any) -> None:
        context = span.get_span_context()
        self._span = span
        self._options = options
        self._redactor = recorder.redactor
        self._trace_id, self._span_id = context.trace_id, context.span_id
        self._span_hex = f"{context.span_id:016x}"
        self._trace_hex = f"{context.trace_id:032x}"
        self._start_ns = getattr(span, "start_time", None) or 0
        limits = getattr(span, "_limits", None)
        max_events = getattr(limits, "max_events", None)
        self._room = None if max_events is None else max(0, max_events - _RESERVED_EVENTS - len(span.events))
        self._dropped = 0
        self._blocks: dict[tuple[Any, ...], _Block] = {}
        self._per_message: dict[int, int] = {}
        self._started: set[int] = set()
        self._open_calls: dict[tuple[Any, ...], int] = {}  # tool-call block key → message position
        handle = recorder.open_run(context.trace_id)
        self._journal = handle.journal_recorder if handle is not None and handle.open else None
        turn_index = (getattr(span, "attributes", None) or {}).get(sc.TURN_INDEX)
        self._turn_index = turn_index if isinstance(turn_index, int) else None
        self._closed = False

    # -- reading chunks --------------------------------------------------------------------

    def feed(self, item: Any) -> None:
        try:
            kind = getattr(item, "type", None)
            if isinstance(kind, str) and kind.startswith("response."):
                self._response_event(kind, item)
            else:
                for choice in getattr(item, "choices", None) or ():
                    self._chat_choice(choice)
        except Exception:  # noqa: BLE001
            warn_once("stream-delta", "otel_session: a streamed chunk could not be recorded", exc_info=True)

    def _chat_choice(self, choice: Any) -> None:
        position = getattr(choice, "index", 0) or 0
        delta = getattr(choice, "delta", None)
        if delta is None:
            return
        extra = getattr(delta, "model_extra", None) or {}
        reasoning = getattr(delta, "reasoning_content", None) or extra.get("reasoning_content")
        if reasoning:
            self._piece(position, ("reasoning",), "thinking", reasoning)
        if getattr(delta, "content", None):
            self._piece(position, ("text",), "text", delta.content)
        for call in getattr(delta, "tool_calls", None) or ():
            key = ("tool", getattr(call, "index", 0))
            function = getattr(call, "function", None)
            arguments = getattr(function, "arguments", None) or ""
            if key not in self._open_calls:
                self._open_calls[key] = position
                arguments = _call_opening(getattr(call, "id", None), getattr(function, "name", None)) + arguments
            if arguments:
                self._piece(position, key, "tool_call", arguments)

    def _response_event(self, kind: str, event: Any) -> None:
        output_index = getattr(event, "output_index", 0)
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            self._piece(0, ("text", output_index, event.content_index), "text", event.delta)
        elif kind == "response.reasoning_summary_text.delta":
            self._piece(0, ("summary", output_index, event.summary_index), "thinking", event.delta)
        elif kind == "response.reasoning_text.delta":
            self._piece(0, ("reasoning", output_index, event.content_index), "thinking", event.delta)
        elif kind == "response.output_item.added" and getattr(event.item, "type", None) == "function_call":
            key = ("call", output_index)
            self._open_calls[key] = 0
            self._piece(0, key, "tool_call", _call_opening(event.item.call_id, event.item.name))
        elif kind == "response.function_call_arguments.delta":
            self._piece(0, ("call", output_index), "tool_call", event.delta)
        elif kind == "response.output_item.done" and ("call", output_index) in self._open_calls:
            self._close_call(("call", output_index))

    def _close_call(self, key: tuple[Any, ...]) -> None:
        self._piece(self._open_calls.pop(key), key, "tool_call", "}")

    # -- recording deltas ------------------------------------------------------------------

    def _piece(self, position: int, key: tuple[Any, ...], kind: str, text: str) -> None:
        if not text:
            return
        block = self._blocks.get((position, *key))
        if block is None:
            index = self._per_message.get(position, 0)
            self._per_message[position] = index + 1
            block = self._blocks[(position, *key)] = _Block(index, kind, self._redactor.delta_stream())
        at_ns = time.time_ns()
        for released_at, redacted in block.stream.feed(text, at_ns):
            self._record(position, block, redacted, released_at)

    def _record(self, position: int, block: _Block, text: str, at_ns: int) -> None:
        message_id = f"{self._span_hex}-out-{position}"
        journal = self._journal
        if journal is not None:
            if position not in self._started:
                if not self._started:
                    self._journal_inputs(journal)
                self._started.add(position)
                remember_live(self._trace_id, self._span_id, message_id, LIVE_OUTPUT)
                journal.append(_MESSAGE_STARTED, {"role": "assistant"}, at_ns=self._start_ns, **self._ids(message_id))
            journal.append(_ASSISTANT_DELTA, {"index": block.index, "kind": block.kind, "delta": text}, at_ns=at_ns,
                           **self._ids(message_id))
        if self._room is not None:
            if self._room <= 0:
                self._dropped += 1
                return
            self._room -= 1
        if self._span.is_recording():
            self._span.add_event(sc.EVENT_DELTA, {DELTA_MESSAGE: position, sc.DELTA_INDEX: block.index,
                                                  sc.DELTA_KIND: block.kind, sc.DELTA_TEXT: text}, timestamp=at_ns)

    def _journal_inputs(self, journal: Any) -> None:
        """The call's new input messages, read from its request, before its reply's first delta
        (the span gives them only at its end, after the live deltas in the journal)."""
        body = getattr(self._options, "json_data", None)
        if not isinstance(body, dict):
            return
        redact = self._redactor.redact_payload
        for position, message in enumerate(new_inputs(request_inputs(body))):
            message_id = f"{self._span_hex}-in-{position}"
            remember_live(self._trace_id, self._span_id, message_id, LIVE_INPUT)
            ids = self._ids(message_id)
            journal.append(_MESSAGE_STARTED, {"role": message.role}, at_ns=self._start_ns, **ids)
            payload = redact(_MESSAGE_FINISHED, {"settled": True, "content": message.content})
            journal.append(_MESSAGE_FINISHED, payload, at_ns=self._start_ns, **ids)

    def _ids(self, message_id: str) -> dict[str, Any]:
        return {"turn_index": self._turn_index, "message_id": message_id, "trace_id": self._trace_hex,
                "span_id": self._span_hex}

    def close(self) -> None:
        """At the stream's end: close open tool calls, release what redaction held back, say what
        the span could not hold."""
        if self._closed:
            return
        self._closed = True
        try:
            for key in list(self._open_calls):
                self._close_call(key)
            for (position, *_), block in self._blocks.items():
                for released_at, redacted in block.stream.flush():
                    self._record(position, block, redacted, released_at)
            if self._dropped and self._span.is_recording():
                self._span.set_attribute(DELTAS_DROPPED, self._dropped)
        except Exception:  # noqa: BLE001
            warn_once("stream-close", "otel_session: the end of a stream could not be recorded", exc_info=True)


def _call_opening(call_id: Any, name: Any) -> str:
    """The start of a tool-call block's final text (``normalize.genai_messages.tool_call_text``)."""
    head = {key: value for key, value in (("id", call_id), ("name", name)) if value is not None}
    return orjson.dumps(head).decode()[:-1] + ("," if head else "") + '"arguments":'
