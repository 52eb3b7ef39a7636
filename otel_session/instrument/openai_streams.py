"""Every chunk of an ``openai`` client stream as an ``assistant_delta``, with no code (issue 16 §2).

Contract::

    install()       # the otel_session instrumentor calls it (opentelemetry-instrument); idempotent:
                    # taps now if the app imported ``openai``, else when it does (never imports it)
    uninstall()     # untaps, or cancels the pending tap

Third-party instrumentors (openai-v2, OpenInference, OpenLLMetry) put only a streamed call's final
text on its span. ``install`` wraps ``openai``'s ``Stream.__init__`` and ``AsyncStream.__init__``
(the objects every Chat Completions and Responses stream is, sync and async, whoever wraps
``create``): a stream made while a foreign model-call span is current (openai-v2 makes it current
for the call) has its iterator tapped. Each chunk's text, tool-call arguments and reasoning become
deltas of the call's output message ``{span_id}-out-{choice}``, redacted as they stream
(``Redactor.delta_stream``) and recorded twice (``stream_deltas``, shared with ``anthropic_streams``):

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
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from otel_session.instrument._log import warn_once
from otel_session.instrument._on_import import PendingPatch, on_import
from otel_session.instrument.stream_deltas import (
    Originals, StreamDeltas, deltas_for, tap_stream, tapped, tapped_async, unwrap_streams, wrap_streams,
)
from otel_session.normalize.genai_messages import Message, new_inputs, request_inputs

__all__ = ["OpenAIDeltas", "install", "uninstall"]

_originals: Originals = {}
_patch: PendingPatch | None = None


def install() -> None:
    """Tap the streams of the ``openai`` client from now on, as soon as the app imports it."""
    global _patch
    if _patch is None or not _patch.active:
        _patch = on_import("openai", _wrap)


def uninstall() -> None:
    if _patch is not None:
        _patch.undo()


def _wrap(module: ModuleType) -> Callable[[], None]:
    from openai import _streaming  # imported with the package

    wrap_streams(_streaming, _tap_sync, _tap_async, _originals)
    return functools.partial(unwrap_streams, _originals)


def _tap_sync(stream: Any) -> None:
    _tap(stream, tapped)


def _tap_async(stream: Any) -> None:
    _tap(stream, tapped_async)


def _tap(stream: Any, tap: Callable[[Any, StreamDeltas], Any]) -> None:
    iterator = getattr(stream, "_iterator", None)  # what Stream.__iter__/__next__ read (openai 1.x-3.x)
    if iterator is None:
        warn_once("stream-shape", "otel_session: this openai version's streams cannot be tapped; no deltas recorded")
        return
    deltas = deltas_for(OpenAIDeltas, getattr(getattr(stream, "_options", None), "json_data", None), sdk="openai")
    if deltas is not None:
        tap_stream(stream, iterator, deltas, tap)


class OpenAIDeltas(StreamDeltas):
    """Chat Completions chunks and Responses events (LiteLLM's chunks are Chat Completions chunks too)."""

    def request_messages(self, body: Mapping[str, Any]) -> list[Message]:
        return new_inputs(request_inputs(body))

    def feed(self, item: Any) -> None:
        kind = getattr(item, "type", None)
        if isinstance(kind, str) and kind.startswith("response."):
            self._response_event(kind, item)
        else:
            for choice in getattr(item, "choices", None) or ():
                self._chat_choice(choice)

    def _chat_choice(self, choice: Any) -> None:
        position = getattr(choice, "index", 0) or 0
        delta = getattr(choice, "delta", None)
        if delta is None:
            return
        extra = getattr(delta, "model_extra", None) or {}
        reasoning = getattr(delta, "reasoning_content", None) or extra.get("reasoning_content")
        if reasoning:
            self.piece(position, ("reasoning",), "thinking", reasoning)
        if getattr(delta, "content", None):
            self.piece(position, ("text",), "text", delta.content)
        for call in getattr(delta, "tool_calls", None) or ():
            key = ("tool", getattr(call, "index", 0))
            function = getattr(call, "function", None)
            arguments = getattr(function, "arguments", None) or ""
            if self.is_open_call(key):
                self.piece(position, key, "tool_call", arguments)
            else:
                self.open_call(position, key, getattr(call, "id", None), getattr(function, "name", None), arguments)

    def _response_event(self, kind: str, event: Any) -> None:
        output_index = getattr(event, "output_index", 0)
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            self.piece(0, ("text", output_index, event.content_index), "text", event.delta)
        elif kind == "response.reasoning_summary_text.delta":
            self.piece(0, ("summary", output_index, event.summary_index), "thinking", event.delta)
        elif kind == "response.reasoning_text.delta":
            self.piece(0, ("reasoning", output_index, event.content_index), "thinking", event.delta)
        elif kind == "response.output_item.added" and getattr(event.item, "type", None) == "function_call":
            self.open_call(0, ("call", output_index), event.item.call_id, event.item.name)
        elif kind == "response.function_call_arguments.delta":
            self.piece(0, ("call", output_index), "tool_call", event.delta)
        elif kind == "response.output_item.done" and self.is_open_call(("call", output_index)):
            self.close_call(("call", output_index))
