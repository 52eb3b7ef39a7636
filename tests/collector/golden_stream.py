"""A fixed, realistic stream of finished spans and GenAI log records (ids, times, values all fixed).

Our own conventions, OTel GenAI (new and old spellings), OpenInference, Traceloop, log events
joined to their spans (early and late), Pipecat and LiveKit voice spans, a sessionless trace,
deep and oversize values, upstream drops, hostile ids and personal data in ids and values. Built
as SDK ``ReadableSpan``s and ``LogRecord``s, so the official exporters encode it for every path.
"""

from __future__ import annotations

import json
from typing import Any

from opentelemetry._logs import LogRecord
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util import BoundedList
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util.types import Attributes

T0 = 1_780_000_000_000_000_000
MS = 1_000_000
EMAIL = "canary.jane.doe@example.com"
CARD = "4111 1111 1111 1111"

# Hostile but valid ids: all bits set, a single bit, a pattern shared by trace and span ids.
TRACE_OWN = 0x0D201C7E74D9050A15D5DED1873F6FE8
TRACE_GENAI = (1 << 128) - 1
TRACE_OPENINFERENCE = 1
TRACE_TRACELOOP = 0x00000000000000010000000000000001
TRACE_LOGS = 0xABCDEF0123456789ABCDEF0123456789
TRACE_PIPECAT = 0x5E5510A5E5510A5E5510A5E5510A5E55
TRACE_LIVEKIT = 0x11111111111111112222222222222222
TRACE_SESSIONLESS = 0x7F000000000000000000000000000001

_RESOURCE = Resource({"service.name": "golden-agent", "deployment.environment": "test"})
_JSON_DEPTH = 200  # past journal.MAX_DEPTH: cut with a marker
_STRUCTURED_DEPTH = 20  # an OTLP kvlist/array value (protobuf parses at most 100 levels)


def _deep(depth: int) -> Any:
    value: Any = "bottom"
    for level in range(depth):
        value = {"level": level, "next": value} if level % 2 else [value]
    return value


def _text(parts: list[tuple[str, str]]) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]} for role, text in parts])


class _Spans:
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def add(
        self, trace_id: int, span_id: int, parent: int | None, name: str, start_ms: int, end_ms: int,
        attributes: Attributes, *, scope: str = "golden", events: list[tuple[str, int, dict]] = (),
        status: Status | None = None, kind: SpanKind = SpanKind.INTERNAL, max_events: int | None = None,
        resource: Resource = _RESOURCE,
    ) -> None:
        made = [Event(name_, attributes_, T0 + at_ms * MS) for name_, at_ms, attributes_ in events]
        if max_events is not None:
            bounded = BoundedList(max_events)
            bounded.extend(made)
            made = bounded
        self.spans.append(ReadableSpan(
            name=name,
            context=SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(1)),
            parent=SpanContext(trace_id, parent, is_remote=False) if parent else None,
            resource=resource,
            attributes=attributes,
            events=made,
            kind=kind,
            instrumentation_scope=InstrumentationScope(scope),
            status=status or Status(StatusCode.UNSET),
            start_time=T0 + start_ms * MS,
            end_time=T0 + end_ms * MS,
        ))


def spans() -> list[ReadableSpan]:
    """Every span of the stream, in the order an SDK would export them (children first)."""
    s = _Spans()
    _own(s)
    _genai(s)
    _openinference(s)
    _traceloop(s)
    _log_joined(s)
    _pipecat(s)
    _livekit(s)
    _sessionless(s)
    return s.spans


