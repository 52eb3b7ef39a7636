"""Where a third-party model-call span keeps its messages, in each convention (``genai``'s half).

Contract::

    new, outputs = messages_of(span)      # list[Message] each; the first convention found wins
    new = new_inputs(inputs)              # what a call's input messages add to the conversation

A ``Message`` is the neutral shape the journal takes: a role, content blocks ``{index, kind,
text}`` and a stop reason. The conventions, in the order tried, are listed in
``docs/conventions.md`` ("Where the messages of a model call are read from").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from otel_session.normalize.genai_history import new_items
from otel_session.normalize.spans import json_list, json_value
from otel_session.normalize.view import SpanView

__all__ = [
    "DETAILS_EVENT", "ROLE_EVENTS", "Message", "add_openai_message", "converse_blocks", "converse_text", "json_list",
    "json_value", "messages_of", "new_inputs",
    "request_inputs", "tool_call_text", "value_messages",
]

ROLE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
# Roles frameworks name in their own words → the journal's: smolagents' memory (as OpenInference
# records it) holds the model's tool calls as ``tool-call`` and their results as ``tool-response``;
# AutoGen's (the same) sends tool results as ``function`` messages and its system prompt as OpenAI's
# ``developer`` message.
_ROLE_ALIASES = {"tool-call": "assistant", "tool-response": "tool", "function": "tool", "developer": "system"}
_INDEXED = re.compile(r"(\d+)\.(.+)")


@dataclass(slots=True)
class Message:
    """One message in a neutral shape: role, content blocks ``{index, kind, text}``, stop reason."""

    role: str
    content: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str | None = None

    def __post_init__(self) -> None:
        self.role = _ROLE_ALIASES.get(self.role, self.role)

    def add(self, kind: str, text: Any) -> None:
        if text is None or text == "":
            return
        if not isinstance(text, str):
            text = orjson.dumps(text).decode()
        self.content.append({"index": len(self.content), "kind": kind, "text": text})



def new_inputs(inputs: list[Message]) -> list[Message]:
    """The input messages after the last assistant message: what this call added to the history."""
    for position in range(len(inputs) - 1, -1, -1):
        if inputs[position].role == "assistant":
            return inputs[position + 1 :]
    return inputs


def messages_of(span: SpanView) -> tuple[list[Message], list[Message]]:
    """The input messages this call added to the conversation (``new_inputs``) and the output
    messages, from whichever convention the span uses (first one found wins).

    An output message without a finish reason of its own takes the span's: OpenInference's
    ``llm.finish_reason``, else the positional ``gen_ai.response.finish_reasons``.
    """
    inputs, outputs = _messages_of(span)
    if outputs:
        attributes = span.attributes
        reasons = attributes.get("llm.finish_reason") or attributes.get("gen_ai.response.finish_reasons")
        if isinstance(reasons, str):
            reasons = [reasons] * len(outputs)
        if isinstance(reasons, (list, tuple)):
            for message, reason in zip(outputs, reasons):
                if message.stop_reason is None and isinstance(reason, str) and reason:
                    message.stop_reason = reason
    return inputs, outputs


def _messages_of(span: SpanView) -> tuple[list[Message], list[Message]]:
    attributes = span.attributes
    details: Mapping[str, Any] = {}
    for event in span.events:  # one event per call, or (strands) one with the input, one with the output
        if event.name == DETAILS_EVENT:
            details = {**details, **event.attributes} if details else event.attributes
    for source in (attributes, details):
        if "gen_ai.input.messages" in source or "gen_ai.output.messages" in source:
            # Only the items after the last assistant message are mapped (none of them is one). The
            # system instructions come first, so only a call without an earlier assistant
            # message journals them (what new_inputs keeps).
            inputs, after_assistant = _new_structured_inputs(source.get("gen_ai.input.messages"))
            instructions = source.get("gen_ai.system_instructions")
            if instructions and not after_assistant:
                system = Message("system")
                for part in json_list(instructions):
                    _add_part(system, part)
                inputs.insert(0, system)
            return inputs, _structured_messages(source.get("gen_ai.output.messages"))
    role_events = [event for event in span.events if event.name in ROLE_EVENTS or event.name == "gen_ai.choice"]
    if role_events:
        inputs, outputs = _event_messages(role_events)
        return new_inputs(inputs), outputs
    for event in span.events:  # gen_ai.content.prompt / gen_ai.content.completion (older spelling)
        if event.name == "gen_ai.content.prompt":
            inputs = _structured_messages(event.attributes.get("gen_ai.prompt"))
            completion = next((e for e in span.events if e.name == "gen_ai.content.completion"), None)
            outputs = _structured_messages(completion.attributes.get("gen_ai.completion")) if completion else []
            return new_inputs(inputs), outputs
    if any(key.startswith("llm.input_messages.") or key.startswith("llm.output_messages.") for key in attributes):
        outputs = _openinference_messages(attributes, "llm.output_messages.")
        if not outputs and "output.value" in attributes:  # the Agents SDK's streamed Chat Completions
            outputs = value_messages(attributes["output.value"])
        return new_inputs(_openinference_messages(attributes, "llm.input_messages.")), outputs
    if any(key.startswith("gen_ai.prompt.") or key.startswith("gen_ai.completion.") for key in attributes):
        return new_inputs(_indexed_messages(attributes, "gen_ai.prompt.", "user")), _indexed_messages(
            attributes, "gen_ai.completion.", "assistant"
        )
    # A JSON object in ``input.value`` is a method's parameters (LlamaIndex's wrappers around the
    # model call: ``{"tools": [...], "chat_history": [...]}``, ``{"messages": [...]}`` of objects'
    # reprs), not something said; then a JSON object in ``output.value`` is its return value.
    called = "input.value" in attributes and isinstance(json_value(attributes["input.value"]), dict)
    inputs = [Message("user")] if "input.value" in attributes and not called else []
    if inputs:
        inputs[0].add("text", attributes["input.value"])
    return inputs, value_messages(attributes["output.value"], replies_only=called) if "output.value" in attributes else []


def request_inputs(body: Mapping[str, Any]) -> list[Message]:
    """The input messages of an OpenAI request body: Chat Completions ``messages``, or Responses
    ``instructions`` and ``input`` (a string, or items: messages, ``function_call``,
    ``function_call_output``), in the shapes the instrumentors' spans give them."""
    if isinstance(body.get("messages"), list):
        return _messages_of_items([_plain(item) for item in body["messages"]])
    messages = []
    if isinstance(body.get("instructions"), str) and body["instructions"]:
        messages.append(Message("system", [{"index": 0, "kind": "text", "text": body["instructions"]}]))
    items = body.get("input")
    for item in [{"role": "user", "content": items}] if isinstance(items, str) else items or ():
        item = _plain(item)
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "function_call":
            message = Message("assistant")
            message.add("tool_call", tool_call_text(item.get("call_id"), item.get("name"), item.get("arguments")))
        elif kind == "function_call_output":
            message = Message("tool")
            message.add("text", item.get("output"))
        elif "role" in item:
            message = Message(str(item["role"]))
            content = item.get("content")
            for part in content if isinstance(content, list) else [content]:
                message.add("text", part.get("text") if isinstance(part, dict) else part)
        else:
            continue
        messages.append(message)
    return messages


