"""The SDK-independent half of a client stream tap: chunks' pieces in, deltas recorded (issue 16 §2).

Contract::

    class SdkDeltas(StreamDeltas):        # one per SDK (openai_streams, anthropic_streams)
        def feed(self, item): ...          # one chunk: self.piece(...), self.open_call(...), self.close_call(...)
        def request_messages(self, body): ... # the request's input messages (genai_messages.Message)

    deltas = deltas_for(SdkDeltas, request_body, sdk="openai")   # None unless a foreign model-call span is current
                                                                 # that no other tap records (one tap per span)
    deltas_for(SdkDeltas, request_body, sdk="anthropic", target=choose)   # or the span choose(current) gives
    is_foreign_model_call(span)            # what deltas_for asks of the span
    iterator = tapped(iterator, deltas)    # or tapped_async: feeds each item, closes at the end
    wrap_streams(sdk._streaming, tap_sync, tap_async, originals)   # Stream/AsyncStream.__init__ then tap(self);
                                                                   # their close() closes the tap first
    tap_stream(stream, iterator, deltas, tapped)   # in tap(self): stream._iterator read through the tap
    unwrap_streams(originals)

A piece of text is a delta of the call's output message ``{span_id}-out-{position}``, in content
block ``key`` (blocks numbered per message in order of first appearance), redacted as it streams
(``Redactor.delta_stream``) and recorded twice: journaled live into the open run of the span's
trace (after the call's new input messages, read from its request: the span gives them only at its
end), and as an ``otel_session.delta`` span event within the span's event limit less room for the
instrumentor's own events (``otel_session.deltas.dropped`` counts the rest). A tool call's block
opens with ``{"id":…,"name":…,"arguments":`` and closes with ``}`` (``open_call``/``close_call``),
the text its final block reads. ``close`` (at the stream's end, or earlier when the SDK says the
message stopped, or when the app closes the stream before its end: before the SDK ends the span)
closes open calls, releases what redaction held back and says the drops on the span. A span is tapped once: a
client under a wrapper (LiteLLM over the openai client) makes two streams of one call, and the
first one made (the client's) records it. Nothing here raises into the app: a failure is logged
once and the stream goes on untouched.
"""

from __future__ import annotations

import functools
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any, TypeVar

import orjson
from opentelemetry import trace

from otel_session.core import semconv as sc
from otel_session.instrument._log import warn_once
from otel_session.instrument._runtime import current_recorder
from otel_session.instrument.live_records import LIVE_INPUT, LIVE_OUTPUT, remember_live
from otel_session.core.journal import EventType
from otel_session.normalize import genai
from otel_session.normalize.genai_deltas import DELTA_MESSAGE, DELTAS_DROPPED
from otel_session.normalize.genai_messages import Message
from otel_session.normalize.genai_repeats import HeldMessages
from otel_session.redact import DeltaStream

__all__ = ["Originals", "StreamDeltas", "deltas_for", "is_foreign_model_call", "tap_stream", "tapped", "tapped_async", "unwrap_streams",
           "wrap_streams"]

_RESERVED_EVENTS = 16  # room left on a span for its instrumentor's own events
_MESSAGE_STARTED = EventType.MESSAGE_STARTED.value
_MESSAGE_FINISHED = EventType.MESSAGE_FINISHED.value
_ASSISTANT_DELTA = EventType.ASSISTANT_DELTA.value

Deltas = TypeVar("Deltas", bound="StreamDeltas")

_tapping: weakref.WeakValueDictionary[int, StreamDeltas] = weakref.WeakValueDictionary()
"""Span id → the tap recording its stream (until it closes, or is dropped unread)."""


_stream_taps: weakref.WeakKeyDictionary[Any, StreamDeltas] = weakref.WeakKeyDictionary()
"""A tapped SDK stream → its tap, closed first when the app closes the stream."""

Originals = dict[tuple[type, str], Callable[..., Any]]


def wrap_streams(streaming: Any, tap_sync: Callable[[Any], None], tap_async: Callable[[Any], None],
                 originals: Originals) -> None:
    """Tap the ``Stream`` and ``AsyncStream`` of an SDK's ``_streaming`` module as they are made,
    and close a stream's tap as the app closes the stream (an SDK or its instrumentor ends the
    call's span in ``close``: a stream left early would lose what its tap holds)."""
    _wrap_init(streaming.Stream, tap_sync, originals)
    _wrap_init(streaming.AsyncStream, tap_async, originals)
    _wrap_close(streaming.Stream, originals)
    _wrap_close(streaming.AsyncStream, originals)


def tap_stream(stream: Any, iterator: Any, deltas: StreamDeltas, tap: Callable[[Any, StreamDeltas], Any]) -> None:
    """``stream`` reads ``iterator`` through ``tap`` into ``deltas``, closed with the stream."""
    stream._iterator = tap(iterator, deltas)
    _stream_taps[stream] = deltas


def _wrap_init(cls: type, tap: Callable[[Any], None], originals: Originals) -> None:
    """``cls.__init__`` followed by ``tap(self)`` (once per class; ``originals`` keeps the unwrapped)."""
    if (cls, "__init__") in originals:
        return
    original = cls.__init__

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        try:
            tap(self)
        except Exception:  # noqa: BLE001 - capture failures never reach the app: its stream reads untapped
            warn_once(f"stream-tap-{cls.__module__}", "otel_session: could not tap a stream; its deltas are not recorded",
                      exc_info=True)

    originals[(cls, "__init__")] = original
    cls.__init__ = __init__  # type: ignore[misc]


