"""A LangGraph booking graph recorded by otel-session with no otel-session code in it.

Run it under ``opentelemetry-instrument``, which loads the ``otel_session`` and
``otel_session_langgraph`` instrumentors (``pip install 'otel-session[langgraph]'``)::

    OTEL_SESSION_DIR=./otel-session-data OTEL_TRACES_EXPORTER=none OTEL_METRICS_EXPORTER=none \\
    OTEL_SESSION_REQUIRED_SLOTS='booking=date,party_size' \\
        opentelemetry-instrument python docs/examples/langgraph_booking.py

    otel-session facts call-1 --dir ./otel-session-data        # the last run's facts
    otel-session facts call-1 --all-runs --dir ./otel-session-data   # all three, repeated asks

Each ``invoke`` on thread ``call-1`` is a run of session ``call-1``; the graph's state channels
are slots (each update attributed to the node that returned it), its conditional edge is the
turn's verdict, and the declared required slots say what is still missing: the user is asked for
the date twice before the table is booked. The bundles are sealed when the process exits.
"""

from __future__ import annotations

import operator
import re
from typing import Annotated, Any, Literal, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph, add_messages

THREAD = "call-1"
CALLER = ["a table for two", "as soon as possible", "friday then"]


class Booking(TypedDict, total=False):
    messages: Annotated[list, add_messages]
    date: str | None
    party_size: int | None
    attempts: Annotated[int, operator.add]


def understand(state: Booking) -> dict[str, Any]:
    """Read the date and the party size from the caller's last message."""
    text = state["messages"][-1].content
    update: dict[str, Any] = {"attempts": 1}
    if day := re.search(r"monday|friday|saturday", text):
        update["date"] = day.group()
    if "two" in text:
        update["party_size"] = 2
    return update


def next_step(state: Booking) -> Literal["ask_date", "ask_party_size", "confirm"]:
    if not state.get("date"):
        return "ask_date"
    return "confirm" if state.get("party_size") else "ask_party_size"


def ask_date(state: Booking) -> dict[str, Any]:
    return {"messages": [("assistant", "Which day would you like?")]}


def ask_party_size(state: Booking) -> dict[str, Any]:
    return {"messages": [("assistant", "For how many?")]}


def confirm(state: Booking) -> dict[str, Any]:
    return {"messages": [("assistant", f"Booked for {state['party_size']} on {state['date']}.")]}


def build() -> Any:
    graph = StateGraph(Booking)
    for node in (understand, ask_date, ask_party_size, confirm):
        graph.add_node(node)
    graph.add_edge(START, "understand")
    graph.add_conditional_edges("understand", next_step)
    for node in ("ask_date", "ask_party_size", "confirm"):
        graph.add_edge(node, END)
    return graph.compile(checkpointer=InMemorySaver(), name="booking")


def main() -> None:
    graph = build()
    for line in CALLER:
        state = graph.invoke({"messages": [("user", line)]}, {"configurable": {"thread_id": THREAD}})
        print(f"caller: {line!r} -> agent: {state['messages'][-1].content!r}")


if __name__ == "__main__":
    main()