def _plain(item: Any) -> Any:
    """A request item as plain data (the client takes its own response models as input too)."""
    dump = getattr(item, "model_dump", None)
    return dump(exclude_none=True) if callable(dump) else item


def value_messages(value: Any, *, replies_only: bool = False) -> list[Message]:
    """The assistant messages in an OpenInference ``output.value``: a Responses API ``response``
    document (or a list of them: one message each), a Chat Completions ``chat.completion``, a list
    of chat messages, else the value itself as the text of one message (with ``replies_only``, a
    JSON object of another shape is no message: a method's return value)."""
    document = json_value(value)
    documents = document if isinstance(document, list) else [document]
    if documents and all(isinstance(item, dict) and isinstance(item.get("output"), list) for item in documents):
        return [_response_message(item["output"]) for item in documents]
    if isinstance(document, dict) and isinstance(document.get("choices"), list):
        return _messages_of_items([choice for choice in document["choices"] if isinstance(choice, dict)])
    if documents and all(isinstance(item, dict) and "role" in item for item in documents):
        return _messages_of_items(documents)
    if replies_only and isinstance(document, dict):
        return []
    message = Message("assistant")
    message.add("text", value)
    return [message]


def _response_message(output: list[Any]) -> Message:
    """One Responses API ``output`` list as one assistant message: ``message`` items' text,
    ``function_call`` items as tool calls (id: their ``call_id``), ``reasoning`` as thinking."""
    message = Message("assistant")
    for item in output:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                if isinstance(part, dict):
                    message.add("text", part.get("text", part.get("refusal")))
        elif kind == "function_call":
            message.add("tool_call", tool_call_text(item.get("call_id") or item.get("id"), item.get("name"),
                                                    item.get("arguments")))
        elif kind == "reasoning":
            for part in [*(item.get("summary") or ()), *(item.get("content") or ())]:
                if isinstance(part, dict):
                    message.add("thinking", part.get("text"))
    return message


