"""A plain LiteLLM app with no otel_session code: streamed calls, sync and async, through LiteLLM's
openai provider (the openai client underneath) and its anthropic one (LiteLLM's own HTTP client),
against the mock LLM at ``argv[1]`` (its root URL), in session ``litellm-chat`` (OpenInference's
``using_session``). Run it under ``opentelemetry-instrument`` in the LiteLLM venv; it prints each
call's streamed text and chunk count as JSON lines."""

from __future__ import annotations

import asyncio
import json
import sys

import litellm
from openinference.instrumentation import using_session

CALLS = (("openai/mock-gpt", "/v1"), ("anthropic/mock-claude", ""))


def main(root: str) -> None:
    with using_session("litellm-chat"):
        for model, path in CALLS:
            chunks = [chunk.choices[0].delta.content or "" for chunk in litellm.completion(
                model=model, api_base=root + path, api_key="unused", stream=True,
                messages=[{"role": "user", "content": f"hello sync {model} ann@example.com"}])
                if chunk.choices]
            print(json.dumps({"model": model, "mode": "sync", "text": "".join(chunks), "chunks": sum(map(bool, chunks))}))
        asyncio.run(streamed_async(root))


async def streamed_async(root: str) -> None:
    for model, path in CALLS:
        stream = await litellm.acompletion(model=model, api_base=root + path, api_key="unused", stream=True,
                                           messages=[{"role": "user", "content": f"hello async {model}"}])
        chunks = [chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices]
        print(json.dumps({"model": model, "mode": "async", "text": "".join(chunks), "chunks": sum(map(bool, chunks))}))


if __name__ == "__main__":
    main(sys.argv[1])
