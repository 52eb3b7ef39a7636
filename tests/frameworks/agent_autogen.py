"""AutoGen's AssistantAgent (agentchat) with OpenInference's instrumentor beside AutoGen's own
tracing, against the mock LLM through its OpenAI client: two tasks in one session, each a
``lookup`` tool call and a reflected text answer. Run in the AutoGen venv (``recording.main``)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recording import main, tool_then_answer  # noqa: E402

SESSION = "autogen-session"
ASKS = ("what is on the menu friday", "and on saturday")


def run(base_url: str) -> None:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_ext.models.openai import OpenAIChatCompletionClient
    from openinference.instrumentation import using_session
    from openinference.instrumentation.autogen_agentchat import AutogenAgentChatInstrumentor

    AutogenAgentChatInstrumentor().instrument()

    async def lookup(query: str) -> str:
        """Look up today's menu."""
        return f"fish for {query.split()[-1]}"

    client = OpenAIChatCompletionClient(
        model="mock-gpt", base_url=base_url, api_key="unused",
        model_info={"vision": False, "function_calling": True, "json_output": False, "family": "unknown",
                    "structured_output": False})
    agent = AssistantAgent("menu", model_client=client, tools=[lookup], reflect_on_tool_use=True)

    async def ask_all() -> None:
        for ask in ASKS:
            await agent.run(task=ask)
        await client.close()

    with using_session(SESSION):
        asyncio.run(ask_all())


if __name__ == "__main__":
    main(run, tool_then_answer("lookup"), "autogen/spans.jsonl")
