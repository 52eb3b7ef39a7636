"""Every chunk of a LiteLLM stream as an ``assistant_delta``, with no code (issue 33).

Usage::

    LiteLLMInstrumentor().instrument()    # or, with no code: opentelemetry-instrument python app.py
                                          # (entry point ``otel_session_litellm``)

``litellm.completion(stream=True)`` and ``acompletion(stream=True)`` return a ``CustomStreamWrapper``
(``litellm.litellm_core_utils.streaming_handler``) whatever the provider, yielding Chat Completions
chunks (``ModelResponseStream``). When the app imports that module (at once if it has;
``instrument()`` never imports it: ``_on_import``), the instrumentor wraps the class's
``__init__``, ``__next__`` and ``__anext__``: a stream made while a foreign model-call span is current
(OpenInference's LiteLLM instrumentor keeps its span current for the call; ADK's ``call_llm``
span around it) records each chunk's text, tool-call arguments and reasoning as deltas of that
span's output message, as the openai client's streams do (``openai_streams.OpenAIDeltas``, recorded by
``stream_deltas``: live into the open run, and as ``otel_session.delta`` span events for the
collector), after the call's new input messages (LiteLLM's ``messages``). The stream closes its
deltas when it ends or fails. A provider LiteLLM reaches through the openai client (``openai/…``)
streams twice, the client's stream inside LiteLLM's: the client's tap records the call, this one
leaves it (one tap per span). Recording needs the ``otel_session`` recorder (the ``otel_session``
instrumentor, or ``otel_session.configure()``); capture failures are logged once, never raised.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from types import ModuleType
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

from otel_session.instrument._log import warn_once
from otel_session.instrument._frameworks import replace_methods
from otel_session.instrument._on_import import PendingPatch, on_import
from otel_session.instrument.openai_streams import OpenAIDeltas
from otel_session.instrument.stream_deltas import StreamDeltas, deltas_for

__all__ = ["STREAMING_MODULE", "LiteLLMInstrumentor"]

STREAMING_MODULE = "litellm.litellm_core_utils.streaming_handler"
_instruments = ("litellm >= 1.60",)
_DELTAS = "_otel_session_deltas"  # the tap of one stream, on the stream


class LiteLLMInstrumentor(BaseInstrumentor):
    """Records LiteLLM's streamed chunks as deltas (entry point ``otel_session_litellm``)."""

    _patch: PendingPatch | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return _instruments

    def _instrument(self, **kwargs: Any) -> None:
        LiteLLMInstrumentor._patch = on_import(STREAMING_MODULE, _patch_streams)  # when the app imports it

    def _uninstrument(self, **kwargs: Any) -> None:
        patch, LiteLLMInstrumentor._patch = LiteLLMInstrumentor._patch, None
        if patch is not None:
            patch.undo()


def _patch_streams(module: ModuleType) -> Callable[[], None]:
    wrapper = module.CustomStreamWrapper
    original_init, original_next, original_anext = wrapper.__init__, wrapper.__next__, wrapper.__anext__

    @functools.wraps(original_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        _tap(self)

    @functools.wraps(original_next)
    def __next__(self: Any) -> Any:
        deltas: StreamDeltas | None = self.__dict__.get(_DELTAS)
        if deltas is None:
            return original_next(self)
        try:
            chunk = original_next(self)
        except BaseException:  # the end (StopIteration) or a failure: the stream's deltas are complete
            deltas.close()
            raise
        deltas.take(chunk)
        return chunk

    @functools.wraps(original_anext)
    async def __anext__(self: Any) -> Any:
        deltas: StreamDeltas | None = self.__dict__.get(_DELTAS)
        if deltas is None:
            return await original_anext(self)
        try:
            chunk = await original_anext(self)
        except BaseException:
            deltas.close()
            raise
        deltas.take(chunk)
        return chunk

    return replace_methods(wrapper, {"__init__": __init__, "__next__": __next__, "__anext__": __anext__})


def _tap(stream: Any) -> None:
    """Record ``stream``'s chunks on the current model-call span, if there is one to record on."""
    try:
        messages = getattr(getattr(stream, "logging_obj", None), "messages", None)
        deltas = deltas_for(OpenAIDeltas, {"messages": messages} if isinstance(messages, list) else None, sdk="litellm")
        if deltas is not None:
            stream.__dict__[_DELTAS] = deltas
    except Exception:  # noqa: BLE001 - capture failures never reach the app: its stream reads untapped
        warn_once("stream-tap-litellm", "otel_session: could not tap a LiteLLM stream; its deltas are not recorded",
                  exc_info=True)
