"""One small agent per third-party instrumentation, run in the third-party venv (``conftest.py``).

Usage: ``python thirdparty_agent.py SCENARIO OTLP_GRPC_PORT LLM_BASE_URL SESSION_ID [DUMP.json]``

Each scenario makes the real instrumentor trace the real client against the mock LLM and
exports its spans over OTLP/gRPC through a batch span processor, as ``opentelemetry-instrument``
sets it up (the session id travels as a resource attribute, which every instrumentation keeps). ``DUMP.json`` gets the spans' names and attributes too (for reading).
Prints the tool call id the model asked for, if any, last.
"""

from __future__ import annotations

import asyncio
import json
import sys

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

MODEL = "mock-gpt"


def weather_args(city: str) -> str:
    return f"sunny in {city}"


def openinference_openai(provider: TracerProvider, base_url: str) -> str:
    """OpenInference's openai instrumentor: a chat call with a tool, a streamed answer, a Responses call."""
    import openai
    from openinference.instrumentation.openai import OpenAIInstrumentor

    OpenAIInstrumentor().instrument(tracer_provider=provider)
    client = openai.OpenAI(base_url=base_url, api_key="unused")
    tracer = provider.get_tracer("agent")
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}}]
    with tracer.start_as_current_span("booking-turn"):
        messages = [{"role": "user", "content": "Paris"}]
        first = client.chat.completions.create(model=MODEL, messages=messages, tools=tools)
        call = first.choices[0].message.tool_calls[0]
        messages += [first.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": weather_args("Paris")}]
        stream = client.chat.completions.create(model=MODEL, messages=messages, stream=True,
                                                stream_options={"include_usage": True})
        "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        client.responses.create(model=MODEL, input="and in Rome?")
    return call.id


def openinference_agents(provider: TracerProvider, base_url: str, *, streamed: bool) -> str:
    """The OpenAI Agents SDK traced by OpenInference: a function tool, Chat Completions model
    (streamed when ``streamed``) then the Responses model."""
    import openai
    from agents import Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, function_tool
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)  # its processor only (exclusive)
    if streamed:  # the otel_session instrumentor taps the streams ($OTEL_SESSION_DIR: no run, no bundle)
        from otel_session.instrument.instrumentor import OtelSessionInstrumentor

        OtelSessionInstrumentor().instrument(tracer_provider=provider)
    client = openai.AsyncOpenAI(base_url=base_url, api_key="unused")
    calls: list[str] = []

    @function_tool
    def get_weather(query: str) -> str:
        """The weather."""
        return weather_args(query)

    async def main() -> None:
        chat = Agent(name="Booker", instructions="Be brief.", tools=[get_weather],
                     model=OpenAIChatCompletionsModel(model=MODEL, openai_client=client))
        if streamed:
            result = Runner.run_streamed(chat, "Paris")
            async for _ in result.stream_events():
                pass
        else:
            result = await Runner.run(chat, "Paris")
        calls.extend(item.raw_item.call_id for item in result.new_items if item.type == "tool_call_item")
        responses = Agent(name="Concierge", instructions="Be brief.",
                          model=OpenAIResponsesModel(model=MODEL, openai_client=client))
        await Runner.run(responses, "hello")

    asyncio.run(main())
    return calls[0] if calls else ""


def traceloop(provider: TracerProvider, base_url: str) -> str:
    """Traceloop (OpenLLMetry): a workflow with a tool-decorated function and the openai client,
    then a streamed call (the otel_session instrumentor taps it; ``$OTEL_SESSION_DIR``, no run)."""
    import openai
    from opentelemetry import trace
    from traceloop.sdk import Traceloop
    from traceloop.sdk.decorators import tool, workflow
    from traceloop.sdk.instruments import Instruments

    from otel_session.instrument.instrumentor import OtelSessionInstrumentor

    Traceloop.init(app_name="traceloop-agent", exporter=_EXPORTERS[0], disable_batch=False,
                   instruments={Instruments.OPENAI}, telemetry_enabled=False, resource_attributes=_RESOURCE)
    traceloop_provider = trace.get_tracer_provider()  # Traceloop's own, set globally
    for exporter in _EXPORTERS[1:]:
        traceloop_provider.add_span_processor(SimpleSpanProcessor(exporter))
    OtelSessionInstrumentor().instrument(tracer_provider=traceloop_provider)
    client = openai.OpenAI(base_url=base_url, api_key="unused")
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}}]

    @tool(name="get_weather")
    def get_weather(query: str) -> dict:
        return {"forecast": weather_args(query)}

    @workflow(name="booking")
    def run() -> str:
        messages = [{"role": "user", "content": "Paris"}]
        first = client.chat.completions.create(model=MODEL, messages=messages, tools=tools)
        call = first.choices[0].message.tool_calls[0]
        result = get_weather(query=json.loads(call.function.arguments)["query"])
        messages += [first.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}]
        client.chat.completions.create(model=MODEL, messages=messages, tools=tools)
        for _ in client.chat.completions.create(model=MODEL, stream=True, messages=[{"role": "user", "content": "Lima"}]):
            pass
        return call.id

    return run()


