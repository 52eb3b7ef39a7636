"""strands-agents with its own OpenTelemetry tracing, against the mock LLM through its OpenAI
model: two asks to one agent in one session (``trace_attributes``), each a ``lookup`` tool call and
a text answer. With ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` in the
environment, strands writes the newer conventions (recorded into ``spans-latest.jsonl``). Run in the
strands venv (``recording.main``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recording import main, tool_then_answer  # noqa: E402

SESSION = "strands-session"
ASKS = ("what is on the menu friday", "and on saturday")
LATEST = "gen_ai_latest_experimental" in os.environ.get("OTEL_SEMCONV_STABILITY_OPT_IN", "")


def run(base_url: str) -> None:
    from strands import Agent, tool
    from strands.models.openai import OpenAIModel

    @tool
    def lookup(query: str) -> str:
        """Look up today's menu.

        Args:
            query: what to look up
        """
        return f"fish for {query.split()[-1]}"

    model = OpenAIModel(client_args={"base_url": base_url, "api_key": "unused"}, model_id="mock-gpt")
    agent = Agent(model=model, tools=[lookup], name="menu", callback_handler=None,
                  trace_attributes={"session.id": SESSION})
    for ask in ASKS:
        agent(ask)


if __name__ == "__main__":
    main(run, tool_then_answer("lookup"), f"strands/spans{'-latest' if LATEST else ''}.jsonl")
