"""Real LangGraph graphs recorded with no change to their code: a plain-Python booking graph (state
channels as slots, its conditional edge as verdicts, one run per invocation in the thread's
session, required slots declared to the instrumentor), human-in-the-loop (``interrupt()`` and
``Command(resume=…)``), and a tool-calling chat model (``ChatOpenAI`` pointed at the mock LLM,
streamed) — in process and through the collector."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Annotated, Any, Literal, TypedDict

import pytest

from otel_session.replay.facts import build_session_wide_facts
from otel_session.bundle.read import BundleStatus
from otel_session.testing import capture_bundle

from .conftest import example, sealed_bundles, turns_of

langgraph = pytest.importorskip("langgraph")
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, StateGraph, add_messages  # noqa: E402
from langgraph.types import Command, interrupt  # noqa: E402

from langchain_core.tools import tool  # noqa: E402 - langgraph's dependency

from otel_session.instrument.langgraph import LangGraphInstrumentor  # noqa: E402

REQUIRED = {"booking": ["date", "party_size"]}
booking_graph = example("langgraph_booking").build  # the example's graph: plain-Python nodes, no model


@pytest.fixture
def instrumented() -> Iterator[None]:
    instrumentor = LangGraphInstrumentor()
    instrumentor.instrument(required_slots=REQUIRED)
    yield
    instrumentor.uninstrument()


def talk(graph: Any, thread: str, *lines: str) -> None:
    for line in lines:
        graph.invoke({"messages": [("user", line)]}, {"configurable": {"thread_id": thread}})


def assert_the_conversation(runs: list[Any]) -> None:
    """Three invocations of thread ``call-1``: asked for the date twice, then booked."""
    assert [run.status for run in runs] == [BundleStatus.COMPLETE] * 3, [run.diagnostics for run in runs]
    assert {run.session_id for run in runs} == {"call-1"}
    assert len({run.run_id for run in runs}) == 3
    first, second, third = (turns_of(run)[0] for run in runs)
    assert [(m["role"], m["text"]) for m in first["messages"]] == [
        ("user", "a table for two"), ("assistant", "Which day would you like?")]
    assert [(w["slot"], w["source"]) for w in first["slot_writes"]] == [("attempts", "understand"), ("party_size", "understand")]
    assert "messages" not in first["slots"]
    assert first["verdict"]["from"] == "understand" and first["verdict"]["to"] == "ask_date"
    assert first["verdict"]["candidates"] == ["ask_date", "ask_party_size", "confirm"]
    assert first["verdict"]["reason"] == "conditional edge next_step"
    assert (first["state_before"], first["state"]) == ("__start__", "ask_date")
    assert first["required_slots_in_state"] == ["date", "party_size"]
    assert first["missing_required_slots"] == ["date"]
    # the reducer (operator.add) merged 1 into 1: a change no node returned
    assert [d["slot"] for d in second["unattributed_diffs"]] == ["attempts"]
    assert second["missing_required_slots"] == ["date"]
    assert third["missing_required_slots"] == []
    assert [(w["slot"], w["source"]) for w in third["slot_writes"]] == [("attempts", "understand"), ("date", "understand")]
    assert third["verdict"]["to"] == "confirm"
    assert third["messages"][-1]["text"] == "Booked for 2 on friday."


def test_each_invocation_is_a_run_of_the_threads_session_with_slots_and_verdicts(instrumented):
    graph = booking_graph()
    with capture_bundle() as captured:
        talk(graph, "call-1", "a table for two", "as soon as possible", "friday then")
    assert_the_conversation(captured.bundles)


def test_asked_twice_is_a_repeated_ask_across_the_runs_of_the_thread(instrumented):
    graph = booking_graph()
    with capture_bundle() as captured:
        talk(graph, "call-1", "a table for two", "as soon as possible", "friday then")
    facts = build_session_wide_facts(captured.root, "call-1")
    assert [turn["repeated_asks"] for turn in facts["turns"]] == [[], ["date"], []]
    assert [(turn["state_before"], turn["state"]) for turn in facts["turns"]] == [
        ("__start__", "ask_date"), ("ask_date", "ask_date"), ("ask_date", "confirm")]
    assert [turn["run_id"] for turn in facts["turns"]] == [run.run_id for run in captured.bundles]


def test_through_the_collector(instrumented, through_collector):
    root, _ = through_collector()
    talk(booking_graph(), "call-1", "a table for two", "as soon as possible", "friday then")
    assert_the_conversation(sealed_bundles(root, 3))


class Approval(TypedDict, total=False):
    messages: Annotated[list, add_messages]
    date: str | None


def ask(state: Approval) -> Command[Literal["book"]]:
    answer = interrupt("Which day? (call-back number 555-0100 on file)")
    return Command(goto="book", update={"messages": [("user", answer)], "date": answer})


def book(state: Approval) -> dict[str, Any]:
    return {"messages": [("assistant", f"Booked for {state['date']}.")]}


def test_an_interrupt_and_its_resume_are_verdicts_and_the_resume_continues_the_session(instrumented):
    graph = StateGraph(Approval)
    graph.add_node(ask)
    graph.add_node(book)
    graph.add_edge(START, "ask")
    graph.add_edge("book", END)
    app = graph.compile(checkpointer=InMemorySaver(), name="approval")
    config = {"configurable": {"thread_id": "call-2"}}
    with capture_bundle() as captured:
        app.invoke({"messages": [("user", "book me in")]}, config)
        app.invoke(Command(resume="friday"), config)
    paused, resumed = (turns_of(run)[0] for run in captured.bundles)
    assert {run.session_id for run in captured.bundles} == {"call-2"}
    assert paused["verdict"] == {"from": "ask", "to": "__interrupt__", "reason": "Which day? (call-back number [phone] on file)",
                                 "candidates": [], "candidates_truncated": 0, "seq": paused["verdict"]["seq"]}
    assert paused["state"] == "ask"
    assert resumed["state_before"] == "ask"
    assert [(m["role"], m["text"]) for m in resumed["messages"]] == [("user", "friday"), ("assistant", "Booked for friday.")]
    command = next(e["payload"] for e in captured.bundles[1].events if e["type"] == "transition_verdict")
    assert (command["from"], command["to"], command["reason"], command["candidates"]) == ("ask", "book", "command", ["book"])
    assert [(w["slot"], w["source"]) for w in resumed["slot_writes"]] == [("date", "ask")]


@tool
def check_availability(query: str) -> str:
    """Free tables on a day."""
    return "19:00 is free"


def tool_calling_graph(agent: Any) -> Any:
    """A graph whose node ``agent`` calls a model bound to ``check_availability``: the tool when the
    model asks for it, then ``agent`` again."""
    from langgraph.graph import MessagesState
    from langgraph.prebuilt import ToolNode, tools_condition

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([check_availability]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph


def test_a_streamed_tool_calling_chat_model_in_nodes_is_messages_deltas_and_a_tool(instrumented):
    from langchain_openai import ChatOpenAI
    from langgraph.graph import MessagesState

    from otel_session.demo.mock_llm import MODEL, MockLLMServer

    with MockLLMServer() as llm:
        model = ChatOpenAI(model=MODEL, base_url=llm.base_url, api_key="unused", streaming=True)
        model = model.bind_tools([check_availability])

        async def agent(state: MessagesState) -> dict[str, Any]:
            return {"messages": [await model.ainvoke(state["messages"])]}

        app = tool_calling_graph(agent).compile(name="assistant")
        with capture_bundle() as captured:
            result = asyncio.run(app.ainvoke({"messages": [("user", "friday for two")]}))
    assert result["messages"][-1].content == "check_availability says: 19:00 is free"
    bundle = captured.bundle
    assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
    assert bundle.session_id == bundle.run_id  # no thread id, no session around: a session of its own
    (turn,) = turns_of(bundle)
    assert [(m["role"], m["text"]) for m in turn["messages"]] == [
        ("user", "friday for two"), ("assistant", ""), ("tool", "19:00 is free"),
        ("assistant", "check_availability says: 19:00 is free")]
    assert [(t["name"], t["status"]) for t in turn["tools"]] == [("check_availability", "ok")]
    calls = [e for e in bundle.events if e["type"] == "tool_execution_started"]
    assert calls[0]["payload"] == {"name": "check_availability", "arguments": {"query": "friday for two"}}
    assert calls[0]["tool_call_id"].startswith("call_")
    deltas = [e["payload"]["delta"] for e in bundle.events if e["type"] == "assistant_delta"]
    assert "".join(deltas) == "check_availability says: 19:00 is free" and len(deltas) >= 5
    verdicts = [e["payload"] for e in bundle.events if e["type"] == "transition_verdict"]
    assert [(v["from"], v["to"], v["candidates"]) for v in verdicts] == [
        ("agent", "tools", ["tools", "__end__"]), ("agent", "__end__", ["tools", "__end__"])]
    assert not [e for e in bundle.events if e["type"] == "slot_write"]  # a messages channel is not a slot
    model_spans = [s for s in captured.spans if s.name == "message assistant"]
    assert {s.attributes.get("gen_ai.response.model") for s in model_spans} == {MODEL}


@pytest.fixture
def openai_v2(monkeypatch) -> Any:
    """The official openai-v2 instrumentor's module, its messages on its spans (as zero-code users run it)."""
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    return pytest.importorskip("opentelemetry.instrumentation.openai_v2")


