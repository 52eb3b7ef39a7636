"""LlamaIndex's FunctionAgent with OpenInference's instrumentor, against the mock LLM through
``OpenAILike``: two asks in one session and one context (the second call carries the first's
history), each a ``lookup`` tool call and a text answer. Run in the LlamaIndex venv
(``recording.main``)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recording import main, tool_then_answer  # noqa: E402

SESSION = "llamaindex-session"
ASKS = ("what is on the menu friday", "and on saturday")


def run(base_url: str) -> None:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.tools import FunctionTool
    from llama_index.core.workflow import Context
    from llama_index.llms.openai_like import OpenAILike
    from openinference.instrumentation import using_session
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    LlamaIndexInstrumentor().instrument()

    def lookup(query: str) -> str:
        """Look up today's menu."""
        return f"fish for {query.split()[-1]}"

    llm = OpenAILike(model="mock-gpt", api_base=base_url, api_key="unused", is_chat_model=True,
                     is_function_calling_model=True)
    agent = FunctionAgent(name="menu", tools=[FunctionTool.from_defaults(lookup)], llm=llm,
                          system_prompt="You answer questions about the menu.")
    context = Context(agent)

    async def ask_all() -> None:
        for ask in ASKS:
            await agent.run(ask, ctx=context)

    with using_session(SESSION):
        asyncio.run(ask_all())


if __name__ == "__main__":
    main(run, tool_then_answer("lookup"), "llamaindex/spans.jsonl")
