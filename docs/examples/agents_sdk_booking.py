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
The script prints what the run recorded, turn by turn.
"""

from __future__ import annotations

import json
import os
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


def show_recorded(root: str) -> None:
    """What the run recorded (the bundle otel-session wrote)."""
    import otel_session
    from otel_session.facts import load_session_facts

    recorder = otel_session.current_recorder()
    if recorder is None:
        print("not recorded: run this under opentelemetry-instrument (see the docstring)")
        return
    recorder.force_flush()
    facts = load_session_facts(root, "table-for-two")
    for turn in facts["turns"]:
        verdict = turn["verdict"] or {}
        print(f"turn {turn['turn_index']}: guards {[(g['name'], g['passed']) for g in turn['guards']]}, "
              f"verdict {verdict.get('from')} -> {verdict.get('to')} of {verdict.get('candidates')}, "
              f"tools {[t['name'] for t in turn['tools']]}, "
              f"messages {[(m['role'], m['text']) for m in turn['messages']]}")


def main() -> None:
    with MockLLMServer(responder=scripted_model) as llm:
        model = OpenAIChatCompletionsModel(model=MODEL, openai_client=AsyncOpenAI(base_url=llm.base_url, api_key="unused"))
        booker = Agent(name="booker", model=model, tools=[check_availability], output_guardrails=[polite])
        billing = Agent(name="billing", model=model)
        triage = Agent(name="triage", model=model, handoffs=[booker, billing], input_guardrails=[no_card_numbers])
        result = Runner.run_sync(triage, "a table for two on friday", session=SQLiteSession("table-for-two"))
    print(f"agent: {result.final_output!r}")
    show_recorded(os.environ.get("OTEL_SESSION_DIR", "./otel-session-data"))


if __name__ == "__main__":
    main()