def hello_to_a_streamed_chat_model(openai_v2: Any, *, tap: bool = False) -> Any:
    """The captured bundles of a one-node graph whose langchain-openai model streams its reply, the
    openai-v2 instrumentor on (and the ``otel_session`` instrumentor's stream tap, if ``tap``)."""
    from langchain_openai import ChatOpenAI
    from langgraph.graph import MessagesState
    from opentelemetry.sdk.trace import TracerProvider

    from otel_session.demo.mock_llm import MODEL, MockLLMServer
    from otel_session.instrument import openai_streams

    provider = TracerProvider()
    instrumentor = openai_v2.OpenAIInstrumentor()
    with MockLLMServer() as llm, capture_bundle(tracer_provider=provider) as captured:
        instrumentor.instrument(tracer_provider=provider)
        if tap:
            openai_streams.install()  # what opentelemetry-instrument's otel_session entry point does
        try:
            model = ChatOpenAI(model=MODEL, base_url=llm.base_url, api_key="unused", streaming=True)
            graph = StateGraph(MessagesState)
            graph.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
            graph.add_edge(START, "agent")
            graph.add_edge("agent", END)
            graph.compile(name="assistant").invoke({"messages": [("user", "hello there")]})
        finally:
            if tap:
                openai_streams.uninstall()
            instrumentor.uninstrument()
    return captured