def _structured_messages(value: Any) -> list[Message]:
    """``[{role, parts: [...]}]`` (current) or ``[{role, content, tool_calls}]`` (older/OpenAI)."""
    if value.__class__ is str and value[:1] == "[":  # the common case, as json_list takes it
        try:
            items = orjson.loads(value)
        except orjson.JSONDecodeError:
            return []  # json_list's [value]: a string, no message
        for item in items:
            if item.__class__ is str:
                return _messages_of_items(json_list(items))
        return _messages_of_items(items)
    return _messages_of_items(json_list(value))


def _new_structured_inputs(value: Any) -> tuple[list[Message], bool]:
    """The structured input messages after the last assistant one, and whether there was one.

    A model call's input repeats the whole conversation: only what follows the last assistant
    message is new (see ``new_inputs``), so the history before it is not mapped at all.
    """
    items, after_assistant = new_items(value)
    return _messages_of_items(items), after_assistant


def _messages_of_items(items: list[Any]) -> list[Message]:
    messages = []
    for item in items:
        if item.__class__ is not dict and not isinstance(item, dict):
            continue
        role = item.get("role")
        stop_reason = item.get("finish_reason")
        inner = item.get("message")
        if inner is not None and isinstance(inner, dict):  # a gen_ai.choice body
            role = inner.get("role")
            item = inner
        parts = item.get("parts")
        if role == "user" and parts and isinstance(parts, list) and any(_is_tool_response(part) for part in parts):
            # Tool results sent back in a user message (Converse, as strands records it; pydantic-ai's
            # next ask after a tool's return): they are the tool's, the rest is the user's.
            rest = [part for part in parts if not _is_tool_response(part)]
            if not rest:
                role = "tool"
            else:
                messages.extend(_messages_of_items([{"role": "tool", "parts": [p for p in parts if _is_tool_response(p)]}]))
                parts = rest
        message = Message(role if role.__class__ is str and role else str(role or "assistant"), [], stop_reason)
        if parts.__class__ is list or isinstance(parts, (list, tuple)):
            content = message.content
            for part in parts:
                if part.__class__ is dict and part.get("type") == "text":  # the common case, as _add_part takes it
                    text = part.get("content", part.get("text"))
                    if text.__class__ is str and text:
                        content.append({"index": len(content), "kind": "text", "text": text})
                        continue
                _add_part(message, part)
        else:
            add_openai_message(message, item)
        messages.append(message)
    return messages


