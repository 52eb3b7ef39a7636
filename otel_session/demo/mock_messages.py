"""The Anthropic Messages API shapes of the mock LLM (``POST /v1/messages``), on the same responder.

Contract::

    chat = chat_request(request)                    # a Messages request as a Chat Completions request
    body = message(request, reply)                  # the non-streamed ``message`` object
    for event in stream_events(request, reply): ... # the streamed events, ``message_start`` … ``message_stop``

A request's ``system``, ``messages`` (string or block content: ``text``, ``tool_use``,
``tool_result``) and ``tools`` become Chat Completions fields, so
:func:`otel_session.demo.mock_llm.canned_reply` answers both APIs alike. A request that enables
``thinking`` gets a ``thinking`` block first (``"Thinking about: <last user text>"``, streamed as
``thinking_delta`` events and a ``signature_delta``), so clients see every kind of delta the API
streams: thinking, text and tool-use input (``input_json_delta``, an empty fragment first as the
API sends it, and alone for an empty input). Text streams word by word; a ``ping`` follows ``message_start``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import orjson

from otel_session.demo.mock_reply import Reply

__all__ = ["chat_request", "message", "stream_events"]

_STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def _digest(value: Any) -> str:
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    return str(content or "")


def chat_request(request: dict[str, Any]) -> dict[str, Any]:
    """``request`` (a Messages request) as the Chat Completions request the responder reads."""
    messages: list[dict[str, Any]] = []
    if request.get("system"):
        messages.append({"role": "system", "content": _text(request["system"])})
    for item in request.get("messages") or ():
        if not isinstance(item, dict):
            continue
        content = item.get("content")
        blocks = [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []
        results = [block for block in blocks if block.get("type") == "tool_result"]
        calls = [{"id": block.get("id"), "type": "function",
                  "function": {"name": block.get("name"), "arguments": orjson.dumps(block.get("input") or {}).decode()}}
                 for block in blocks if block.get("type") == "tool_use"]
        for result in results:
            messages.append({"role": "tool", "tool_call_id": result.get("tool_use_id"), "content": _text(result.get("content"))})
        texts = [block for block in blocks if block.get("type") == "text"]
        if not results or texts:
            message: dict[str, Any] = {"role": item.get("role"), "content": _text(texts) if blocks else _text(content)}
            if calls:
                message["tool_calls"] = calls
            messages.append(message)
    tools = [{"type": "function", "function": {"name": tool.get("name"), "parameters": tool.get("input_schema") or {}}}
             for tool in request.get("tools") or () if isinstance(tool, dict)]
    return {"model": request.get("model"), "messages": messages, "tools": tools}


def _thinking_text(request: dict[str, Any]) -> str | None:
    if (request.get("thinking") or {}).get("type") != "enabled":
        return None
    users = [m for m in chat_request(request)["messages"] if m.get("role") == "user"]
    return f"Thinking about: {users[-1]['content'] if users else ''}"


def _blocks(request: dict[str, Any], reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    thinking = _thinking_text(request)
    if thinking:
        blocks.append({"type": "thinking", "thinking": thinking, "signature": f"sig-{_digest(thinking)[:16]}"})
    if reply.content:
        blocks.append({"type": "text", "text": reply.content})
    for call in reply.tool_calls:
        blocks.append({"type": "tool_use", "id": "toolu_" + call.id.removeprefix("call_"), "name": call.name,
                       "input": orjson.loads(call.arguments)})
    return blocks


def message(request: dict[str, Any], reply: Reply, *, content: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "id": f"msg_{_digest(request)[:24]}",
        "type": "message",
        "role": "assistant",
        "model": request.get("model") or "mock-claude",
        "content": _blocks(request, reply) if content is None else content,
        "stop_reason": _STOP_REASONS.get(reply.finish_reason, reply.finish_reason),
        "stop_sequence": None,
        "usage": {"input_tokens": reply.prompt_tokens, "output_tokens": reply.completion_tokens},
    }


def _words(text: str) -> list[str]:
    words = text.split(" ")
    return [word if position == len(words) - 1 else word + " " for position, word in enumerate(words)]


def stream_events(request: dict[str, Any], reply: Reply) -> Iterator[dict[str, Any]]:
    start = message(request, reply, content=[])
    yield {"type": "message_start", "message": {**start, "stop_reason": None,
                                                "usage": {"input_tokens": reply.prompt_tokens, "output_tokens": 1}}}
    yield {"type": "ping"}
    for index, block in enumerate(_blocks(request, reply)):
        kind = block["type"]
        if kind == "thinking":
            yield {"type": "content_block_start", "index": index, "content_block": {**block, "thinking": "", "signature": ""}}
            deltas = [{"type": "thinking_delta", "thinking": word} for word in _words(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "text":
            yield {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
            deltas = [{"type": "text_delta", "text": word} for word in _words(block["text"])]
        else:
            yield {"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}}
            arguments = orjson.dumps(block["input"]).decode()
            middle = len(arguments) // 2
            pieces = ("", arguments[:middle], arguments[middle:]) if block["input"] else ("",)  # no input: "" alone
            deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in pieces]
        for delta in deltas:
            yield {"type": "content_block_delta", "index": index, "delta": delta}
        yield {"type": "content_block_stop", "index": index}
    yield {"type": "message_delta", "delta": {"stop_reason": start["stop_reason"], "stop_sequence": None},
           "usage": {"output_tokens": reply.completion_tokens}}
    yield {"type": "message_stop"}
