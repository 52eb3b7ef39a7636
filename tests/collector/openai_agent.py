"""The booking conversation the openai-v2 tests run, and an app that runs it in its own process.

``book_a_table(client, tracer, greeting)``: a streamed greeting, a model call that asks for a
tool, the tool, and the answer with its result.

    python openai_agent.py COLLECTOR_GRPC_PORT LLM_BASE_URL BUNDLE_DIR GREETING

runs it under the official openai-v2 instrumentor whose content capture mode
(``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``) sends messages as OTLP log events:
``EVENT_ONLY`` (spans without content) or ``SPAN_AND_EVENT``. Its own process, because the
instrumentation reads its conventions' opt-in once per process. Both providers export with their
SDK defaults (batches; logs every second, spans every five), and otel_session records the run in
process too (``BUNDLE_DIR``). Prints the tool call id, then exits after flushing both providers.
"""

from __future__ import annotations

import sys
from typing import Any

import openai
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import otel_session
from otel_session.demo.mock_llm import MODEL

TOOL_RESULT = "19:00 is free"
TOOLS = [{
    "type": "function",
    "function": {"name": "check_availability", "description": "Free tables on a day",
                 "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}},
}]


def book_a_table(client: openai.OpenAI, tracer: Any, greeting: str) -> tuple[str, Any, Any]:
    """Run the conversation in a session's run; returns the streamed reply, the tool call and the
    final completion."""
    with otel_session.session("call-openai"), otel_session.run(agent="booking"):
        stream = client.chat.completions.create(
            model=MODEL, stream=True, messages=[{"role": "user", "content": greeting}],
        )
        streamed = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        history = [{"role": "user", "content": "a table for two on friday"}]
        first = client.chat.completions.create(model=MODEL, messages=history, tools=TOOLS)
        call = first.choices[0].message.tool_calls[0]
        with tracer.start_as_current_span(f"execute_tool {call.function.name}", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.function.name,
            "gen_ai.tool.call.id": call.id, "gen_ai.tool.call.arguments": call.function.arguments,
            "gen_ai.tool.call.result": TOOL_RESULT,
        }):
            pass
        history += [first.choices[0].message.model_dump(exclude_none=True),
                    {"role": "tool", "tool_call_id": call.id, "content": TOOL_RESULT}]
        final = client.chat.completions.create(model=MODEL, messages=history, tools=TOOLS)
    return streamed, call, final


def main(grpc_port: str, base_url: str, bundle_dir: str, greeting: str) -> None:
    endpoint = f"127.0.0.1:{grpc_port}"
    resource = Resource.create({"service.name": "event-mode-agent"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True)))
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(endpoint=endpoint, insecure=True)))
    recorder = otel_session.configure(bundle_dir=bundle_dir, tracer_provider=tracer_provider,
                                      logger_provider=logger_provider)
    OpenAIInstrumentor().instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)
    client = openai.OpenAI(base_url=base_url, api_key="unused")
    _, call, _ = book_a_table(client, tracer_provider.get_tracer("event-mode-agent"), greeting)
    print(call.id, flush=True)
    recorder.shutdown()
    logger_provider.shutdown()
    tracer_provider.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:5])