def _is_tool_response(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "tool_call_response"


def _add_part(message: Message, part: Any) -> None:
    if isinstance(part, str):
        message.add("text", part)
        return
    if not isinstance(part, dict):
        return
    kind = part.get("type")
    if kind == "tool_call":
        message.add("tool_call", tool_call_text(part.get("id"), part.get("name"), part.get("arguments")))
    elif kind == "tool_call_response":
        response = part.get("response", part.get("result"))
        message.add("text", converse_text(response) if converse_blocks(response) else response)
    elif kind in ("reasoning", "thinking"):
        message.add("thinking", part.get("content"))
    elif kind is None and len(part) == 1 and part.keys() <= _CONVERSE_KEYS:
        _add_converse_block(message, part)
    else:
        message.add("text", part.get("content", part.get("text")))


# Bedrock Converse content blocks (``[{"text": …}]``, ``[{"toolUse": {toolUseId, name, input}}]``,
# ``[{"toolResult": {toolUseId, status, content: [blocks]}}]``): strands-agents writes its messages so.
_CONVERSE_KEYS = frozenset({"text", "toolUse", "toolResult", "reasoningContent", "image", "document", "json"})


def converse_blocks(value: Any) -> list[dict[str, Any]] | None:
    """``value`` (a JSON text or a list) as Converse content blocks, or None when it is not such a
    list: each item a map with no ``type`` whose one key is a Converse block's."""
    value = json_value(value)
    if not isinstance(value, list) or not value:
        return None
    for block in value:
        if not (isinstance(block, dict) and len(block) == 1 and block.keys() <= _CONVERSE_KEYS):
            return None
    return value


def converse_text(blocks: Any) -> str:
    """The text of Converse content blocks (a tool result's: text and JSON blocks), joined."""
    parts = []
    for block in converse_blocks(blocks) or ():
        if "text" in block:
            parts.append(str(block["text"]))
        elif "json" in block:
            parts.append(orjson.dumps(block["json"], default=str).decode())
    return "".join(parts)


def _add_converse_block(message: Message, block: dict[str, Any]) -> None:
    if "text" in block:
        message.add("text", block["text"])
    elif isinstance(use := block.get("toolUse"), dict):
        message.add("tool_call", tool_call_text(use.get("toolUseId"), use.get("name"), use.get("input")))
    elif isinstance(result := block.get("toolResult"), dict):
        message.add("text", converse_text(result.get("content")))
    elif isinstance(reasoning := block.get("reasoningContent"), dict):
        text = reasoning.get("reasoningText")
        message.add("thinking", text.get("text") if isinstance(text, dict) else text)


def add_openai_message(message: Message, item: Mapping[str, Any]) -> None:
    content = item.get("content")
    if content.__class__ is str and content[:2] == "[{":  # Converse blocks as JSON text (strands')
        content = converse_blocks(content) or content
    if isinstance(content, (list, tuple)):
        for part in content:
            _add_part(message, part)
    else:
        message.add("text", content)
    for call in item.get("tool_calls") or ():
        if isinstance(call, dict):
            function = call.get("function") if isinstance(call.get("function"), dict) else call
            message.add("tool_call", tool_call_text(call.get("id"), function.get("name"), function.get("arguments")))


def _event_messages(role_events: Iterable[Any]) -> tuple[list[Message], list[Message]]:
    inputs: list[Message] = []
    outputs: list[Message] = []
    for event in role_events:
        body = dict(event.attributes)
        for key in ("message", "body"):
            nested = json_value(body.get(key))
            if isinstance(nested, dict):
                body = {**body, **nested}
            elif key == "message" and converse_blocks(nested):  # strands' reply: its content blocks
                body = {**body, "content": nested}
        if event.name == "gen_ai.choice":
            message = Message(str(body.get("role") or "assistant"), stop_reason=body.get("finish_reason"))
            add_openai_message(message, body)
            outputs.append(message)
        else:
            message = Message(ROLE_EVENTS[event.name])
            add_openai_message(message, {**body, "tool_calls": json_value(body.get("tool_calls"))})
            inputs.append(message)
    return inputs, outputs


def _openinference_messages(attributes: Mapping[str, Any], prefix: str) -> list[Message]:
    messages = []
    for _, fields in sorted(_indexed(attributes, prefix).items()):
        message = Message(str(fields.get("message.role") or "assistant"))
        parts = _indexed(fields, "message.contents.")
        if parts:  # the same text as ``message.content`` when a producer writes both
            for _, part in sorted(parts.items()):
                message.add("text", part.get("message_content.text"))
        else:
            message.add("text", fields.get("message.content"))
        for key in sorted(key for key in fields if key.startswith("function.")):  # AutoGen's tool results:
            result = json_value(fields[key])  # {"name", "content", "call_id", "is_error"} each
            message.add("text", result.get("content") if isinstance(result, dict) else result)
        for _, call in sorted(_indexed(fields, "message.tool_calls.").items()):
            message.add(
                "tool_call",
                tool_call_text(
                    call.get("tool_call.id"), call.get("tool_call.function.name"), call.get("tool_call.function.arguments")
                ),
            )
        messages.append(message)
    return messages


def _indexed_messages(attributes: Mapping[str, Any], prefix: str, default_role: str) -> list[Message]:
    messages = []
    for _, fields in sorted(_indexed(attributes, prefix).items()):
        message = Message(str(fields.get("role") or default_role), stop_reason=fields.get("finish_reason"))
        message.add("text", fields.get("content"))
        for _, call in sorted(_indexed(fields, "tool_calls.").items()):
            message.add("tool_call", tool_call_text(call.get("id"), call.get("name"), call.get("arguments")))
        messages.append(message)
    return messages


def _indexed(attributes: Mapping[str, Any], prefix: str) -> dict[int, dict[str, Any]]:
    """``{prefix}{i}.{rest}`` keys grouped by ``i``: ``{i: {rest: value}}``."""
    groups: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if key.startswith(prefix):
            match = _INDEXED.fullmatch(key[len(prefix) :])
            if match:
                groups.setdefault(int(match.group(1)), {})[match.group(2)] = value
    return groups


# -- helpers ---------------------------------------------------------------------------------


def tool_call_text(call_id: Any, name: Any, arguments: Any) -> str:
    """The text of a ``tool_call`` content block: ``{"id", "name", "arguments"}`` as JSON (what
    instrumented clients and the framework instrumentors write alike)."""
    value = {"id": call_id, "name": name, "arguments": json_value(arguments)}
    return orjson.dumps({key: item for key, item in value.items() if item is not None}, default=str).decode()