def _wrap_close(cls: type, originals: Originals) -> None:
    """``cls.close`` after closing the stream's tap, if it has one: at the call, also for an async
    ``close`` (openai-v2's wrapper calls it without awaiting it)."""
    original = getattr(cls, "close", None)
    if original is None or (cls, "close") in originals:
        return

    @functools.wraps(original)
    def close(self: Any, *args: Any, **kwargs: Any) -> Any:
        _close_tap(self)
        return original(self, *args, **kwargs)  # an async close's coroutine, for the caller to await

    originals[(cls, "close")] = original
    cls.close = close  # type: ignore[attr-defined]


def _close_tap(stream: Any) -> None:
    try:
        deltas = _stream_taps.pop(stream, None)
    except TypeError:  # a stream that cannot be weakly referenced is never in it
        return
    if deltas is not None:
        deltas.close()  # once; never raises


def unwrap_streams(originals: Originals) -> None:
    for (cls, name), original in originals.items():
        setattr(cls, name, original)
    originals.clear()


def deltas_for(make: type[Deltas], body: Any, *, sdk: str,
               target: Callable[[Any], Any] | None = None) -> Deltas | None:
    """A ``make`` recording a stream's deltas on the current span (or on ``target(current)``),
    when that is a foreign model-call span (and a recorder is active); ``body`` is the request's."""
    try:
        recorder = current_recorder()
        if recorder is None or not recorder.active:
            return None
        span = trace.get_current_span()
        if target is not None:
            span = target(span)
        if span is None or not is_foreign_model_call(span):
            return None
        span_id = span.get_span_context().span_id
        if span_id in _tapping:
            return None  # another stream of the same call records it
        deltas = _tapping[span_id] = make(recorder, span, body)
        return deltas
    except Exception:  # noqa: BLE001 - capture failures never reach the app
        warn_once(f"stream-tap-{sdk}", f"otel_session: could not tap an {sdk} stream; its deltas are not recorded",
                  exc_info=True)
        return None


def is_foreign_model_call(span: Any) -> bool:
    """Whether ``span`` is a recording model-call span of another instrumentation than ours."""
    scope = getattr(span, "instrumentation_scope", None)
    if not span.is_recording() or scope is None or scope.name == sc.SCOPE_NAME:
        return False
    attributes = getattr(span, "attributes", None) or {}
    # An OpenInference span (a proxy of the SDK's) holds its span kind back until it ends.
    held = getattr(span, "_self_important_attributes", None)
    return genai.is_model_call({**attributes, **held} if isinstance(held, dict) and held else attributes)


def tapped(iterator: Iterator[Any], deltas: StreamDeltas) -> Iterator[Any]:
    try:
        for item in iterator:
            deltas.take(item)
            yield item
    finally:
        deltas.close()


async def tapped_async(iterator: AsyncIterator[Any], deltas: StreamDeltas) -> AsyncIterator[Any]:
    try:
        async for item in iterator:
            deltas.take(item)
            yield item
    finally:
        deltas.close()


class _Block:
    __slots__ = ("index", "kind", "stream")

    def __init__(self, index: int, kind: str, stream: DeltaStream[int]) -> None:
        self.index = index
        self.kind = kind
        self.stream = stream


class StreamDeltas:
    """One tapped stream: its blocks, the span events it may still add, the run it journals into."""

    def __init__(self, recorder: Any, span: Any, body: Any) -> None:
        context = span.get_span_context()
        self._span = span
        self._body = body
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
        self._held = HeldMessages.of(handle) if self._journal is not None else None
        turn_index = (getattr(span, "attributes", None) or {}).get(sc.TURN_INDEX)
        self._turn_index = turn_index if isinstance(turn_index, int) else None
        self._closed = False

    # -- what each SDK says ----------------------------------------------------------------

    def feed(self, item: Any) -> None:
        """Read one chunk of the stream (``piece``, ``open_call``, ``close_call``, ``close``)."""
        raise NotImplementedError

    def request_messages(self, body: Mapping[str, Any]) -> list[Message]:
        """The call's new input messages, from its request body."""
        raise NotImplementedError

    # -- reading chunks --------------------------------------------------------------------

    def take(self, item: Any) -> None:
        if self._closed:
            return
        try:
            self.feed(item)
        except Exception:  # noqa: BLE001
            warn_once("stream-delta", "otel_session: a streamed chunk could not be recorded", exc_info=True)

    def open_call(self, position: int, key: tuple[Any, ...], call_id: Any, name: Any, arguments: str = "") -> None:
        """A tool call's block begins: the start of its final text (and the chunk's ``arguments``)."""
        self._open_calls[key] = position
        self.piece(position, key, "tool_call", _call_opening(call_id, name) + arguments)

    def is_open_call(self, key: tuple[Any, ...]) -> bool:
        return key in self._open_calls

    def close_call(self, key: tuple[Any, ...]) -> None:
        self.piece(self._open_calls.pop(key), key, "tool_call", "}")

    # -- recording deltas ------------------------------------------------------------------

    def piece(self, position: int, key: tuple[Any, ...], kind: str, text: str) -> None:
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
        if not isinstance(self._body, dict):
            return
        redact = self._redactor.redact_payload
        for position, message in enumerate(self.request_messages(self._body)):
            message_id = f"{self._span_hex}-in-{position}"
            remember_live(self._trace_id, self._span_id, message_id, LIVE_INPUT)
            ids = self._ids(message_id)
            payload = redact(_MESSAGE_FINISHED, {"settled": True, "content": message.content})
            if self._held is not None and self._held.repeats(self._turn_index, message.role, payload["content"]):
                continue  # the run holds it (an API record: a framework's user message); the span's copy goes too
            journal.append(_MESSAGE_STARTED, {"role": message.role}, at_ns=self._start_ns, **ids)
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
        if _tapping.get(self._span_id) is self:
            del _tapping[self._span_id]
        try:
            for key in list(self._open_calls):
                self.close_call(key)
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
