"""An OpenAI Agents SDK triage → booker handoff recorded by otel-session with no otel-session code.

Run it under ``opentelemetry-instrument``, which loads the ``otel_session`` and
``otel_session_agents`` instrumentors (``pip install 'otel-session[agents]'``)::

    OTEL_SESSION_DIR=./otel-session-data OTEL_TRACES_EXPORTER=none OTEL_METRICS_EXPORTER=none \\
        opentelemetry-instrument python docs/examples/agents_sdk_booking.py

    otel-session facts table-for-two --dir ./otel-session-data

The model is the mock LLM on loopback (``otel_session.demo.mock_llm``) with a scripted responder,
so it runs offline. ``Runner.run_sync`` with an SDK ``Session`` is one run of session
``table-for-two``: the input guardrail is a guard, the handoff a verdict with the handoffs the
triage agent offered, the tool a tool execution, the output guardrail a guard of the last turn.
Its bundle is sealed when the process exits.
"""

from __future__ import annotations

import json
from typing import Any

from agents import (
    Agent,
    GuardrailFunctionOutput,
    OpenAIChatCompletionsModel,
    Runner,
    SQLiteSession,
    function_tool,
    input_guardrail,
    output_guardrail,
)
from openai import AsyncOpenAI

from otel_session.demo.mock_llm import MODEL, MockLLMServer, Reply, ToolCall, canned_reply


def scripted_model(request: dict[str, Any]) -> Reply:
    """The triage agent hands off to the booker, which checks availability, then answers."""
    messages = request["messages"]
    tools = [tool["function"]["name"] for tool in request.get("tools") or ()]
    if "transfer_to_booker" in tools and messages[-1]["role"] == "user":
        return Reply(None, (ToolCall("call_handoff", "transfer_to_booker", "{}"),), "tool_calls", 9, 1)
    called = [call["function"]["name"] for message in messages for call in message.get("tool_calls") or ()]
    if "check_availability" in tools and called and called[-1] == "transfer_to_booker":
        arguments = json.dumps({"day": "friday"})
        return Reply(None, (ToolCall("call_avail", "check_availability", arguments),), "tool_calls", 12, 2)
    return canned_reply(request)


@function_tool
def check_availability(day: str) -> str:
    """Free tables on a day."""
    return "19:00 is free"


@input_guardrail
async def no_card_numbers(ctx: Any, agent: Any, user_input: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info=None, tripwire_triggered="4111" in str(user_input))


@output_guardrail
async def polite(ctx: Any, agent: Any, output: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info=None, tripwire_triggered=False)


def triage_agent(model: Any) -> Agent:
    """The triage agent: it may hand off to the booker or to billing."""
    booker = Agent(name="booker", model=model, tools=[check_availability], output_guardrails=[polite])
    billing = Agent(name="billing", model=model)
    return Agent(name="triage", model=model, handoffs=[booker, billing], input_guardrails=[no_card_numbers])


def main() -> None:
    with MockLLMServer(responder=scripted_model) as llm:
        client = AsyncOpenAI(base_url=llm.base_url, api_key="unused")
        model = OpenAIChatCompletionsModel(model=MODEL, openai_client=client)
        session = SQLiteSession("table-for-two")  # the SDK's session: the recorded session's id
        result = Runner.run_sync(triage_agent(model), "a table for two on friday", session=session)
    print(f"agent: {result.final_output!r}")


if __name__ == "__main__":
    main()
