"""In process, a foreign tool span that names no call id is journaled with the model's call id."""

from __future__ import annotations

import orjson
from opentelemetry.sdk.trace import TracerProvider

import otel_session
from otel_session.testing import capture_bundle


def test_a_tool_span_without_a_call_id_answers_the_models_call_in_process():
    provider = TracerProvider()
    with capture_bundle(tracer_provider=provider) as captured:
        other = provider.get_tracer("openinference.instrumentation.openai_agents")
        with otel_session.session("s"), otel_session.run(agent="booker"), otel_session.turn(0):
            with other.start_as_current_span("generation") as model_call:
                model_call.set_attributes({
                    "openinference.span.kind": "LLM",
                    "llm.output_messages.0.message.role": "assistant",
                    "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_7",
                    "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
                    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"city": "Paris"}',
                })
            with other.start_as_current_span("get_weather") as tool:
                tool.set_attributes({"openinference.span.kind": "TOOL", "tool.name": "get_weather",
                                     "input.value": '{"city": "Paris"}', "output.value": "sunny"})
    (bundle,) = captured.bundles
    tools = [(e["type"], e["tool_call_id"]) for e in bundle.events if e["type"].startswith("tool_execution")]
    assert tools == [("tool_execution_started", "call_7"), ("tool_execution_finished", "call_7")]
    (block,) = next(e for e in bundle.events if e["type"] == "message_finished")["payload"]["content"]
    assert orjson.loads(block["text"])["id"] == "call_7"