def langchain(provider: TracerProvider, base_url: str) -> str:
    """LangChain traced by OpenInference: a chat model bound to a tool, the tool run, the answer."""
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from openinference.instrumentation.langchain import LangChainInstrumentor

    LangChainInstrumentor().instrument(tracer_provider=provider)

    @tool
    def get_weather(query: str) -> str:
        """The weather."""
        return weather_args(query)

    model = ChatOpenAI(model=MODEL, base_url=base_url, api_key="unused").bind_tools([get_weather])
    with provider.get_tracer("agent").start_as_current_span("booking-agent"):  # one trace: one run
        messages = [HumanMessage("Paris")]
        first = model.invoke(messages)
        call = first.tool_calls[0]
        result = get_weather.invoke(call["args"]["query"])  # a bare value, as many agents call tools
        messages += [first, ToolMessage(result, tool_call_id=call["id"])]
        model.invoke(messages)
    return call["id"]


def openinference_streams(provider: TracerProvider, base_url: str) -> str:
    """The otel_session instrumentor beside OpenInference's openai instrumentor (the bundles go to
    ``$OTEL_SESSION_DIR``): Responses streams (text, a function call), sync and async, and a
    Chat Completions stream, in one run."""
    import openai
    from openinference.instrumentation.openai import OpenAIInstrumentor

    import otel_session
    from otel_session.instrument.instrumentor import OtelSessionInstrumentor

    OtelSessionInstrumentor().instrument(tracer_provider=provider)
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    client = openai.OpenAI(base_url=base_url, api_key="unused")
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}]

    async def streamed_async() -> None:
        async_client = openai.AsyncOpenAI(base_url=base_url, api_key="unused")
        async for _ in await async_client.responses.create(model=MODEL, input="async Rome", stream=True):
            pass

    with otel_session.session(_RESOURCE["session.id"]), otel_session.run(agent="streamer"):
        for _ in client.responses.create(model=MODEL, input="Paris", stream=True):
            pass
        calls = [event.item.call_id for event in client.responses.create(model=MODEL, input="Oslo", tools=tools, stream=True)
                 if event.type == "response.output_item.done"]
        asyncio.run(streamed_async())
        for _ in client.chat.completions.create(model=MODEL, stream=True, messages=[{"role": "user", "content": "Lima"}]):
            pass
    return calls[0]


_EXPORTERS: list = []
_RESOURCE: dict = {}


def main() -> None:
    scenario, port, base_url, session_id = sys.argv[1:5]
    dump = sys.argv[5] if len(sys.argv) > 5 else None
    _RESOURCE.update({"service.name": f"{scenario}-service", "session.id": session_id})
    memory = InMemorySpanExporter()
    _EXPORTERS.extend([OTLPSpanExporter(endpoint=f"127.0.0.1:{port}", insecure=True), memory])
    provider = TracerProvider(resource=Resource.create(_RESOURCE))
    provider.add_span_processor(BatchSpanProcessor(_EXPORTERS[0]))  # as opentelemetry-instrument sets it up
    provider.add_span_processor(SimpleSpanProcessor(memory))
    if scenario == "openinference-openai":
        call_id = openinference_openai(provider, base_url)
    elif scenario in ("openinference-agents", "openinference-agents-streamed"):
        call_id = openinference_agents(provider, base_url, streamed=scenario.endswith("streamed"))
    elif scenario == "traceloop":
        call_id = traceloop(provider, base_url)
    elif scenario == "openinference-streams":
        call_id = openinference_streams(provider, base_url)
    elif scenario == "langchain":
        call_id = langchain(provider, base_url)
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    provider.force_flush()
    from opentelemetry import trace

    global_provider = trace.get_tracer_provider()
    if hasattr(global_provider, "force_flush"):
        global_provider.force_flush()
    if dump:
        spans = [{"name": s.name, "parent": s.parent is not None, "scope": s.instrumentation_scope.name,
                  "attributes": dict(s.attributes), "events": [e.name for e in s.events]}
                 for s in memory.get_finished_spans()]
        with open(dump, "w") as out:
            json.dump(spans, out, indent=1, default=str)
    print(call_id)


if __name__ == "__main__":
    main()
