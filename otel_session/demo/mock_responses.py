"""The OpenAI Responses API shapes of the mock LLM (``POST /v1/responses``), on the same responder.

Contract::

    messages, tools = chat_request(request)        # a Responses request as Chat Completions fields
    body = response(request, reply)                 # the non-streamed ``response`` object
    for event in stream_events(request, reply): ... # the streamed events, ``response.created`` … ``response.completed``

A request's ``input`` (a string, or items: messages, ``function_call``, ``function_call_output``)
and ``instructions`` become chat messages, so :func:`otel_session.demo.mock_llm.canned_reply`
answers both APIs alike. A request that asks for ``reasoning`` gets a reasoning item first
(``"Thinking about: <last user text>"``, streamed as ``response.reasoning_summary_text.delta``),
so clients see every kind of delta the API streams: reasoning, text and function-call arguments.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import orjson

from otel_session.demo.mock_reply import Reply

__all__ = ["chat_request", "response", "stream_events"]

_CREATED = 1_764_000_000


def _digest(value: Any) -> str:
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def chat_request(request: dict[str, Any]) -> dict[str, Any]:
    """``request`` (a Responses request) as the Chat Completions request the responder reads."""
    messages: list[dict[str, Any]] = []
    if request.get("instructions"):
        messages.append({"role": "system", "content": str(request["instructions"])})
    items = request.get("input")
    for item in [{"role": "user", "content": items}] if isinstance(items, str) else items or ():
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments")}}
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": _text(item.get("output"))})
        elif "role" in item:
            role = "system" if item["role"] == "developer" else item["role"]
            messages.append({"role": role, "content": _text(item.get("content"))})
    tools = [
        {"type": "function", "function": {"name": tool.get("name")}}
        for tool in request.get("tools") or ()
        if isinstance(tool, dict) and tool.get("type") == "function"
    ]
    return {"model": request.get("model"), "messages": messages, "tools": tools}


def _reasoning_text(request: dict[str, Any]) -> str | None:
    if not request.get("reasoning"):
        return None
    users = [m for m in chat_request(request)["messages"] if m.get("role") == "user"]
    return f"Thinking about: {users[-1]['content'] if users else ''}"


def _output(request: dict[str, Any], reply: Reply) -> list[dict[str, Any]]:
    base = _digest(request)[:20]
    items: list[dict[str, Any]] = []
    reasoning = _reasoning_text(request)
    if reasoning:
        items.append({"type": "reasoning", "id": f"rs_{base}", "status": "completed",
                      "summary": [{"type": "summary_text", "text": reasoning}]})
    if reply.content:
        items.append({"type": "message", "id": f"msg_{base}", "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": reply.content, "annotations": []}]})
    for position, call in enumerate(reply.tool_calls):
        items.append({"type": "function_call", "id": f"fc_{base}_{position}", "call_id": call.id,
                      "name": call.name, "arguments": call.arguments, "status": "completed"})
    return items


def response(request: dict[str, Any], reply: Reply, *, output: list[dict[str, Any]] | None = None,
             status: str = "completed") -> dict[str, Any]:
    """The ``response`` object for ``reply`` (``output`` and ``status`` while it streams)."""
    return {
        "id": f"resp_{_digest(request)[:24]}",
        "object": "response",
        "created_at": _CREATED,
        "status": status,
        "model": request.get("model") or "mock-gpt",
        "output": _output(request, reply) if output is None else output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": request.get("tools") or [],
        "usage": {
            "input_tokens": reply.prompt_tokens,
            "output_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def _pieces(text: str) -> list[str]:
    words = text.split(" ")
    return [word if position == len(words) - 1 else word + " " for position, word in enumerate(words)]


def stream_events(request: dict[str, Any], reply: Reply) -> Iterator[dict[str, Any]]:
    """The events of a streamed response, each with its ``sequence_number``."""
    sequence = iter(range(1_000_000))

    def event(kind: str, **fields: Any) -> dict[str, Any]:
        return {"type": kind, "sequence_number": next(sequence), **fields}

    yield event("response.created", response=response(request, reply, output=[], status="in_progress"))
    for index, item in enumerate(_output(request, reply)):
        kind = item["type"]
        opening = {**item, "status": "in_progress"}
        if kind == "reasoning":
            opening["summary"] = []
        elif kind == "message":
            opening["content"] = []
        elif kind == "function_call":
            opening["arguments"] = ""
        yield event("response.output_item.added", output_index=index, item=opening)
        ids = {"item_id": item["id"], "output_index": index}
        if kind == "reasoning":
            text = item["summary"][0]["text"]
            yield event("response.reasoning_summary_part.added", **ids, summary_index=0,
                        part={"type": "summary_text", "text": ""})
            for piece in _pieces(text):
                yield event("response.reasoning_summary_text.delta", **ids, summary_index=0, delta=piece)
            yield event("response.reasoning_summary_text.done", **ids, summary_index=0, text=text)
            yield event("response.reasoning_summary_part.done", **ids, summary_index=0,
                        part={"type": "summary_text", "text": text})
        elif kind == "message":
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": []}
            yield event("response.content_part.added", **ids, content_index=0, part=part)
            for piece in _pieces(text):
                yield event("response.output_text.delta", **ids, content_index=0, delta=piece, logprobs=[])
            yield event("response.output_text.done", **ids, content_index=0, text=text, logprobs=[])
            yield event("response.content_part.done", **ids, content_index=0, part={**part, "text": text})
        else:
            arguments = item["arguments"]
            middle = len(arguments) // 2
            for piece in (arguments[:middle], arguments[middle:]):
                yield event("response.function_call_arguments.delta", **ids, delta=piece)
            yield event("response.function_call_arguments.done", **ids, arguments=arguments)
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=response(request, reply))