def _own(s: _Spans) -> None:
    own = {"session.id": "call-42", "gen_ai.conversation.id": "call-42",
           "otel_session.run.id": "run-0d201c7e-74d9-050a-15d5-ded1873f6fe8"}
    t = TRACE_OWN
    s.add(t, 0x0A, 0x04, "message user", 10, 11, {
        "otel_session.turn.index": 0, "otel_session.message.role": "user", **own,
        "otel_session.message.id": "msg-000000000000000a", "otel_session.message.settled": True,
        "otel_session.message.content": json.dumps([{"index": 0, "kind": "text", "text": f"table for 2, {EMAIL}"}]),
        "otel_session.message.delta_count": 0,
    }, scope="otel_session")
    s.add(t, 0x0B, 0x04, "execute_tool check_availability", 12, 20, {
        "gen_ai.operation.name": "execute_tool", "otel_session.turn.index": 0,
        "gen_ai.tool.name": "check_availability", "gen_ai.tool.call.arguments": json.dumps({"card": CARD}),
        **own, "gen_ai.tool.call.id": "c1", "otel_session.tool.status": "ok",
        "gen_ai.tool.call.result": json.dumps({"free": True, "deep": _deep(_JSON_DEPTH)}),
    }, scope="otel_session", events=[("otel_session.tool_update", 15, {"otel_session.tool.update.detail": "half"})])
    s.add(t, 0x0C, 0x04, "message assistant", 21, 30, {
        "otel_session.turn.index": 0, "otel_session.message.role": "assistant", **own,
        "otel_session.message.id": "msg-000000000000000c", "otel_session.message.settled": True,
        "otel_session.message.content": json.dumps([{"index": 0, "kind": "text", "text": "ab"}]),
        "otel_session.message.delta_count": 3,
    }, scope="otel_session", max_events=2, events=[
        ("otel_session.delta", 22 + n, {"otel_session.delta.index": 0, "otel_session.delta.kind": "text",
                                        "otel_session.delta.text": text}) for n, text in enumerate("abc")
    ])
    s.add(t, 0x04, 0x01, "turn 0", 9, 31, {
        "otel_session.turn.index": 0, "otel_session.state.previous": "ask_date",
        "otel_session.required_slots": ("date", "party_size"), **own, "otel_session.state": "confirm",
        "otel_session.required_slots.after": ("date", "party_size"), "otel_session.missing_required_slots": (),
    }, scope="otel_session", events=[
        ("otel_session.slot_write", 12, {"otel_session.slot.name": "party_size", "otel_session.slot.value": "2",
                                         "otel_session.slot.previous": "null", "otel_session.slot.source": "user"}),
        ("otel_session.slot_write", 12, {"otel_session.slot.name": "email",
                                         "otel_session.slot.value": json.dumps(EMAIL),
                                         "otel_session.slot.previous": "null", "otel_session.slot.source": "user"}),
        ("otel_session.guard", 13, {"otel_session.guard.name": "has_date", "otel_session.guard.passed": True,
                                    "otel_session.guard.state": "ask_date"}),
        ("otel_session.transition", 30, {"otel_session.transition.from": "ask_date",
                                         "otel_session.transition.to": "confirm",
                                         "otel_session.transition.reason": "slots filled",
                                         "otel_session.transition.candidates": json.dumps([{"to": "confirm"}])}),
    ])
    s.add(t, 0x01, None, "invoke_agent booking", 0, 40, {
        "gen_ai.operation.name": "invoke_agent", "otel_session.run.kind": "live", "gen_ai.agent.name": "booking",
        **own, "otel_session.run.status": "ok",
    }, scope="otel_session", kind=SpanKind.SERVER)


def _genai(s: _Spans) -> None:
    t = TRACE_GENAI
    s.add(t, 0xFFFFFFFFFFFFFFFE, 0xFFFFFFFFFFFFFFFF, "chat gpt-4o", 5, 25, {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o", "gen_ai.response.model": "gpt-4o-2024",
        "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 7,
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
        "gen_ai.input.messages": _text([("user", f"hi, mail {EMAIL}"), ("assistant", "hello"),
                                        ("user", "card " + CARD)]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "finish_reason": "tool_call", "parts": [
            {"type": "text", "content": "checking"},
            {"type": "tool_call", "id": "call_9", "name": "lookup", "arguments": {"q": EMAIL}},
        ]}]),
        "gen_ai.response.finish_reasons": ("tool_call",),
    }, scope="opentelemetry.instrumentation.openai_v2", kind=SpanKind.CLIENT, events=[
        ("otel_session.delta", 10 + n, {"otel_session.delta.index": 0, "otel_session.delta.kind": "text",
                                        "otel_session.delta.text": part}) for n, part in enumerate(["chec", "king"])
    ])
    s.add(t, 0xFFFFFFFFFFFFFFFD, 0xFFFFFFFFFFFFFFFF, "execute_tool lookup", 26, 30, {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup", "gen_ai.tool.call.id": "call_9",
        "gen_ai.tool.call.arguments": json.dumps({"q": EMAIL, "deep": _deep(_JSON_DEPTH)}),
        "gen_ai.tool.call.result": "x" * 70_000,
    }, scope="opentelemetry.instrumentation.openai_v2")
    s.add(t, 0xFFFFFFFFFFFFFFFC, 0xFFFFFFFFFFFFFFFF, "execute_tool refund", 31, 33, {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund", "error.type": "TimeoutError",
        "deep.structured": _deep(_STRUCTURED_DEPTH),  # a kvlist/array value nested past the journal's depth
    }, scope="opentelemetry.instrumentation.openai_v2", status=Status(StatusCode.ERROR, f"timed out for {EMAIL}"))
    # old spellings: the prompt and completion as span events
    s.add(t, 0xFFFFFFFFFFFFFFFB, 0xFFFFFFFFFFFFFFFF, "chat gpt-3.5", 34, 38, {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-3.5", "gen_ai.usage.prompt_tokens": 3,
    }, scope="opentelemetry.instrumentation.openai", events=[
        ("gen_ai.content.prompt", 34, {"gen_ai.prompt": json.dumps([{"role": "user", "content": "old style"}])}),
        ("gen_ai.content.completion", 38, {"gen_ai.completion": json.dumps([{"role": "assistant", "content": "ok"}])}),
    ])
    s.add(t, 0xFFFFFFFFFFFFFFFF, None, "invoke_agent support", 0, 40, {
        "gen_ai.operation.name": "invoke_agent", "session.id": EMAIL, "gen_ai.agent.name": "support",
    }, scope="opentelemetry.instrumentation.openai_agents", kind=SpanKind.SERVER)


