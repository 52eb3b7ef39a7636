"""The Agents SDK's run context (``Runner.run(context=…)``, what tools see as
``RunContextWrapper.context``) read as slots with no code in the agents: the fields it starts with
are ``input`` writes, each field a tool changes is that tool's write, and the required slots
declared for the agent (``OTEL_SESSION_REQUIRED_SLOTS``) give each SDK turn its missing ones — in
process and through the collector."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from otel_session.core.config import ENV_REQUIRED_SLOTS
from otel_session.demo.mock_llm import MODEL, MockLLMServer, Reply, ToolCall, canned_reply
from otel_session.testing import capture_bundle

from .conftest import sealed_bundles, turns_of

agents = pytest.importorskip("agents")
from openai import AsyncOpenAI  # noqa: E402

from otel_session.instrument.agents_sdk import AgentsSdkInstrumentor  # noqa: E402

CONTACT = "ann@example.com"


@dataclasses.dataclass
class Booking:
    party_size: int | None = None
    contact: str | None = None
    date: str | None = None
    time: str | None = None
    notes: list[str] = dataclasses.field(default_factory=list)


class PydanticBooking(BaseModel):
    party_size: int | None = None
    contact: str | None = None
    date: str | None = None
    time: str | None = None
    notes: list[str] = []


@agents.function_tool
def set_date(ctx: agents.RunContextWrapper[Any], day: str) -> str:
    """Note the day of the booking."""
    if isinstance(ctx.context, dict):
        ctx.context["date"] = day
    else:
        ctx.context.date = day
    notes = ctx.context["notes"] if isinstance(ctx.context, dict) else ctx.context.notes
    notes.append(f"asked for {day}")  # a change in place is seen too
    return f"{day} noted"


def scripted(request: dict[str, Any]) -> Reply:
    """The booker sets the date once, then answers."""
    messages = request["messages"]
    if messages[-1]["role"] == "user":
        return Reply(None, (ToolCall("call_date", "set_date", '{"day": "friday"}'),), "tool_calls", 9, 2)
    return canned_reply(request)


@pytest.fixture
def booker(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv(ENV_REQUIRED_SLOTS, "booker=party_size,date,time")
    agents.set_trace_processors([])
    instrumentor = AgentsSdkInstrumentor()
    instrumentor.instrument()
    with MockLLMServer(responder=scripted) as llm:
        model = agents.OpenAIChatCompletionsModel(model=MODEL, openai_client=AsyncOpenAI(base_url=llm.base_url, api_key="x"))
        yield agents.Agent(name="booker", model=model, tools=[set_date])
    instrumentor.uninstrument()


def assert_context_slots(turns: list[dict[str, Any]]) -> None:
    first, second = turns  # the SDK's turns: the tool call, then the answer
    writes = [(w["slot"], w["source"]) for w in first["slot_writes"]]
    assert writes == [("party_size", "input"), ("contact", "input"), ("notes", "input"),
                      ("date", "set_date"), ("notes", "set_date")]
    assert [w["value"] for w in first["slot_writes"] if w["slot"] == "contact"] != [CONTACT]
    assert first["required_slots_in_state"] == second["required_slots_in_state"] == ["party_size", "date", "time"]
    assert first["missing_required_slots"] == second["missing_required_slots"] == ["time"]
    assert second["slot_writes"] == []


@pytest.mark.parametrize("context_type", [Booking, PydanticBooking], ids=["dataclass", "pydantic"])
def test_the_context_is_slots_in_process(booker, context_type):
    context = context_type(party_size=2, contact=CONTACT)
    with capture_bundle() as captured:
        agents.Runner.run_sync(booker, "a table on friday", context=context)
    assert context.date == "friday"  # the app's run is its own
    (bundle,) = captured.bundles
    assert_context_slots(turns_of(bundle))
    assert CONTACT.encode() not in b"".join(p.read_bytes() for p in captured.root.rglob("*") if p.is_file())


def test_a_dict_context_and_one_without_fields(booker):
    with capture_bundle() as captured:
        agents.Runner.run_sync(booker, "a table on friday", context={"party_size": 2, "notes": []})
        agents.Runner.run_sync(booker, "a table on friday")  # no context: no slots, missing unknown
    with_dict, without = (turns_of(bundle) for bundle in captured.bundles)
    assert [(w["slot"], w["source"]) for w in with_dict[0]["slot_writes"]] == [
        ("party_size", "input"), ("notes", "input"), ("notes", "set_date"), ("date", "set_date")]  # field order
    assert with_dict[0]["missing_required_slots"] == ["time"]
    assert without[0]["slot_writes"] == [] and without[0]["missing_required_slots"] is None


def test_the_context_is_slots_through_the_collector(booker, through_collector):
    root, _ = through_collector()
    agents.Runner.run_sync(booker, "a table on friday", context=Booking(party_size=2, contact=CONTACT))
    (bundle,) = sealed_bundles(root, 1)
    assert_context_slots(turns_of(bundle))


class Unreadable:
    """A context whose fields cannot be read once the run is under way."""

    def __init__(self) -> None:
        self.date: str | None = None
        self.notes: list[str] = []
        self.reads = 0

    def model_dump(self) -> dict[str, Any]:
        self.reads += 1
        if self.reads > 2:  # the run's start reads it twice
            raise RuntimeError("no dump")
        return {"date": self.date, "party_size": 2}


def test_a_context_that_cannot_be_read_never_breaks_the_run(booker, caplog):
    context = Unreadable()
    with capture_bundle() as captured:
        result = agents.Runner.run_sync(booker, "a table on friday", context=context)
    assert context.date == "friday" and result.final_output
    (bundle,) = captured.bundles
    assert bundle.capture["status"] == "complete" and bundle.events[-1]["payload"] == {"status": "ok"}
    first, second = turns_of(bundle)
    assert first["finished"] and second["finished"]
    assert [(w["slot"], w["source"]) for w in first["slot_writes"]] == [("party_size", "input")]  # none as None
    assert first["missing_required_slots"] == second["missing_required_slots"] == ["date", "time"]
    assert caplog.text.count("a run's state object could not be read") == 1
