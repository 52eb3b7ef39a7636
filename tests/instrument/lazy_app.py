"""An app that imports its frameworks before or after the project's instrumentors are on (run as a
child process by ``test_lazy_loading``: its ``sys.modules`` starts clean). Prints one JSON object.

    python lazy_app.py after BUNDLE_DIR       # instrument, then import openai, anthropic, agents, langgraph
    python lazy_app.py cancelled BUNDLE_DIR   # instrument, uninstrument, then import them
    python lazy_app.py before BUNDLE_DIR      # import them, instrument, uninstrument, instrument again
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TypedDict

FRAMEWORKS = ("openai", "anthropic", "agents", "langgraph", "langchain_core")
OURS = f"{os.sep}otel_session{os.sep}"


def patches(function: Any) -> int:
    """How many of this project's wrappers ``function`` is (``functools.wraps`` chains them)."""
    count = 0
    while function is not None:
        code = getattr(function, "__code__", None)
        count += code is not None and OURS in code.co_filename
        function = getattr(function, "__wrapped__", None)
    return count


def patched() -> dict[str, int]:
    """The patch count of each function the project's instrumentors wrap."""
    import anthropic
    import openai
    from agents.run import AgentRunner
    from langgraph.pregel import Pregel

    return {
        "openai.Stream": patches(openai.Stream.__init__),
        "openai.AsyncStream": patches(openai.AsyncStream.__init__),
        "anthropic.Stream": patches(anthropic.Stream.__init__),
        "anthropic.start_api_call_span": patches(anthropic._base_client.start_api_call_span),
        "agents.AgentRunner.run": patches(AgentRunner.run),
        "agents.AgentRunner.run_streamed": patches(AgentRunner.run_streamed),
        "langgraph.Pregel.stream": patches(Pregel.stream),
    }


def import_frameworks() -> None:
    import agents  # noqa: F401
    import anthropic  # noqa: F401
    import langgraph.graph  # noqa: F401
    import openai  # noqa: F401


class Instrumentors:
    def __init__(self, bundle_dir: str) -> None:
        from otel_session.instrument.agents_sdk import AgentsSdkInstrumentor
        from otel_session.instrument.instrumentor import OtelSessionInstrumentor
        from otel_session.instrument.langgraph import LangGraphInstrumentor

        self.bundle_dir = bundle_dir
        self.all = (OtelSessionInstrumentor(), AgentsSdkInstrumentor(), LangGraphInstrumentor())

    def instrument(self) -> None:
        session, *frameworks = self.all
        session.instrument(bundle_dir=self.bundle_dir)
        for instrumentor in frameworks:
            instrumentor.instrument()

    def uninstrument(self) -> None:
        for instrumentor in self.all:
            instrumentor.uninstrument()


def graph_runs(bundle_dir: str) -> list[str | None]:
    """Invoke a one-node LangGraph graph; the agents of the runs recorded in ``bundle_dir``."""
    from langgraph.graph import END, START, StateGraph

    import otel_session
    from otel_session.bundle.read import find_bundles, read_bundle

    class State(TypedDict):
        date: str

    graph = StateGraph(State)
    graph.add_node("ask", lambda state: {"date": "Friday"})
    graph.add_edge(START, "ask")
    graph.add_edge("ask", END)
    graph.compile(name="booking").invoke({"date": ""})
    recorder = otel_session.current_recorder()
    assert recorder is not None
    recorder.force_flush()
    return [read_bundle(path).manifest.get("agent") for path in find_bundles([bundle_dir])]


def main(scenario: str, bundle_dir: str) -> dict[str, Any]:
    instrumentors = Instrumentors(bundle_dir)
    if scenario == "after":
        instrumentors.instrument()
        imported = [name for name in FRAMEWORKS if name in sys.modules]
        import_frameworks()
        return {"imported_by_instrument": imported, "patched": patched(), "graph_runs": graph_runs(bundle_dir)}
    if scenario == "cancelled":
        instrumentors.instrument()
        instrumentors.uninstrument()
        import_frameworks()
        return {"patched": patched()}
    if scenario == "before":
        import_frameworks()
        instrumentors.instrument()
        first = patched()
        instrumentors.uninstrument()
        undone = patched()
        instrumentors.instrument()
        return {"patched": first, "undone": undone, "again": patched()}
    raise SystemExit(f"unknown scenario {scenario!r}")


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:])))