def _openinference(s: _Spans) -> None:
    t = TRACE_OPENINFERENCE
    s.add(t, 2, 1, "ChatCompletion", 2, 8, {
        "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini",
        "llm.input_messages.0.message.role": "system", "llm.input_messages.0.message.content": "You help.",
        "llm.input_messages.1.message.role": "user", "llm.input_messages.1.message.content": f"I am {EMAIL}",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "oi_1",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "search",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"q": "tables"}',
        "llm.token_count.prompt": 20, "llm.token_count.completion": 4,
    }, scope="openinference.instrumentation.openai")
    s.add(t, 3, 1, "search", 9, 12, {
        "openinference.span.kind": "TOOL", "tool.name": "search", "input.value": '{"q": "tables"}',
        "output.value": "two tables free",
    }, scope="openinference.instrumentation.openai")
    s.add(t, 1, None, "Agent", 0, 14, {
        "openinference.span.kind": "AGENT", "session.id": "oi-session", "agent.name": "finder",
        "input.value": "find a table", "output.value": "done",
    }, scope="openinference.instrumentation.openai_agents")


def _traceloop(s: _Spans) -> None:
    t = TRACE_TRACELOOP
    s.add(t, 0x10, 0x0F, "openai.chat", 3, 9, {
        "llm.request.type": "chat", "gen_ai.request.model": "gpt-4o",
        "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": f"call me at {CARD}",
        "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "Sure.",
        "gen_ai.completion.0.finish_reason": "stop", "llm.usage.prompt_tokens": 9, "llm.usage.completion_tokens": 2,
        "traceloop.association.properties.session_id": "tl-session",
    }, scope="opentelemetry.instrumentation.openai")
    s.add(t, 0x11, 0x0F, "get_weather.tool", 10, 12, {
        "traceloop.span.kind": "tool", "traceloop.entity.name": "get_weather",
        "traceloop.entity.input": json.dumps({"args": [], "kwargs": {"city": "Paris"}}),
        "traceloop.entity.output": json.dumps("sunny"),
    }, scope="traceloop.tracer")
    s.add(t, 0x0F, None, "booking.workflow", 0, 15, {
        "traceloop.span.kind": "workflow", "traceloop.workflow.name": "booking",
        "traceloop.association.properties.session_id": "tl-session",
    }, scope="traceloop.tracer")