def test_a_chat_model_the_openai_v2_instrumentor_records_is_not_recorded_twice(instrumented, openai_v2):
    captured = hello_to_a_streamed_chat_model(openai_v2)
    (turn,) = turns_of(captured.bundle)
    replies = [m["text"] for m in turn["messages"] if m["role"] == "assistant"]
    assert replies == ["You said: hello there"]  # from the chat span, joined to the run
    assert "chat mock-gpt" in {span.name for span in captured.spans}


def book_with_a_tool_calling_model(openai_v2: Any, provider: Any) -> None:
    """Two invocations of thread ``call-9`` of a graph whose model (langchain-openai, the openai-v2
    instrumentor on) is prompted with a system message of the node's own, and calls a tool."""
    from langchain_core.messages import SystemMessage
    from langchain_openai import ChatOpenAI
    from langgraph.graph import MessagesState

    from otel_session.demo.mock_llm import MODEL, MockLLMServer

    instrumentor = openai_v2.OpenAIInstrumentor()
    with MockLLMServer() as llm:
        instrumentor.instrument(tracer_provider=provider)
        try:
            model = ChatOpenAI(model=MODEL, base_url=llm.base_url, api_key="unused").bind_tools([check_availability])

            def agent(state: MessagesState) -> dict[str, Any]:
                return {"messages": [model.invoke([SystemMessage("You book tables."), *state["messages"]])]}

            app = tool_calling_graph(agent).compile(checkpointer=InMemorySaver(), name="assistant")
            talk(app, "call-9", "friday for two", "and for three?")
        finally:
            instrumentor.uninstrument()


