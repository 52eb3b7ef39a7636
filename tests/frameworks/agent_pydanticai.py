"""pydantic-ai's Agent with its own OpenTelemetry instrumentation (``Agent.instrument_all()``), against the
mock LLM through its OpenAI chat model: two asks in one session (the second given the first's
message history), each a ``lookup`` tool call and a text answer, both inside one span naming the
session. Run in the pydantic-ai venv (``recording.main``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recording import main, tool_then_answer  # noqa: E402

SESSION = "pydanticai-session"
ASKS = ("what is on the menu friday", "and on saturday")


def run(base_url: str) -> None:
    from opentelemetry import trace
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("mock-gpt", provider=OpenAIProvider(base_url=base_url, api_key="unused"))
    Agent.instrument_all()  # its own OpenTelemetry instrumentation, on the global providers
    agent = Agent(model, name="menu", system_prompt="You answer questions about the menu.")

    @agent.tool_plain
    def lookup(query: str) -> str:
        """Look up today's menu."""
        return f"fish for {query.split()[-1]}"

    history = None
    with trace.get_tracer("menu-app").start_as_current_span("conversation", attributes={"session.id": SESSION}):
        for ask in ASKS:
            result = agent.run_sync(ask, message_history=history)
            history = result.all_messages()


if __name__ == "__main__":
    main(run, tool_then_answer("lookup"), "pydanticai/spans.jsonl")
