"""Third-party GenAI spans → journal events: OTel GenAI conventions, OpenInference, OpenLLMetry.

Contract: ``map_span(span) -> list[JournalEvent]`` for any span that is not this project's own.
Spans that carry no GenAI meaning map to nothing (except a trace's root, which frames the run).
The table of what is read lives in ``docs/conventions.md`` ("Third-party GenAI mappings").

* A model call (``gen_ai.operation.name`` ``chat``/``text_completion``/``generate_content``,
  OpenInference ``openinference.span.kind=LLM``, OpenLLMetry ``llm.request.type``) becomes messages.
  Its input holds the whole conversation so far, so only the input messages after the last
  assistant message are journaled (what is new in this call); the output is one assistant message
  started at the span's start and finished at its end.
* A tool call (``execute_tool``, OpenInference ``TOOL``, OpenLLMetry ``traceloop.span.kind=tool``)
  becomes ``tool_execution_started`` / ``tool_execution_finished``.
* A trace root becomes ``run_started`` / ``run_finished`` (one run is one trace).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from otel_session.journal import EventType, RunKind
from otel_session.normalize import JournalEvent, SpanData

__all__ = ["Message", "is_message_event", "is_model_call", "is_tool_call", "map_span"]

_MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion"})
_TOOL_OPERATIONS = frozenset({"execute_tool"})
_AGENT_OPERATIONS = frozenset({"invoke_agent", "create_agent"})
_ROLE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
_DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_INDEXED = re.compile(r"(\d+)\.(.+)")

# Record types as plain strings (an enum member's ``.value`` is a descriptor call per read).
_RUN_STARTED = EventType.RUN_STARTED.value
_RUN_FINISHED = EventType.RUN_FINISHED.value
_MESSAGE_STARTED = EventType.MESSAGE_STARTED.value
_MESSAGE_FINISHED = EventType.MESSAGE_FINISHED.value
_TOOL_EXECUTION_STARTED = EventType.TOOL_EXECUTION_STARTED.value
_TOOL_EXECUTION_FINISHED = EventType.TOOL_EXECUTION_FINISHED.value

# The correlation fields every record of one span shares: (turn_index, trace_id hex, span_id hex).
_SpanIds = tuple[Any, str, str]


@dataclass(slots=True)
class Message:
    """One message in a neutral shape: role, content blocks ``{index, kind, text}``, stop reason."""

    role: str
    content: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str | None = None

    def add(self, kind: str, text: Any) -> None:
        if text is None or text == "":
            return
        if not isinstance(text, str):
            text = orjson.dumps(text).decode()
        self.content.append({"index": len(self.content), "kind": kind, "text": text})


def _operation(attributes: Mapping[str, Any]) -> str | None:
    """``gen_ai.operation.name`` when it is text (a hostile producer may send any value type)."""
    value = attributes.get("gen_ai.operation.name")
    return value if isinstance(value, str) else None


def is_model_call(attributes: Mapping[str, Any]) -> bool:
    return _is_model_call(attributes, _operation(attributes))


def is_tool_call(attributes: Mapping[str, Any]) -> bool:
    return _is_tool_call(attributes, _operation(attributes))


def _is_model_call(attributes: Mapping[str, Any], operation: str | None) -> bool:
    return (
        operation in _MODEL_OPERATIONS
        or attributes.get("openinference.span.kind") == "LLM"
        or "llm.request.type" in attributes
    )


def _is_tool_call(attributes: Mapping[str, Any], operation: str | None) -> bool:
    return (
        operation in _TOOL_OPERATIONS
        or attributes.get("openinference.span.kind") == "TOOL"
        or attributes.get("traceloop.span.kind") == "tool"
    )


def is_message_event(name: str) -> bool:
    """Whether a span event (or a log event in a span's context) named ``name`` holds messages."""
    return name in _ROLE_EVENTS or name == "gen_ai.choice" or name == _DETAILS_EVENT


def _has_message_events(span: SpanData) -> bool:
    return any(is_message_event(event.name) for event in span.events)


def map_span(span: SpanData) -> list[JournalEvent]:
    attributes = span.attributes
    operation = _operation(attributes)
    if _is_tool_call(attributes, operation):
        add_body: Callable[[SpanData, _SpanIds, list[JournalEvent]], None] | None = _add_tool_events
    elif _is_model_call(attributes, operation) or (span.events and _has_message_events(span)):
        add_body = _add_message_events
    else:
        add_body = None
    root = span.parent_span_id is None
    if add_body is None and not root:
        return []
    turn_index = attributes.get("otel_session.turn.index")
    ids = (turn_index if isinstance(turn_index, int) else None, span.trace_id_hex, span.span_id_hex)
    events: list[JournalEvent] = []
    if root:
        events.append(_event(ids, _RUN_STARTED, span.start_time_ns, _run_started_payload(span)))
    if add_body is not None:
        add_body(span, ids, events)
    if root:
        status = "error" if span.status_code == "error" else "ok"
        events.append(_event(ids, _RUN_FINISHED, span.end_time_ns, {"status": status}))
    return events


# -- runs ------------------------------------------------------------------------------------


def _run_started_payload(span: SpanData) -> dict[str, Any]:
    attributes = span.attributes
    payload: dict[str, Any] = {"kind": attributes.get("otel_session.run.kind") or RunKind.LIVE.value}
    agent = attributes.get("gen_ai.agent.name") or attributes.get("traceloop.workflow.name") or attributes.get(
        "agent.name"
    )
    if agent is None and _operation(attributes) in _AGENT_OPERATIONS:
        agent = span.name.removeprefix("invoke_agent").strip() or None
    payload["agent"] = agent or span.service_name or span.name
    return payload


# -- tools -----------------------------------------------------------------------------------


def _add_tool_events(span: SpanData, ids: _SpanIds, events: list[JournalEvent]) -> None:
    attributes = span.attributes
    name = (
        attributes.get("gen_ai.tool.name")
        or attributes.get("tool.name")
        or attributes.get("traceloop.entity.name")
        or span.name.removeprefix("execute_tool").strip()
        or span.name
    )
    call_id = str(attributes.get("gen_ai.tool.call.id") or attributes.get("tool_call.id") or ids[2])
    arguments = _first(attributes, "gen_ai.tool.call.arguments", "input.value", "traceloop.entity.input")
    events.append(
        _event(
            ids,
            _TOOL_EXECUTION_STARTED,
            span.start_time_ns,
            {"name": str(name), "arguments": _json_value(arguments) if arguments is not None else {}},
            tool_call_id=call_id,
        )
    )
    if span.status_code == "error":
        error = span.status_message or attributes.get("error.type") or "error"
        finished_payload: dict[str, Any] = {"status": "error", "error": str(error)}
    else:
        result = _first(attributes, "gen_ai.tool.call.result", "output.value", "traceloop.entity.output")
        finished_payload = {"status": "ok", "result": _json_value(result)}
    events.append(_event(ids, _TOOL_EXECUTION_FINISHED, span.end_time_ns, finished_payload, tool_call_id=call_id))


# -- messages --------------------------------------------------------------------------------


def _add_message_events(span: SpanData, ids: _SpanIds, events: list[JournalEvent]) -> None:
    inputs, outputs = _messages_of(span)
    start_ns = span.start_time_ns
    for position, message in enumerate(_new_inputs(inputs)):
        _add_message(ids, events, start_ns, start_ns, message, f"{ids[2]}-in-{position}")
    for position, message in enumerate(outputs):
        _add_message(ids, events, start_ns, span.end_time_ns, message, f"{ids[2]}-out-{position}")


def _add_message(
    ids: _SpanIds, events: list[JournalEvent], start_ns: int, end_ns: int, message: Message, message_id: str
) -> None:
    turn_index, trace_id, span_id = ids
    started = {"role": message.role}
    events.append(JournalEvent(_MESSAGE_STARTED, start_ns, started, turn_index, message_id, None, trace_id, span_id))
    payload: dict[str, Any] = {"settled": True, "content": message.content}
    if message.stop_reason:
        payload["stop_reason"] = message.stop_reason
    events.append(JournalEvent(_MESSAGE_FINISHED, end_ns, payload, turn_index, message_id, None, trace_id, span_id))


def _new_inputs(inputs: list[Message]) -> list[Message]:
    """The input messages after the last assistant message: what this call added to the history."""
    for position in range(len(inputs) - 1, -1, -1):
        if inputs[position].role == "assistant":
            return inputs[position + 1 :]
    return inputs


def _messages_of(span: SpanData) -> tuple[list[Message], list[Message]]:
    """Input and output messages from whichever convention the span uses (first one found wins)."""
    attributes = span.attributes
    details: Mapping[str, Any] = {}
    for event in span.events:
        if event.name == _DETAILS_EVENT:
            details = event.attributes
            break
    for source in (attributes, details):
        if "gen_ai.input.messages" in source or "gen_ai.output.messages" in source:
            # The system instructions come first, so only a call without an earlier assistant
            # message journals them (what _new_inputs keeps).
            inputs, after_assistant = _new_structured_inputs(source.get("gen_ai.input.messages"))
            instructions = source.get("gen_ai.system_instructions")
            if instructions and not after_assistant:
                system = Message("system")
                for part in _json_list(instructions):
                    _add_part(system, part)
                inputs.insert(0, system)
            return inputs, _structured_messages(source.get("gen_ai.output.messages"))
    role_events = [event for event in span.events if event.name in _ROLE_EVENTS or event.name == "gen_ai.choice"]
    if role_events:
        return _event_messages(role_events)
    for event in span.events:  # gen_ai.content.prompt / gen_ai.content.completion (older spelling)
        if event.name == "gen_ai.content.prompt":
            inputs = _structured_messages(event.attributes.get("gen_ai.prompt"))
            completion = next((e for e in span.events if e.name == "gen_ai.content.completion"), None)
            outputs = _structured_messages(completion.attributes.get("gen_ai.completion")) if completion else []
            return inputs, outputs
    if any(key.startswith("llm.input_messages.") or key.startswith("llm.output_messages.") for key in attributes):
        return _openinference_messages(attributes, "llm.input_messages."), _openinference_messages(
            attributes, "llm.output_messages."
        )
    if any(key.startswith("gen_ai.prompt.") or key.startswith("gen_ai.completion.") for key in attributes):
        return _indexed_messages(attributes, "gen_ai.prompt.", "user"), _indexed_messages(
            attributes, "gen_ai.completion.", "assistant"
        )
    inputs = [Message("user")] if "input.value" in attributes else []
    outputs = [Message("assistant")] if "output.value" in attributes else []
    if inputs:
        inputs[0].add("text", attributes["input.value"])
    if outputs:
        outputs[0].add("text", attributes["output.value"])
    return inputs, outputs


def _structured_messages(value: Any) -> list[Message]:
    """``[{role, parts: [...]}]`` (current) or ``[{role, content, tool_calls}]`` (older/OpenAI)."""
    return _messages_of_items(_json_list(value))


def _new_structured_inputs(value: Any) -> tuple[list[Message], bool]:
    """The structured input messages after the last assistant one, and whether there was one.

    A model call's input repeats the whole conversation: only what follows the last assistant
    message is new (see ``_new_inputs``), so the history before it is not mapped at all.
    """
    items = _history_items(value)
    for position in range(len(items) - 1, -1, -1):
        if _structured_role(items[position]) == "assistant":
            return _messages_of_items(items[position + 1 :]), True
    return _messages_of_items(items), False


def _history_items(value: Any) -> list[Any]:
    """``_json_list(value)`` for a model call's input messages, reusing the previous call's parse.

    An agent's model calls resend the history they were given plus what came since, and a run's
    spans arrive together: when ``value`` is the last parsed (non-empty) array with elements
    appended, only the appended elements are parsed. Items are shared read-only (mapping never
    mutates them).
    """
    global _last_history
    if type(value) is not str or value[:1] != "[":
        return _json_list(value)
    previous, previous_items = _last_history  # one tuple read: safe across threads
    cut = len(previous) - 1  # ``previous`` ends with its array's "]"
    if previous_items and value[cut : cut + 1] == "," and value.startswith(previous[:cut]):
        try:
            appended = orjson.loads("[" + value[cut + 1 :])
        except orjson.JSONDecodeError:
            appended = None
        if isinstance(appended, list) and appended:
            items = previous_items + [_json_value(item) if isinstance(item, str) else item for item in appended]
            _last_history = (value, items)
            return items
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError:
        return _json_list(value)
    if not isinstance(parsed, list):
        return _json_list(value)
    items = [_json_value(item) if isinstance(item, str) else item for item in parsed]
    if value.endswith("]"):
        _last_history = (value, items)
    return items


def _structured_role(item: Any) -> str | None:
    """The role ``_messages_of_items`` gives ``item`` (None: not a message)."""
    if not isinstance(item, dict):
        return None
    inner = item.get("message")
    if isinstance(inner, dict):
        return str(inner.get("role") or "assistant")
    return str(item.get("role") or "assistant")


def _messages_of_items(items: list[Any]) -> list[Message]:
    messages = []
    for item in items:
        if not isinstance(item, dict):
            continue
        message = Message(str(item.get("role") or "assistant"), [], item.get("finish_reason"))
        inner = item.get("message")
        if isinstance(inner, dict):  # a gen_ai.choice body
            message.role = str(inner.get("role") or "assistant")
            item = inner
        parts = item.get("parts")
        if isinstance(parts, (list, tuple)):
            for part in parts:
                _add_part(message, part)
        else:
            _add_openai_message(message, item)
        messages.append(message)
    return messages


def _add_part(message: Message, part: Any) -> None:
    if isinstance(part, str):
        message.add("text", part)
        return
    if not isinstance(part, dict):
        return
    kind = part.get("type")
    if kind == "tool_call":
        message.add("tool_call", _tool_call_text(part.get("id"), part.get("name"), part.get("arguments")))
    elif kind == "tool_call_response":
        message.add("text", part.get("response", part.get("result")))
    elif kind in ("reasoning", "thinking"):
        message.add("thinking", part.get("content"))
    else:
        text = part.get("content", part.get("text"))
        if text.__class__ is str and text:  # the common case, as add() would take it, one call fewer
            content = message.content
            content.append({"index": len(content), "kind": "text", "text": text})
        else:
            message.add("text", text)


def _add_openai_message(message: Message, item: Mapping[str, Any]) -> None:
    content = item.get("content")
    if isinstance(content, (list, tuple)):
        for part in content:
            _add_part(message, part)
    else:
        message.add("text", content)
    for call in item.get("tool_calls") or ():
        if isinstance(call, dict):
            function = call.get("function") if isinstance(call.get("function"), dict) else call
            message.add("tool_call", _tool_call_text(call.get("id"), function.get("name"), function.get("arguments")))


def _event_messages(role_events: Iterable[Any]) -> tuple[list[Message], list[Message]]:
    inputs: list[Message] = []
    outputs: list[Message] = []
    for event in role_events:
        body = dict(event.attributes)
        for key in ("message", "body"):
            nested = _json_value(body.get(key))
            if isinstance(nested, dict):
                body = {**body, **nested}
        if event.name == "gen_ai.choice":
            message = Message(str(body.get("role") or "assistant"), stop_reason=body.get("finish_reason"))
            _add_openai_message(message, body)
            outputs.append(message)
        else:
            message = Message(_ROLE_EVENTS[event.name])
            _add_openai_message(message, {**body, "tool_calls": _json_value(body.get("tool_calls"))})
            inputs.append(message)
    return inputs, outputs


def _openinference_messages(attributes: Mapping[str, Any], prefix: str) -> list[Message]:
    messages = []
    for _, fields in sorted(_indexed(attributes, prefix).items()):
        message = Message(str(fields.get("message.role") or "assistant"))
        message.add("text", fields.get("message.content"))
        for _, part in sorted(_indexed(fields, "message.contents.").items()):
            message.add("text", part.get("message_content.text"))
        for _, call in sorted(_indexed(fields, "message.tool_calls.").items()):
            message.add(
                "tool_call",
                _tool_call_text(
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
            message.add("tool_call", _tool_call_text(call.get("id"), call.get("name"), call.get("arguments")))
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


def _tool_call_text(call_id: Any, name: Any, arguments: Any) -> str:
    value = {"id": call_id, "name": name, "arguments": _json_value(arguments)}
    return orjson.dumps({key: item for key, item in value.items() if item is not None}).decode()


def _json_value(value: Any) -> Any:
    """A JSON document in a string, decoded when it is an object or array; anything else as is."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def _json_list(value: Any) -> list[Any]:
    value = _json_value(value)
    if isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, str):
                return [_json_value(item) for item in value]
        return value if isinstance(value, list) else list(value)  # callers only read it
    if isinstance(value, dict):
        return [value]
    if isinstance(value, str) and value:
        return [value]
    return []


def _first(attributes: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if key in attributes:
            return attributes[key]
    return None


def _event(
    ids: _SpanIds,
    event_type: str,
    at_ns: int,
    payload: dict[str, Any],
    *,
    message_id: str | None = None,
    tool_call_id: str | None = None,
) -> JournalEvent:
    turn_index, trace_id, span_id = ids
    return JournalEvent(event_type, at_ns, payload, turn_index, message_id, tool_call_id, trace_id, span_id)


# The last model input parsed and its items (see _history_items).
_last_history: tuple[str, list[Any]] = ("", [])
