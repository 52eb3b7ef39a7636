"""A LiveKit Agents voice agent run offline for the tests: the real ``AgentSession`` and telemetry.

LiveKit's OpenAI plugin (``livekit.plugins.openai.LLM``) talks to the loopback mock
(``otel_session.demo.mock_llm``: streaming, one tool call). The caller's turns come in as text
through ``session.run(user_input=…)``, the way LiveKit's own test harness drives an agent: no STT,
TTS, VAD or room is needed (none can run here), so nothing is replaced. Telemetry is LiveKit's:
``set_tracer_provider(provider, metadata={"session.id": …})``, as its docs ask.

    python livekit_app.py BASE_URL SESSION_ID (--otlp ENDPOINT | --in-process DIR) TEXT...
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

from livekit.agents import Agent, AgentSession, RunContext, function_tool
from livekit.agents.telemetry import set_tracer_provider
from livekit.plugins import openai
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider


class WeatherAgent(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are a weather bot.")

    @function_tool
    async def get_weather(self, context: RunContext, query: str) -> str:
        """The forecast."""
        return "sunny"


async def converse(base_url: str, utterances: Sequence[str], *, interrupt_first: bool = False) -> None:
    """Each utterance a turn; with ``interrupt_first``, the caller cuts the first reply off once the
    agent is thinking about it (the model asked; ``session.interrupt()``, what LiveKit does when the
    user speaks over it): on that cue, not after some seconds a loaded machine may need to get there."""
    async with openai.LLM(model="mock-gpt", base_url=base_url, api_key="unused") as llm, AgentSession(llm=llm) as session:
        thinking = asyncio.Event()
        session.on("agent_state_changed", lambda event: thinking.set() if event.new_state == "thinking" else None)
        await session.start(WeatherAgent())
        for position, text in enumerate(utterances):
            if position == 0 and interrupt_first:
                thinking.clear()
                handle = session.generate_reply(user_input=text)
                await asyncio.wait_for(thinking.wait(), 60)
                await session.interrupt()
                await handle
            else:
                await session.run(user_input=text)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("base_url")
    parser.add_argument("session_id")
    parser.add_argument("--otlp")
    parser.add_argument("--in-process")
    parser.add_argument("--no-code", action="store_true",
                        help="with --in-process: only configure() on LiveKit's provider, no session or run opened")
    parser.add_argument("--interrupt-first", action="store_true", help="cut the first reply off while the model thinks")
    parser.add_argument("utterances", nargs="+")
    args = parser.parse_args()
    provider = TracerProvider(resource=Resource.create({"service.name": "weather-agent"}))
    set_tracer_provider(provider, metadata={"session.id": args.session_id})
    if args.otlp:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=args.otlp, insecure=True)))
        asyncio.run(converse(args.base_url, args.utterances, interrupt_first=args.interrupt_first))
        provider.shutdown()
    else:
        import otel_session

        recorder = otel_session.configure(args.in_process, tracer_provider=provider)
        if args.no_code:  # LiveKit's spans carry the session.id its metadata names: recorded as the collector would
            asyncio.run(converse(args.base_url, args.utterances, interrupt_first=args.interrupt_first))
        else:
            with otel_session.session(args.session_id), otel_session.run("weather-agent"):
                asyncio.run(converse(args.base_url, args.utterances, interrupt_first=args.interrupt_first))
        recorder.shutdown()


if __name__ == "__main__":
    main()
