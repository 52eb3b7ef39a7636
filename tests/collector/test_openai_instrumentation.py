"""The official openai-v2 instrumentor around the real openai client, against the mock LLM,
inside an otel_session session, exported over OTLP to the collector → one bundle with the
messages (streamed and not) and the tool execution."""

from __future__ import annotations

import json

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

import otel_session
from otel_session.demo.mock_llm import MODEL, MockLLMServer
from otel_session.read import BundleStatus

from .conftest import CANARY_EMAIL, all_bytes, sealed_bundles

openai = pytest.importorskip("openai")
openai_v2 = pytest.importorskip("opentelemetry.instrumentation.openai_v2")

TOOLS = [{
    "type": "function",
    "function": {"name": "check_availability", "description": "Free tables on a day",
                 "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}},
}]


@pytest.fixture
def instrumented(monkeypatch, make_provider, collector, tmp_path):
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    provider = make_provider(GrpcExporter(endpoint=f"127.0.0.1:{collector.grpc_port}", insecure=True), "booking-agent")
    recorder = otel_session.configure(bundle_dir=tmp_path / "in-process", tracer_provider=provider)
    instrumentor = openai_v2.OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    with MockLLMServer() as llm:
        yield provider, openai.OpenAI(base_url=llm.base_url, api_key="unused")
    instrumentor.uninstrument()
    recorder.shutdown()


def test_openai_chat_stream_and_tool_call_become_one_bundle(instrumented, bundle_root):
    provider, client = instrumented
    tracer = provider.get_tracer("booking-agent")
    with otel_session.session("call-openai"), otel_session.run(agent="booking"):
        stream = client.chat.completions.create(
            model=MODEL, stream=True,
            messages=[{"role": "user", "content": f"hello, I am {CANARY_EMAIL}"}],
        )
        streamed = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        history = [{"role": "user", "content": "a table for two on friday"}]
        first = client.chat.completions.create(model=MODEL, messages=history, tools=TOOLS)
        call = first.choices[0].message.tool_calls[0]
        with tracer.start_as_current_span(f"execute_tool {call.function.name}", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.function.name,
            "gen_ai.tool.call.id": call.id, "gen_ai.tool.call.arguments": call.function.arguments,
        }) as tool_span:
            result = "19:00 is free"
            tool_span.set_attribute("gen_ai.tool.call.result", result)
        history += [first.choices[0].message.model_dump(exclude_none=True),
                    {"role": "tool", "tool_call_id": call.id, "content": result}]
        final = client.chat.completions.create(model=MODEL, messages=history, tools=TOOLS)
    assert streamed == f"You said: hello, I am {CANARY_EMAIL}"

    (bundle,) = sealed_bundles(bundle_root)
    assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
    assert bundle.session_id == "call-openai"
    messages = {}
    for event in bundle.events:
        if event["type"] == "message_started":
            messages[event["message_id"]] = {"role": event["payload"]["role"]}
        elif event["type"] == "message_finished":
            messages[event["message_id"]]["content"] = event["payload"]["content"]
    conversation = [(m["role"], [(c["kind"], c["text"]) for c in m["content"]]) for m in messages.values()]
    assert conversation[0] == ("user", [("text", "hello, I am [email]")])
    assert conversation[1] == ("assistant", [("text", "You said: hello, I am [email]")])
    assert conversation[2] == ("user", [("text", "a table for two on friday")])
    role, ((kind, text),) = conversation[3]
    assert (role, kind) == ("assistant", "tool_call")
    assert json.loads(text) == {"id": call.id, "name": "check_availability",
                                "arguments": {"query": "a table for two on friday"}}
    assert conversation[4] == ("tool", [("text", "19:00 is free")])
    assert conversation[5] == ("assistant", [("text", f"check_availability says: {result}")])
    assert final.choices[0].message.content == f"check_availability says: {result}"

    tools = [event for event in bundle.events if event["type"].startswith("tool_execution")]
    assert [(t["type"], t["tool_call_id"]) for t in tools] == [
        ("tool_execution_started", call.id), ("tool_execution_finished", call.id)]
    assert tools[0]["payload"] == {"name": "check_availability", "arguments": {"query": "a table for two on friday"}}
    assert tools[1]["payload"] == {"status": "ok", "result": result}
    ats = [event["at"] for event in bundle.events]
    assert ats == sorted(ats)
    assert CANARY_EMAIL.encode() not in all_bytes(bundle_root)
