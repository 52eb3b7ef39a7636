"""Google ADK's LlmAgent on a LiteLLM model (``openai/mock-gpt`` at the mock LLM), with ADK's own
OpenTelemetry tracing: two asks in one ADK session, each a ``lookup`` tool call and a text answer.
Content is captured as log events (``true``), or on the spans with
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY`` in the environment (recorded into
``spans-span-only.jsonl``). Run in the ADK venv (``recording.main``)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recording import main, tool_then_answer  # noqa: E402

SESSION = "adk-session"
ASKS = ("what is on the menu friday", "and on saturday")


def run(base_url: str) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # offline: no price list fetched
    # ADK records no content unless asked: ``true`` (the older value) means EVENT_ONLY, the messages
    # as log events and none on the spans (``SPAN_ONLY``: on the spans, the tool's arguments too).
    os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    from google.adk.agents import LlmAgent
    from google.adk.models.lite_llm import LiteLlm
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    def lookup(query: str) -> str:
        """Look up today's menu."""
        return f"fish for {query.split()[-1]}"

    model = LiteLlm(model="openai/mock-gpt", api_base=base_url, api_key="unused")
    agent = LlmAgent(name="menu", model=model, instruction="You answer questions about the menu.", tools=[lookup])
    runner = InMemoryRunner(agent=agent, app_name="menu")

    async def ask_all() -> None:
        await runner.session_service.create_session(app_name="menu", user_id="guest", session_id=SESSION)
        for ask in ASKS:
            message = types.Content(role="user", parts=[types.Part(text=ask)])
            async for _ in runner.run_async(user_id="guest", session_id=SESSION, new_message=message):
                pass

    asyncio.run(ask_all())


if __name__ == "__main__":
    SPAN_ONLY = os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT") == "SPAN_ONLY"
    main(run, tool_then_answer("lookup"), f"adk/spans{'-span-only' if SPAN_ONLY else ''}.jsonl")
