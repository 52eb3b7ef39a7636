"""Third-party GenAI spans → journal events: OTel GenAI conventions, OpenInference, OpenLLMetry.

Contract: ``map_span(span) -> list[JournalEvent]`` for any span that is not this project's own.
Spans that carry no GenAI meaning map to nothing (except a trace's root, which frames the run).
The table of what is read lives in ``docs/conventions.md`` ("Third-party GenAI mappings").

* A model call (``gen_ai.operation.name`` ``chat``/``text_completion``/``generate_content``,
  OpenInference ``openinference.span.kind=LLM``, OpenLLMetry ``llm.request.type``) becomes messages.
  Its input holds the whole conversation so far, so only the input messages after the last
  assistant message are journaled (what is new in this call; of those, the ones the run holds
  already are left out after redaction, ``genai_repeats``); the output is one assistant message
  started at the span's start and finished at its end, with the ``otel_session.delta`` events the
  ``otel_session`` instrumentor put on the span as its deltas (``genai_deltas``).
* A tool call (``execute_tool``, OpenInference ``TOOL``, OpenLLMetry ``traceloop.span.kind=tool``)
  becomes ``tool_execution_started`` / ``tool_execution_finished``.
* A trace root becomes ``run_started`` / ``run_finished`` (one run is one trace).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from otel_session.core.journal import EventType, RunKind
from otel_session.normalize.spans import JournalEvent
from otel_session.normalize.view import SpanView
from otel_session.normalize.labels import run_labels, span_scores
from otel_session.normalize.genai_deltas import deltas_of, dropped_deltas
from otel_session.normalize.genai_messages import (
    DETAILS_EVENT,
    ROLE_EVENTS,
    Message,
    json_value,
    messages_of,
)

__all__ = [
    "Message", "RunAgent", "is_message_event", "is_model_call", "is_tool_call", "map_frame", "map_span", "run_agent",
]

_MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion"})
_TOOL_OPERATIONS = frozenset({"execute_tool"})
_AGENT_OPERATIONS = frozenset({"invoke_agent", "create_agent"})

# Record types as plain strings (an enum member's ``.value`` is a descriptor call per read).
_RUN_STARTED = EventType.RUN_STARTED.value
_RUN_FINISHED = EventType.RUN_FINISHED.value
_MESSAGE_STARTED = EventType.MESSAGE_STARTED.value
_MESSAGE_FINISHED = EventType.MESSAGE_FINISHED.value
_TOOL_EXECUTION_STARTED = EventType.TOOL_EXECUTION_STARTED.value
_TOOL_EXECUTION_FINISHED = EventType.TOOL_EXECUTION_FINISHED.value
_ASSISTANT_DELTA = EventType.ASSISTANT_DELTA.value
_UPSTREAM_DROP = EventType.UPSTREAM_DROP.value

# The correlation fields every record of one span shares: (turn_index, trace_id hex, span_id hex).
_SpanIds = tuple[Any, str, str]


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
    return name in ROLE_EVENTS or name == "gen_ai.choice" or name == DETAILS_EVENT


def _has_message_events(span: SpanView) -> bool:
    return any(is_message_event(event.name) for event in span.events)


def map_span(span: SpanView) -> list[JournalEvent]:
    attributes = span.attributes
    operation = _operation(attributes)
    if _is_tool_call(attributes, operation):
        add_body: Callable[[SpanView, _SpanIds, list[JournalEvent]], None] | None = _add_tool_events
    elif _is_model_call(attributes, operation) or (span.events and _has_message_events(span)):
        add_body = _add_message_events
    else:
        add_body = None
    return _mapped(span, add_body)


def map_frame(span: SpanView) -> list[JournalEvent]:
    """Only the run a root span frames (nothing for any other span): for a framework's agent and
    loop spans whose message events repeat those of the model calls under them."""
    return _mapped(span, None)


def _mapped(span: SpanView, add_body: Callable[[SpanView, _SpanIds, list[JournalEvent]], None] | None) -> list[JournalEvent]:
    attributes = span.attributes
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
        events.append(_event(ids, _RUN_FINISHED, span.end_time_ns, {"status": status, **span_scores(attributes)}))
    return events


# -- runs ------------------------------------------------------------------------------------


def _run_started_payload(span: SpanView) -> dict[str, Any]:
    attributes = span.attributes
    payload: dict[str, Any] = {"kind": attributes.get("otel_session.run.kind") or RunKind.LIVE.value}
    payload["agent"] = _agent_of(span) or _agent_span_name(span) or span.service_name or span.name
    payload.update(run_labels(attributes, span.resource_attributes))  # tags, metadata
    return payload


def run_agent(spans: Iterable[SpanView]) -> str | None:
    """The agent a run (a trace) is labelled with, from the spans of it at hand (``RunAgent``'s rule)."""
    return RunAgent().add(spans)


class RunAgent:
    """The agent of a run as its spans arrive, in one batch or many: the root's agent attributes,
    else the first ``agent.name`` / ``gen_ai.agent.name`` among the spans (by start time, the
    earlier batch first at a tie; an OpenInference or Agents SDK run names its agent on a child
    span), else the name of a root agent span (``invoke_agent {name}``, an OpenInference ``AGENT``
    span). ``agent`` is None while no span names one; ``settled`` once the root named it (no later
    span changes it)."""

    __slots__ = ("_first", "_root", "_root_attribute", "_root_name")

    def __init__(self) -> None:
        self._root: int | None = None
        """The earliest root's start time (a trace has one root; a hostile one may send more)."""
        self._root_attribute: str | None = None
        self._root_name: str | None = None
        self._first: tuple[int, str] | None = None

    @property
    def agent(self) -> str | None:
        return self._root_attribute or (self._first[1] if self._first is not None else None) or self._root_name

    @property
    def settled(self) -> bool:
        return self._root_attribute is not None

    def add(self, spans: Iterable[SpanView]) -> str | None:
        """Take ``spans`` into account (none once settled); the run's agent so far."""
        if self._root_attribute is not None:
            return self._root_attribute
        spans = list(spans)
        for span in spans:  # the root first: when it names the agent, no other span is read
            if span.parent_span_id is None and (self._root is None or span.start_time_ns < self._root):
                self._root = span.start_time_ns
                self._root_attribute, self._root_name = _agent_of(span), _agent_span_name(span)
        if self._root_attribute is not None:
            return self._root_attribute
        for span in spans:
            agent = _agent_of(span)
            if agent and (self._first is None or span.start_time_ns < self._first[0]):
                self._first = (span.start_time_ns, agent)
        return self.agent


def _agent_of(span: SpanView) -> str | None:
    attributes = span.attributes
    for key in ("gen_ai.agent.name", "traceloop.workflow.name", "agent.name"):
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _agent_span_name(span: SpanView) -> str | None:
    """A root span's name when the span is an agent's: ``invoke_agent {name}``, OpenInference ``AGENT``."""
    if _operation(span.attributes) in _AGENT_OPERATIONS:
        return span.name.removeprefix("invoke_agent").strip() or None
    if span.attributes.get("openinference.span.kind") == "AGENT":
        return span.name or None
    return None


# -- tools -----------------------------------------------------------------------------------


def _add_tool_events(span: SpanView, ids: _SpanIds, events: list[JournalEvent]) -> None:
    attributes = span.attributes
    name = (
        attributes.get("gen_ai.tool.name")
        or attributes.get("tool.name")
        or attributes.get("traceloop.entity.name")
        or span.name.removeprefix("execute_tool").strip()
        or span.name
    )
    call_id = str(attributes.get("gen_ai.tool.call.id") or attributes.get("tool_call.id") or ids[2])
    turn_index, trace_id, span_id = ids
    started = {"name": str(name), "arguments": _tool_arguments(attributes)}
    events.append(JournalEvent(_TOOL_EXECUTION_STARTED, span.start_time_ns, started, turn_index, None, call_id, trace_id, span_id))
    if span.status_code == "error":
        error = span.status_message or attributes.get("error.type") or "error"
        finished_payload: dict[str, Any] = {"status": "error", "error": str(error)}
    elif "gen_ai.tool.call.result" in attributes or "output.value" in attributes:
        result = _first(attributes, "gen_ai.tool.call.result", "output.value")
        finished_payload = {"status": "ok", "result": json_value(result)}
    else:
        finished_payload = {"status": "ok", "result": _traceloop_value(attributes.get("traceloop.entity.output"))}
    events.append(
        JournalEvent(_TOOL_EXECUTION_FINISHED, span.end_time_ns, finished_payload, turn_index, None, call_id, trace_id, span_id)
    )


def _tool_arguments(attributes: Mapping[str, Any]) -> Any:
    """The tool's arguments as an object (or array): JSON documents decoded, a Python call's
    ``{"args": [...], "kwargs": {...}}`` unwrapped (``_call_arguments``), a bare value (LangChain's
    single input) as ``{"input": value}``."""
    if "gen_ai.tool.call.arguments" in attributes or "input.value" in attributes:
        value = _call_arguments(json_value(_first(attributes, "gen_ai.tool.call.arguments", "input.value")))
    elif "traceloop.entity.input" in attributes:
        value = _call_arguments(_traceloop_value(attributes["traceloop.entity.input"]))
    else:
        return {}
    if value is None:
        return {}
    return value if isinstance(value, (dict, list)) else {"input": value}


# What instrumentors that record a Python call's parameters wrap its arguments in: Traceloop's
# ``{"args", "kwargs"}``, OpenInference's for smolagents (``sanitize_inputs_outputs`` beside them)
# and LlamaIndex (``{"kwargs": {...}}``).
_CALL_WRAPPER_KEYS = frozenset({"args", "kwargs", "sanitize_inputs_outputs"})


def _call_arguments(value: Any) -> Any:
    """A wrapped call's arguments: the kwargs, or the args when there are no kwargs (both: as is)."""
    if isinstance(value, dict) and value and value.keys() <= _CALL_WRAPPER_KEYS and value.keys() & {"args", "kwargs"}:
        args, kwargs = value.get("args") or [], value.get("kwargs") or {}
        return kwargs if not args else args if not kwargs else value
    return value


def _traceloop_value(value: Any) -> Any:
    """A Traceloop entity input or output: always JSON text (a string result too), decoded."""
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


# -- messages --------------------------------------------------------------------------------


def _add_message_events(span: SpanView, ids: _SpanIds, events: list[JournalEvent]) -> None:
    inputs, outputs = messages_of(span)
    start_ns = span.start_time_ns
    for position, message in enumerate(inputs):
        _add_message(ids, events, start_ns, start_ns, message, f"{ids[2]}-in-{position}")
    deltas = deltas_of(span) if span.events else {}
    call = _model_call_facts(span.attributes) if outputs or deltas else None
    for position, message in enumerate(outputs):
        facts = call if message.role == "assistant" else None
        if facts and position:  # a call's usage counts once: on its first output message
            facts = {key: value for key, value in facts.items() if key != "usage"}
        message_id = f"{ids[2]}-out-{position}"
        _add_message(ids, events, start_ns, span.end_time_ns, message, message_id, facts, deltas.get(position))
    for position in sorted(deltas.keys() - range(len(outputs))):
        _add_cut_off_reply(span, ids, events, position, deltas[position], call if position == 0 else None)
    if deltas and (dropped := dropped_deltas(span)) is not None:
        events.append(_event(ids, _UPSTREAM_DROP, span.end_time_ns, dropped))


def _add_message(
    ids: _SpanIds,
    events: list[JournalEvent],
    start_ns: int,
    end_ns: int,
    message: Message,
    message_id: str,
    facts: dict[str, Any] | None = None,
    deltas: list[tuple[int, dict[str, Any]]] | None = None,
) -> None:
    turn_index, trace_id, span_id = ids
    started = {"role": message.role}
    events.append(JournalEvent(_MESSAGE_STARTED, start_ns, started, turn_index, message_id, None, trace_id, span_id))
    for at_ns, delta in deltas or ():
        events.append(JournalEvent(_ASSISTANT_DELTA, at_ns, delta, turn_index, message_id, None, trace_id, span_id))
    payload: dict[str, Any] = {"settled": True, "content": message.content}
    if message.stop_reason:
        payload["stop_reason"] = message.stop_reason
    if facts:
        payload.update(facts)
    events.append(JournalEvent(_MESSAGE_FINISHED, end_ns, payload, turn_index, message_id, None, trace_id, span_id))


def _add_cut_off_reply(span: SpanView, ids: _SpanIds, events: list[JournalEvent], position: int,
                       deltas: list[tuple[int, dict[str, Any]]], facts: dict[str, Any] | None) -> None:
    """A reply whose deltas the span holds but whose final message it never got (the stream was
    aborted, or failed, before the instrumentation recorded the output): its deltas, then an
    unsettled finish whose content is the deltas joined, so the partial reply stays visible."""
    blocks: dict[int, dict[str, Any]] = {}
    for _, delta in deltas:
        block = blocks.setdefault(delta["index"], {"index": delta["index"], "kind": delta["kind"], "text": ""})
        block["text"] += delta["delta"]
    turn_index, trace_id, span_id = ids
    message_id = f"{span_id}-out-{position}"
    events.append(JournalEvent(_MESSAGE_STARTED, span.start_time_ns, {"role": "assistant"}, turn_index, message_id, None,
                               trace_id, span_id))
    for at_ns, delta in deltas:
        events.append(JournalEvent(_ASSISTANT_DELTA, at_ns, delta, turn_index, message_id, None, trace_id, span_id))
    payload: dict[str, Any] = {"settled": False, "content": [blocks[index] for index in sorted(blocks)],
                               "stop_reason": "incomplete", **(facts or {})}
    events.append(JournalEvent(_MESSAGE_FINISHED, span.end_time_ns, payload, turn_index, message_id, None, trace_id, span_id))


# Where a model call names its model and counts its tokens, first match wins (docs/conventions.md).
_MODEL_KEYS = ("gen_ai.response.model", "llm.response.model", "gen_ai.request.model", "llm.request.model", "llm.model_name")
_USAGE_KEYS = (
    ("input_tokens", ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt",
                      "llm.usage.prompt_tokens")),
    ("output_tokens", ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion",
                       "llm.usage.completion_tokens")),
    # Of the input tokens, those read from the provider's prompt cache (priced lower: replay/cost.py).
    ("cached_input_tokens", ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens",
                             "llm.token_count.prompt_details.cache_read")),
)


def _model_call_facts(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """``{"model": str, "usage": {"input_tokens": int, "output_tokens": int}}``, each key only
    when the span says it (the response model before the requested one)."""
    get = attributes.get
    facts: dict[str, Any] = {}
    # The first truthy value is the first text, unless a value of another type comes first (then
    # the key-by-key rule): this runs for every model call.
    model = get(_MODEL_KEYS[0]) or get(_MODEL_KEYS[1]) or get(_MODEL_KEYS[2]) or get(_MODEL_KEYS[3]) or get(_MODEL_KEYS[4])
    if model.__class__ is not str and model:
        model = _first_text(attributes, _MODEL_KEYS)
    if model:
        facts["model"] = model
    usage = {}
    for name, keys in _USAGE_KEYS:
        value = get(keys[0])
        if value.__class__ is not int or value < 0:
            value = _first_count(attributes, keys)
        if value is not None:
            usage[name] = value
    if usage:
        facts["usage"] = usage
    return facts


def _first_text(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _first_count(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = attributes.get(key)
        if value.__class__ is int and value >= 0:
            return value
    return None


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

