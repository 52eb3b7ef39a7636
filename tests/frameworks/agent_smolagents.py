"""smolagents' ToolCallingAgent with OpenInference's instrumentor, against the mock LLM: two tasks
in one session (the second with ``reset=False``, so its model calls carry the first's history),
each a ``lookup`` tool call and a ``final_answer``. Run in the smolagents venv (``recording.main``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recording import main, tool_then_answer  # noqa: E402

SESSION = "smolagents-session"
ASKS = ("what is on the menu friday", "and on saturday")


def run(base_url: str) -> None:
    from openinference.instrumentation import using_session
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor
    from smolagents import OpenAIServerModel, ToolCallingAgent, tool

    SmolagentsInstrumentor().instrument()

    @tool
    def lookup(query: str) -> str:
        """Look up today's menu.

        Args:
            query: what to look up
        """
        return f"fish for {query.split()[-1]}"

    model = OpenAIServerModel(model_id="mock-gpt", api_base=base_url, api_key="unused")
    agent = ToolCallingAgent(tools=[lookup], model=model, max_steps=3, verbosity_level=0)
    with using_session(SESSION):
        for position, ask in enumerate(ASKS):
            agent.run(ask, reset=position == 0)


if __name__ == "__main__":
    main(run, tool_then_answer("lookup", "final_answer"), "smolagents/spans.jsonl")
