"""Recording a real framework's spans: its agent against the mock LLM on loopback, offline.

Contract (for the ``agent_<framework>.py`` scripts, run in the framework's own venv)::

    main(run, responder, fixture)   # ``python agent_x.py`` records the spans into ``fixture``;
                                    # ``python agent_x.py --otlp HOST:PORT`` exports them to a collector

``run(base_url)`` drives the agent against the mock LLM at ``base_url`` (the OpenAI-compatible
``/v1``), on the global tracer provider set up here. Recorded spans are written as OTLP JSON lines
(the OpenTelemetry Collector file exporter's format: what ``otel-session import`` reads), encoded
by the official OTLP encoder; GenAI log records the framework emits (on the global logger provider
set up here) come first, as a live export delivers them. ``tool_then_answer`` is a responder for agents that end their turn
with a tool of their own (smolagents' ``final_answer``) or with text.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "frameworks"


def tool_then_answer(tool: str, final_tool: str | None = None) -> Callable[[dict[str, Any]], Any]:
    """A responder: a user message → a call of ``tool`` with ``{"query": <its text>}``; a tool
    result → ``final_tool`` called with ``{"answer": "<tool> says: <result>"}`` (or that text)."""
    from otel_session.demo.mock_llm import Reply, ToolCall, canned_reply

    def respond(request: dict[str, Any]) -> Any:
        messages = [m for m in request.get("messages") or () if isinstance(m, dict)]
        last = messages[-1] if messages else {}
        if last.get("role") == "tool" or (last.get("role") == "user" and _is_observation(last)):
            answer = f"{tool} says: {_text(last)}"
            if final_tool is None:
                return Reply(answer, (), "stop", 10, len(answer.split()))
            call = ToolCall(f"call_final_{len(messages)}", final_tool, orjson.dumps({"answer": answer}).decode())
            return Reply(None, (call,), "tool_calls", 10, 3)
        if request.get("tools"):
            call = ToolCall(f"call_{tool}_{len(messages)}", tool, orjson.dumps({"query": _text(last)}).decode())
            return Reply(None, (call,), "tool_calls", 10, 3)
        return canned_reply(request)

    return respond


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def _is_observation(message: dict[str, Any]) -> bool:
    """smolagents sends a tool's result back as a user message starting ``Observation:`` (a new
    task after it joins that message)."""
    text = _text(message)
    return text.lstrip().startswith("Observation:") and "New task:" not in text


def main(run: Callable[[str], None], responder: Callable[[dict[str, Any]], Any], fixture: str) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_session.demo.mock_llm import MockLLMServer

    parser = argparse.ArgumentParser()
    parser.add_argument("--otlp", help="export over OTLP/gRPC to this collector (host:port) instead of recording")
    parser.add_argument("--out", type=Path, default=FIXTURES / fixture)
    options = parser.parse_args()
    provider = TracerProvider(resource=Resource.create({"service.name": fixture.split("/")[0]}))
    memory = InMemorySpanExporter()
    if options.otlp:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=options.otlp, insecure=True)))
    else:
        provider.add_span_processor(SimpleSpanProcessor(memory))
    trace.set_tracer_provider(provider)
    logs = _logger_provider(provider.resource, options.otlp)  # GenAI events some frameworks log
    with MockLLMServer(port=0, responder=responder) as llm:
        run(llm.base_url)
    provider.force_flush()
    logs.force_flush()
    if not options.otlp:
        from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        from otel_session.collector.otlp import to_json_line

        options.out.parent.mkdir(parents=True, exist_ok=True)
        spans = sorted(memory.get_finished_spans(), key=lambda span: span.start_time or 0)
        # Log records first: the SDK's batch processors send them sooner (every second, spans every five).
        records = logs.memory.get_finished_logs()
        lines = to_json_line(encode_logs(records)) if records else b""
        options.out.write_bytes(lines + to_json_line(encode_spans(spans)))
        print(f"{len(spans)} spans, {len(records)} log records → {options.out}")
    provider.shutdown()
    logs.shutdown()


def _logger_provider(resource: Any, otlp: str | None) -> Any:
    """The global SDK logger provider, kept in memory (``.memory``) or exported to ``otlp``."""
    from opentelemetry import _logs
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogExporter, SimpleLogRecordProcessor

    provider = LoggerProvider(resource=resource)
    provider.memory = InMemoryLogExporter()
    if otlp:
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter

        provider.add_log_record_processor(SimpleLogRecordProcessor(OTLPLogExporter(endpoint=otlp, insecure=True)))
    else:
        provider.add_log_record_processor(SimpleLogRecordProcessor(provider.memory))
    _logs.set_logger_provider(provider)
    return provider