def assert_each_message_once(runs: list[Any]) -> None:
    """The turn's user message (the graph's input, also the chat span's) and the tool's (a node's
    update, also the next call's input) once each; the node's system prompt, on the chat span
    only, as before; the earlier turn not again."""
    assert [run.status for run in runs] == [BundleStatus.COMPLETE] * 2, [run.diagnostics for run in runs]
    first, second = ([(m["role"], m["text"]) for m in turns_of(run)[0]["messages"]] for run in runs)
    assert first == [("user", "friday for two"), ("system", "You book tables."), ("assistant", ""),
                     ("tool", "19:00 is free"), ("assistant", "check_availability says: 19:00 is free")]
    assert second == [("user", "and for three?"), ("assistant", ""), ("tool", "19:00 is free"),
                      ("assistant", "check_availability says: 19:00 is free")]


def test_with_the_openai_v2_instrumentor_each_message_of_the_turn_is_recorded_once(instrumented, openai_v2):
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    with capture_bundle(tracer_provider=provider) as captured:
        book_with_a_tool_calling_model(openai_v2, provider)
    assert_each_message_once(captured.bundles)
    assert "chat mock-gpt" in {span.name for span in captured.spans}


def test_with_the_openai_v2_instrumentor_each_message_is_recorded_once_through_the_collector(
    instrumented, openai_v2, through_collector
):
    root, provider = through_collector()
    book_with_a_tool_calling_model(openai_v2, provider)
    assert_each_message_once(sealed_bundles(root, 2))


def test_zero_code_a_streamed_calls_inputs_journaled_live_are_not_a_second_user_message(instrumented, openai_v2):
    captured = hello_to_a_streamed_chat_model(openai_v2, tap=True)
    assert [e["type"] for e in captured.bundle.events].count("assistant_delta") >= 2  # journaled live
    (turn,) = turns_of(captured.bundle)
    assert [(m["role"], m["text"]) for m in turn["messages"]] == [("user", "hello there"),
                                                                    ("assistant", "You said: hello there")]


def test_without_a_thread_id_an_invocation_joins_the_session_the_app_is_in(instrumented):
    import otel_session

    with capture_bundle() as captured, otel_session.session("call-3"):
        booking_graph().builder.compile(name="booking").invoke({"messages": [("user", "a table for two")]})
    assert captured.bundle.session_id == "call-3"
    (turn,) = turns_of(captured.bundle)  # no checkpointer: the state after is the graph's output
    assert turn["verdict"]["to"] == "ask_date" and turn["missing_required_slots"] == ["date"]


def test_an_edge_that_may_go_anywhere_lists_every_node_capped_at_24_and_counted(instrumented):
    class Counter(TypedDict, total=False):
        hops: int

    from langchain_core.runnables import RunnableLambda

    inner_chain = RunnableLambda(lambda hops: hops + 1)  # a runnable the node's own code runs: no edge
    graph = StateGraph(Counter)
    graph.add_node("start", lambda state: {"hops": inner_chain.invoke(state["hops"])})
    for index in range(30):
        graph.add_node(f"n{index:02}", lambda state: {})
        graph.add_edge(f"n{index:02}", END)
    graph.add_edge(START, "start")
    graph.add_conditional_edges("start", lambda state: "n07")  # no path map, no Literal: any node
    with capture_bundle() as captured:
        graph.compile(name="fan").invoke({"hops": 0})
    (verdict,) = [e["payload"] for e in captured.bundle.events if e["type"] == "transition_verdict"]
    assert (verdict["from"], verdict["to"]) == ("start", "n07")
    assert verdict["candidates"] == ["start", *[f"n{index:02}" for index in range(23)]]
    assert verdict["candidates_truncated"] == 32 - 24  # 31 nodes and __end__
