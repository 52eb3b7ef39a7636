"""A pydantic-ai agent with a structured output (``output_type=Booking``), its own instrumentation
on, against the mock LLM, recorded with no otel_session code in the agent: two asks of one session
(the second given the first's history), the model filling the booking through pydantic-ai's
``final_result`` output tool, the date and time only at the second ask. Run in the pydantic-ai venv::

    python pydanticai_slots.py                      # recorded into fixtures/frameworks/pydanticai/spans-slots.jsonl
    python pydanticai_slots.py --otlp HOST:PORT     # exported to a collector (``recording.main``)
    python pydanticai_slots.py --dir DIR            # recorded in process: otel_session.configure() only
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson

SESSION = "pydanticai-booking"
ASKS = ("a table for two please, mail ann@example.com", "friday at seven")
CONTACT = "ann@example.com"  # a canary: it reaches no file unredacted


def booking_model(request: dict[str, Any]) -> Any:
    """The output tool called with what the user said so far: the date and time from the second ask."""
    from otel_session.demo.mock_llm import Reply, ToolCall, canned_reply

    tools = [tool["function"]["name"] for tool in request.get("tools") or ()]
    if "final_result" not in tools:
        return canned_reply(request)
    asks = sum(1 for message in request.get("messages") or () if message.get("role") == "user")
    booking = {"party_size": 2, "contact": CONTACT, "date": "friday" if asks > 1 else None,
               "time": "19:00" if asks > 1 else None}
    return Reply(None, (ToolCall(f"call_final_{asks}", "final_result", orjson.dumps(booking).decode()),), "tool_calls", 12, 9)


def run(base_url: str) -> None:
    from opentelemetry import trace
    from pydantic import BaseModel
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    class Booking(BaseModel):
        party_size: int | None = None
        contact: str | None = None
        date: str | None = None
        time: str | None = None

    model = OpenAIChatModel("mock-gpt", provider=OpenAIProvider(base_url=base_url, api_key="unused"))
    Agent.instrument_all()
    agent = Agent(model, name="booker", output_type=Booking, system_prompt="You take table bookings.")
    history = None
    with trace.get_tracer("booking-app").start_as_current_span("conversation", attributes={"session.id": SESSION}):
        for ask in ASKS:
            result = agent.run_sync(ask, message_history=history)
            history = result.all_messages()


def record_in_process(root: str) -> None:
    """The agent recorded in process: ``otel_session.configure()`` on the app's tracer provider, nothing else."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    import otel_session
    from otel_session.demo.mock_llm import MockLLMServer

    provider = TracerProvider(resource=Resource.create({"service.name": "pydanticai"}))
    trace.set_tracer_provider(provider)
    recorder = otel_session.configure(root, tracer_provider=provider)
    with MockLLMServer(port=0, responder=booking_model) as llm:
        run(llm.base_url)
    recorder.shutdown()
    provider.shutdown()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--dir"]:
        record_in_process(sys.argv[2])
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from recording import main

        main(run, booking_model, "pydanticai/spans-slots.jsonl")
