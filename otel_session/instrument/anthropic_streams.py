"""Every event of an ``anthropic`` client stream as an ``assistant_delta``, with no code (issue 16 §2).

Contract::

    install()       # the otel_session instrumentor calls it (opentelemetry-instrument); idempotent:
                    # taps now if the app imported ``anthropic``, else when it does (never imports it)
    uninstall()     # untaps, or cancels the pending tap

``install`` wraps ``anthropic``'s ``Stream.__init__`` and ``AsyncStream.__init__``: every Messages
stream is one, sync and async, ``messages.create(stream=True)`` and the ``messages.stream()``
helper alike (its ``MessageStream`` reads one), beta, Bedrock and Vertex too, whoever wraps
``create``. A stream made while a foreign model-call span is current has its iterator tapped, its
deltas on the span that will hold the call's output content (``_target``):

* the SDK's own call span (anthropic 1.14 and later: ``anthropic.messages.create``, scope
  ``com.anthropic.sdk.python``, current while the request is sent and the stream made) gives way
  to the foreign model-call span that was current when it started (OpenInference's
  ``messages.create``), which ``install`` learns by wrapping the SDK's ``start_api_call_span``;
* without one, it takes the deltas only when the client records content
  (``open_telemetry={"traces": {"content_mode": "content"}}``): in metadata mode (the default) it
  holds none, and the deltas would make a second reply that nothing settles beside the one another
  instrumentor records on a span that is not current (Traceloop's never is; OpenInference's
  ``messages.stream`` is not when the helper sends the request): such a stream is left alone;
* any other foreign model-call span (OpenInference's, the SDK's tracing off) takes them.

Recording is ``stream_deltas``' (as ``openai_streams``): deltas of the message ``{span_id}-out-0``,
redacted as they stream, journaled live in process and put on the span as ``otel_session.delta``
events. The SDK's span has output content only for a stream read through the helper (which shares
its snapshot); a raw ``create(stream=True)`` stream's reply is its deltas alone (in process;
the collector journals no deltas of a span without output messages).

Event by event: ``content_block_start``/``content_block_delta`` of a ``text`` block (``text_delta``)
→ ``text``; of a ``thinking`` block (``thinking_delta``) → ``thinking``; of a ``tool_use`` (also
``server_tool_use``, ``mcp_tool_use``) block → ``tool_call``, streamed as its final block reads:
``{"id":…,"name":…,"arguments":`` at its start, the ``input_json_delta`` fragments (the block's
start ``input``, compact JSON, when none come), ``}`` at ``content_block_stop``. Signatures,
citations and redacted thinking are not content. ``message_stop`` ends the recording: the SDK ends
its span when the stream's body ends, right after that event, so whatever redaction held back is
released while the span still takes events. The call's new input messages come from the request
as the SDK's span reads them: ``system`` first (only before any assistant message), then each
message's blocks (text, thinking, tool calls, tool results).
"""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from types import ModuleType
from typing import Any

import orjson
from opentelemetry import trace

from otel_session.instrument._log import warn_once
from otel_session.instrument._on_import import PendingPatch, on_import
from otel_session.instrument.stream_deltas import (
    Originals, StreamDeltas, deltas_for, is_foreign_model_call, tap_stream, tapped, tapped_async, unwrap_streams, wrap_streams,
)
from otel_session.normalize.genai_messages import Message, new_inputs, request_inputs

__all__ = ["install", "uninstall"]

_CALL_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})

_SDK_SCOPE = "com.anthropic.sdk.python"  # the SDK's own call spans (anthropic 1.14 and later, ``_tracing``)

_originals: Originals = {}
_start_span: list[Callable[..., Any]] = []  # the SDK's ``start_api_call_span``, while wrapped
_parents: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()  # SDK call span → model-call span around it
_patch: PendingPatch | None = None


def install() -> None:
    """Tap the streams of the ``anthropic`` client from now on, as soon as the app imports it."""
    global _patch
    if _patch is None or not _patch.active:
        _patch = on_import("anthropic", _wrap)


def uninstall() -> None:
    if _patch is not None:
        _patch.undo()


def _wrap(module: ModuleType) -> Callable[[], None]:
    from anthropic import _base_client, _streaming  # imported with the package

    wrap_streams(_streaming, _tap_sync, _tap_async, _originals)
    original = getattr(_base_client, "start_api_call_span", None)
    if original is not None and not _start_span:
        _start_span.append(original)

        @functools.wraps(original)
        def start_api_call_span(*args: Any, **kwargs: Any) -> Any:
            around = trace.get_current_span()
            span = original(*args, **kwargs)
            try:
                if span is not None and is_foreign_model_call(around):
                    _parents[span] = around
            except Exception:  # noqa: BLE001
                warn_once("stream-parent-anthropic", "otel_session: could not read an anthropic call's span", exc_info=True)
            return span

        _base_client.start_api_call_span = start_api_call_span  # type: ignore[attr-defined]

    def unwrap() -> None:
        unwrap_streams(_originals)
        if _start_span:
            _base_client.start_api_call_span = _start_span.pop()  # type: ignore[attr-defined]

    return unwrap


def _tap_sync(stream: Any) -> None:
    _tap(stream, tapped, _made_on_first_use)


def _tap_async(stream: Any) -> None:
    _tap(stream, tapped_async, _made_on_first_use_async)


