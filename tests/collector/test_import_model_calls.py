"""``otel-session import`` keeps what the real openai-v2 instrumentor says about each model call:
the model and token usage on the assistant message, and the streamed deltas the otel_session
instrumentor put on the span."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_session.cli import main
from otel_session.demo.mock_llm import MODEL, MockLLMServer
from otel_session.instrument.instrumentor import OtelSessionInstrumentor

from .conftest import bundles
from .test_import import file_exporter

openai = pytest.importorskip("openai")
openai_v2 = pytest.importorskip("opentelemetry.instrumentation.openai_v2")


def test_imported_model_calls_carry_model_usage_and_deltas(monkeypatch, tmp_path):
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    path = tmp_path / "traces.jsonl"
    provider = TracerProvider(resource=Resource.create({"service.name": "import-agent", "session.id": "imported"}))
    provider.add_span_processor(SimpleSpanProcessor(file_exporter(path)))
    session_instrumentor, openai_instrumentor = OtelSessionInstrumentor(), openai_v2.OpenAIInstrumentor()
    session_instrumentor.instrument(tracer_provider=provider, bundle_dir=tmp_path / "unused")
    openai_instrumentor.instrument(tracer_provider=provider)
    try:
        with MockLLMServer() as llm, provider.get_tracer("app").start_as_current_span("invoke_agent booking"):
            client = openai.OpenAI(base_url=llm.base_url, api_key="unused")
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi there"}])
            for _ in client.chat.completions.create(model=MODEL, stream=True, stream_options={"include_usage": True},
                                                    messages=[{"role": "user", "content": "again"}]):
                pass
    finally:
        openai_instrumentor.uninstrument()
        session_instrumentor.uninstrument()
        provider.shutdown()

    root = tmp_path / "bundles"
    result = CliRunner().invoke(main, ["import", str(path), "--dir", str(root)], env={"OTEL_SESSION_REDACTION_KEY": "k"})
    assert result.exit_code == 0, result.output
    (bundle,) = bundles(root)
    roles = {e["message_id"]: e["payload"]["role"] for e in bundle.events if e["type"] == "message_started"}
    replies = [e["payload"] for e in bundle.events if e["type"] == "message_finished" and roles[e["message_id"]] == "assistant"]
    assert [(r["content"][0]["text"], r["model"], r["usage"]) for r in replies] == [
        ("You said: hi there", MODEL, {"input_tokens": 2, "output_tokens": 4}),
        ("You said: again", MODEL, {"input_tokens": 1, "output_tokens": 3}),
    ]
    assert [e["payload"]["delta"] for e in bundle.events if e["type"] == "assistant_delta"] == ["You ", "said: ", "again"]
