"""The official openai-v2 instrumentor around the real openai client, against the mock LLM,
inside an otel_session session, exported over OTLP to the collector → one bundle with the
messages (streamed and not) and the tool execution, whether the instrumentor puts the messages
on its spans or sends them as log events."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

import otel_session
from otel_session.demo.mock_llm import MockLLMServer
from otel_session.bundle.read import BundleStatus

from .conftest import CANARY_EMAIL, all_bytes, sealed_bundles

openai = pytest.importorskip("openai")
openai_v2 = pytest.importorskip("opentelemetry.instrumentation.openai_v2")

from .openai_agent import TOOL_RESULT, book_a_table  # noqa: E402 - needs openai, skipped above without it

GREETING = f"hello, I am {CANARY_EMAIL}"


def conversation_of(bundle) -> list[tuple[str, list[tuple[str, str]]]]:
    """``(role, [(kind, text), …])`` of each message of the bundle, in journal order."""
    messages = {}
    for event in bundle.events:
        if event["type"] == "message_started":
            messages[event["message_id"]] = {"role": event["payload"]["role"]}
        elif event["type"] == "message_finished":
            messages[event["message_id"]]["content"] = event["payload"]["content"]
    return [(m["role"], [(c["kind"], c["text"]) for c in m["content"]]) for m in messages.values()]


def assert_the_booking(bundle, call_id: str) -> None:
    """``bundle`` holds ``book_a_table``'s conversation, redacted, in event-time order."""
    assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
    assert bundle.session_id == "call-openai"
    conversation = conversation_of(bundle)
    assert conversation[0] == ("user", [("text", "hello, I am [email]")])
    assert conversation[1] == ("assistant", [("text", "You said: hello, I am [email]")])
    assert conversation[2] == ("user", [("text", "a table for two on friday")])
    role, ((kind, text),) = conversation[3]
    assert (role, kind) == ("assistant", "tool_call")
    assert json.loads(text) == {"id": call_id, "name": "check_availability",
                                "arguments": {"query": "a table for two on friday"}}
    assert conversation[4] == ("tool", [("text", TOOL_RESULT)])
    assert conversation[5] == ("assistant", [("text", f"check_availability says: {TOOL_RESULT}")])
    assert len(conversation) == 6

    tools = [event for event in bundle.events if event["type"].startswith("tool_execution")]
    assert [(t["type"], t["tool_call_id"]) for t in tools] == [
        ("tool_execution_started", call_id), ("tool_execution_finished", call_id)]
    assert tools[0]["payload"] == {"name": "check_availability", "arguments": {"query": "a table for two on friday"}}
    assert tools[1]["payload"] == {"status": "ok", "result": TOOL_RESULT}
    ats = [event["at"] for event in bundle.events]
    assert ats == sorted(ats)


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
    streamed, call, final = book_a_table(client, provider.get_tracer("booking-agent"), GREETING)
    assert streamed == f"You said: {GREETING}"
    assert final.choices[0].message.content == f"check_availability says: {TOOL_RESULT}"

    (bundle,) = sealed_bundles(bundle_root)
    assert_the_booking(bundle, call.id)
    assert CANARY_EMAIL.encode() not in all_bytes(bundle_root)


@pytest.mark.parametrize("mode", ["EVENT_ONLY", "SPAN_AND_EVENT"])
def test_openai_messages_sent_as_log_events_join_their_spans(collector, bundle_root, tmp_path, mode):
    """Content capture in events: each model call's messages travel as an OTLP log event
    (``gen_ai.client.inference.operation.details``) beside its span, which has them too only in
    SPAN_AND_EVENT; the collector, and the recorder in process, join them to their spans, once."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    env.update({"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": mode})
    with MockLLMServer() as llm:
        completed = subprocess.run(
            [sys.executable, str(Path(__file__).with_name("openai_agent.py")), str(collector.grpc_port),
             llm.base_url, str(tmp_path / "in-process"), GREETING],
            env=env, capture_output=True, text=True, timeout=120,
        )
    assert completed.returncode == 0, completed.stderr
    call_id = completed.stdout.split()[-1]

    (bundle,) = sealed_bundles(bundle_root)
    (in_process,) = sealed_bundles(tmp_path / "in-process")
    assert_the_booking(bundle, call_id)
    assert_the_booking(in_process, call_id)
    counters = collector.counters.snapshot()
    assert (counters["log_events_bundled"], counters["log_events_unmatched"]) == (3, 0)
    assert CANARY_EMAIL.encode() not in all_bytes(bundle_root) + all_bytes(tmp_path / "in-process")