def _tap(stream: Any, tap: Callable[[Any, StreamDeltas], Any], later: Callable[[Callable[[Any], Any], Any], Any]) -> None:
    """Replace what ``Stream.__iter__``/``__next__`` read, ``_iterator``: an attribute set in
    ``__init__`` (anthropic before 1.14), or a ``cached_property`` made on first use (later: left
    to be made then, on a copy of the stream, as the SDK means it to)."""
    made = "_iterator" in vars(stream)
    source = None if made else inspect.getattr_static(type(stream), "_iterator", None)
    if not made and not isinstance(source, functools.cached_property):
        warn_once("stream-shape-anthropic",
                  "otel_session: this anthropic version's streams cannot be tapped; no deltas recorded")
        return
    deltas = deltas_for(_AnthropicDeltas, getattr(getattr(stream, "_options", None), "json_data", None),
                        sdk="anthropic", target=functools.partial(_target, stream))
    if deltas is None:
        return
    if made:
        tap_stream(stream, stream._iterator, deltas, tap)
    else:
        # A weak reference: a generator held by the stream that referred to it would make a cycle
        # (the SDK avoids one so that a dropped stream closes its response at once).
        tap_stream(stream, later(source.func, weakref.ref(stream)), deltas, tap)  # type: ignore[union-attr]


def _target(stream: Any, current: Any) -> Any:
    """The span that gets ``stream``'s deltas, ``current`` made at ``__init__`` (the module docstring's rule)."""
    scope = getattr(current, "instrumentation_scope", None)
    if scope is None or scope.name != _SDK_SCOPE:
        return current
    around = _parents.get(current)
    if around is not None:
        return around
    otel = getattr(getattr(stream, "_client", None), "_otel", None)
    return current if getattr(otel, "records_content", False) else None


def _made_on_first_use(make: Callable[[Any], Iterator[Any]], stream: weakref.ref[Any]) -> Iterator[Any]:
    yield from _made_untapped(make, stream())


async def _made_on_first_use_async(make: Callable[[Any], AsyncIterator[Any]], stream: weakref.ref[Any]) -> AsyncIterator[Any]:
    iterator = _made_untapped(make, stream())
    try:
        async for item in iterator:
            yield item
    finally:
        await iterator.aclose()


def _made_untapped(make: Callable[[Any], Any], stream: Any) -> Any:
    """``make(stream)`` (the SDK's ``copy(self).__stream__()``) while the stream's tapped ``_iterator``
    is out of its ``__dict__``: a copy holding it would hold the generator that runs it (a cycle,
    and the response closed by the garbage collector instead of when the app drops the stream)."""
    attributes = vars(stream)
    tapped = attributes.pop("_iterator", None)
    try:
        return make(stream)
    finally:
        if tapped is not None:
            attributes["_iterator"] = tapped


class _AnthropicDeltas(StreamDeltas):
    """Messages stream events (``RawMessageStreamEvent``, beta ones alike)."""

    def __init__(self, recorder: Any, span: Any, body: Any) -> None:
        super().__init__(recorder, span, body)
        self._calls: dict[int, Any] = {}  # open tool-call block index → its start input, until a fragment comes

    def request_messages(self, body: Mapping[str, Any]) -> list[Message]:
        items = [{"role": "system", "parts": _parts(body["system"])}] if body.get("system") else []
        for message in body.get("messages") or ():
            message = _plain(message)
            if isinstance(message, dict):
                items.append({"role": str(message.get("role") or "user"), "parts": _parts(message.get("content"))})
        return new_inputs(request_inputs({"messages": items}))

    def feed(self, item: Any) -> None:
        kind = getattr(item, "type", None)
        if kind == "content_block_delta":
            self._delta(item.index, item.delta)
        elif kind == "content_block_start":
            self._start(item.index, item.content_block)
        elif kind == "content_block_stop" and self.is_open_call(("block", item.index)):
            start_input = self._calls.pop(item.index, None)
            if start_input is not None:
                self.piece(0, ("block", item.index), "tool_call", orjson.dumps(_plain(start_input)).decode())
            self.close_call(("block", item.index))
        elif kind == "message_stop":
            self.close()

    def _start(self, index: int, block: Any) -> None:
        kind = getattr(block, "type", None)
        if kind == "text":
            self.piece(0, ("block", index), "text", getattr(block, "text", None) or "")
        elif kind == "thinking":
            self.piece(0, ("block", index), "thinking", getattr(block, "thinking", None) or "")
        elif kind in _CALL_BLOCKS:
            self._calls[index] = getattr(block, "input", None) or {}
            self.open_call(0, ("block", index), getattr(block, "id", None), getattr(block, "name", None))

    def _delta(self, index: int, delta: Any) -> None:
        kind = getattr(delta, "type", None)
        if kind == "text_delta":
            self.piece(0, ("block", index), "text", delta.text)
        elif kind == "thinking_delta":
            self.piece(0, ("block", index), "thinking", delta.thinking)
        elif kind == "input_json_delta" and self.is_open_call(("block", index)) and delta.partial_json:
            self._calls.pop(index, None)
            self.piece(0, ("block", index), "tool_call", delta.partial_json)


def _parts(content: Any) -> list[dict[str, Any]]:
    """Request content as GenAI message parts, as the SDK's span writes them."""
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts = []
    for block in content if isinstance(content, (list, tuple)) else ():
        block = _plain(block)
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            parts.append({"type": "text", "content": block.get("text")})
        elif kind == "thinking":
            parts.append({"type": "reasoning", "content": block.get("thinking")})
        elif kind in _CALL_BLOCKS:
            parts.append({"type": "tool_call", "id": block.get("id"), "name": block.get("name"),
                          "arguments": block.get("input")})
        elif kind == "tool_result":
            parts.append({"type": "tool_call_response", "id": block.get("tool_use_id"),
                          "response": _result(block.get("content"))})
    return parts


def _result(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks = [_plain(block) for block in content] if isinstance(content, (list, tuple)) else []
    return [block if block.get("type") in ("text", "search_result") else {"type": block.get("type")}
            for block in blocks if isinstance(block, dict)]


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(exclude_none=True) if callable(dump) else value
