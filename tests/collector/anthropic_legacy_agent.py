"""A streamed Claude conversation on an older ``anthropic`` (run in its own venv, ``test_anthropic_streams_legacy``).

Usage: ``python anthropic_legacy_agent.py BUNDLE_DIR GREETING``

anthropic before 1.14 makes ``Stream._iterator`` in ``__init__`` (later versions make it on first
use) and has no call spans of its own; OpenInference's instrumentor needs a newer one, so the
model-call span is made here as an instrumentor makes it (OpenInference's attributes, current
around the call, the messages set at its end). The otel_session instrumentor records in process:
three streams, sync ``create(stream=True)``, the sync ``messages.stream()`` helper and async
``create(stream=True)``, in one run. Prints the anthropic version.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import anthropic
from opentelemetry.sdk.trace import TracerProvider

import otel_session
from otel_session.demo.mock_llm import MockLLMServer
from otel_session.instrument.instrumentor import OtelSessionInstrumentor

MODEL = "mock-claude"


@contextmanager
def model_call(tracer, text: str) -> Iterator[list[str]]:
    """An OpenInference-style LLM span, current for the call; the reply (appended) set at its end."""
    reply: list[str] = []
    with tracer.start_as_current_span("Messages", attributes={
            "openinference.span.kind": "LLM", "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": text}) as span:
        yield reply
        span.set_attributes({"llm.output_messages.0.message.role": "assistant",
                             "llm.output_messages.0.message.content": "".join(reply)})


def main() -> None:
    bundle_dir, greeting = sys.argv[1:3]
    provider = TracerProvider()
    instrumentor = OtelSessionInstrumentor()
    instrumentor.instrument(tracer_provider=provider, bundle_dir=bundle_dir)
    tracer = provider.get_tracer("legacy-llm")
    with MockLLMServer() as llm:
        client = anthropic.Anthropic(base_url=llm.root_url, api_key="unused")
        with otel_session.session("legacy"), otel_session.run(agent="legacy"):
            with model_call(tracer, greeting) as reply:
                reply.extend(event.delta.text for event in client.messages.create(
                    model=MODEL, max_tokens=64, stream=True, messages=[{"role": "user", "content": greeting}])
                    if event.type == "content_block_delta")
            with model_call(tracer, "helper") as reply:
                with client.messages.stream(model=MODEL, max_tokens=64,
                                            messages=[{"role": "user", "content": "helper"}]) as stream:
                    reply.extend(stream.text_stream)

            async def streamed_async() -> None:
                with model_call(tracer, "async") as reply:
                    async_client = anthropic.AsyncAnthropic(base_url=llm.root_url, api_key="unused")
                    async for event in await async_client.messages.create(
                            model=MODEL, max_tokens=64, stream=True, messages=[{"role": "user", "content": "async"}]):
                        if event.type == "content_block_delta":
                            reply.append(event.delta.text)

            asyncio.run(streamed_async())
    instrumentor.uninstrument()
    provider.shutdown()
    print(anthropic.__version__)


if __name__ == "__main__":
    main()