def _log_joined(s: _Spans) -> None:
    t = TRACE_LOGS
    chat = {"gen_ai.operation.name": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o-mini"}
    s.add(t, 0x21, 0x20, "chat gpt-4o-mini", 2, 6, chat, scope="opentelemetry.instrumentation.openai_v2")
    s.add(t, 0x22, 0x20, "chat gpt-4o-mini", 7, 12, chat, scope="opentelemetry.instrumentation.openai_v2")
    s.add(t, 0x20, None, "invoke_agent booking", 0, 14, {"session.id": "log-events", "gen_ai.agent.name": "b"},
          scope="agent")


def early_log_records() -> list[tuple[int, int, int, str, Any]]:
    """(trace id, span id, at ms, event name, body) of log events sent before their spans."""
    return [
        (TRACE_LOGS, 0x21, 3, "gen_ai.system.message", {"content": "You book tables."}),
        (TRACE_LOGS, 0x21, 3, "gen_ai.user.message", {"content": f"two people, I am {EMAIL}"}),
        (TRACE_LOGS, 0x21, 5, "gen_ai.choice", {"index": 0, "finish_reason": "stop",
                                                "message": {"role": "assistant", "content": "Which day?"}}),
        (TRACE_LOGS, 0x21, 5, "app.log.line", "not a GenAI event"),
    ]


def late_log_records() -> list[tuple[int, int, int, str, Any]]:
    """Log events sent after their (journaled) span: they join it late."""
    return [
        (TRACE_LOGS, 0x22, 8, "gen_ai.user.message", {"content": "Friday"}),
        (TRACE_LOGS, 0x22, 11, "gen_ai.choice", {"index": 0, "finish_reason": "stop",
                                                 "message": {"role": "assistant", "content": "Booked Friday."}}),
    ]


def log_records(items: list[tuple[int, int, int, str, Any]]) -> list[Any]:
    """The SDK's readable log records of ``items`` (what the official log exporters take)."""
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=_RESOURCE)
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    logger = provider.get_logger("opentelemetry.instrumentation.openai_v2")
    for trace_id, span_id, at_ms, name, body in items:
        logger.emit(LogRecord(timestamp=T0 + at_ms * MS, observed_timestamp=T0 + at_ms * MS, trace_id=trace_id,
                              span_id=span_id, trace_flags=TraceFlags(1), event_name=name, body=body,
                              attributes={"gen_ai.system": "openai"}))
    provider.shutdown()
    return list(exporter.get_finished_logs())


def _pipecat(s: _Spans) -> None:
    t = TRACE_PIPECAT
    history = [{"role": "system", "content": "You are a voice bot."}, {"role": "user", "content": "weather?"}]
    s.add(t, 0x33, 0x32, "stt", 1, 3, {"metrics.ttfb": 0.12, "transcript": "weather?"}, scope="pipecat")
    s.add(t, 0x34, 0x32, "llm", 3, 6, {"gen_ai.operation.name": "chat", "input": json.dumps(history),
                                       "output": "Sunny.", "metrics.ttfb": 0.3}, scope="pipecat")
    s.add(t, 0x35, 0x32, "tts", 6, 8, {"metrics.ttfb": 0.05, "text": "Sunny."}, scope="pipecat")
    s.add(t, 0x32, 0x31, "turn", 1, 9, {"turn.number": 1, "turn.was_interrupted": False,
                                        "turn.user_bot_latency_seconds": 0.9}, scope="pipecat.turn")
    s.add(t, 0x31, None, "conversation", 0, 10, {"conversation.id": "pc-call", "conversation.type": "voice"},
          scope="pipecat")


def _livekit(s: _Spans) -> None:
    t = TRACE_LIVEKIT
    s.add(t, 0x43, 0x42, "llm_node", 2, 5, {"lk.response.ttft": 0.25}, scope="livekit-agents")
    s.add(t, 0x44, 0x42, "llm_request", 2, 5, {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.input.messages": _text([("user", "hi there")]),
        "gen_ai.output.messages": _text([("assistant", "Hey!")]),
    }, scope="livekit-agents")
    s.add(t, 0x42, 0x41, "agent_turn", 1, 7, {"lk.interrupted": True, "lk.e2e_latency": 1.1,
                                              "lk.end_of_turn_delay": 0.4}, scope="livekit-agents")
    s.add(t, 0x41, None, "agent_session", 0, 9, {"session.id": "lk-room"}, scope="livekit-agents")


def _sessionless(s: _Spans) -> None:
    t = TRACE_SESSIONLESS
    s.add(t, 0x52, 0x51, "chat", 1, 2, {"gen_ai.operation.name": "chat",
                                        "gen_ai.input.messages": _text([("user", "no session here")])})
    s.add(t, 0x51, None, "invoke_agent anon", 0, 3, {"gen_ai.operation.name": "invoke_agent"})
