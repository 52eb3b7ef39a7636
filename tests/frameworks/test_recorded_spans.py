"""Spans real frameworks emitted (``fixtures/frameworks``, recorded by ``agent_<framework>.py``
against the mock LLM) read into journals: one table row per framework and mode.

What every row checks, across the whole session: each user message journaled once (no model
call's history journaled again, no agent span taken for a model call, no junk input), only the
journal's roles, each tool executed once with its arguments unwrapped and linked to the model's
call with the same id and arguments, the replies' texts, and model and tokens where the framework
gives them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from .journals import executions, messages, recorded_runs, replies, tool_calls

MODEL = "mock-gpt"
ROLES = {"system", "user", "assistant", "tool"}


@dataclass(frozen=True)
class Case:
    fixture: str
    users: list[str]
    """The user messages of the session, in order."""
    tools: list[tuple[str, dict[str, Any]]]
    """(name, arguments) of each tool execution, in order."""
    answers: list[str] = field(default_factory=list)
    """The texts of the assistant's replies that have text, in order."""
    results: list[Any] | None = None
    """The tools' results, in order (None: not checked)."""
    model: str = MODEL
    usage: bool = True
    """Whether each reply counts its tokens (every reply names the model)."""
    runs: int = 2

    def __str__(self) -> str:
        return self.fixture


CASES = [
    Case(
        "smolagents/spans.jsonl",
        users=["New task:\nwhat is on the menu friday", "New task:\nand on saturday"],
        tools=[
            ("lookup", {"query": "New task:\nwhat is on the menu friday"}),
            ("final_answer", {"answer": "lookup says: Observation:\nfish for friday"}),
            ("lookup", {"query": "Observation:\nlookup says: Observation:\nfish for friday\nNew task:\nand on saturday"}),
            ("final_answer", {"answer": "lookup says: Observation:\nfish for saturday"}),
        ],
    ),
    *(
        Case(
            fixture,
            users=["what is on the menu friday", "and on saturday"],
            tools=[("lookup", {"query": "what is on the menu friday"}), ("lookup", {"query": "and on saturday"})],
            answers=["lookup says: fish for friday", "lookup says: fish for saturday"],
            results=["fish for friday", "fish for saturday"],
        )
        for fixture in ("strands/spans.jsonl", "strands/spans-latest.jsonl")
    ),
    Case(
        "llamaindex/spans.jsonl",  # each run a context of its own: its system prompt journaled again
        users=["what is on the menu friday", "and on saturday"],
        tools=[("lookup", {"query": "what is on the menu friday"}), ("lookup", {"query": "and on saturday"})],
        answers=["lookup says: fish for friday", "lookup says: fish for saturday"],
        usage=False,  # streamed without usage: the model only
    ),
    Case(
        "autogen/spans.jsonl",  # AutoGen's own spans beside OpenInference's; create_agent a run of its own
        users=["what is on the menu friday", "and on saturday"],
        tools=[("lookup", {"query": "what is on the menu friday"}), ("lookup", {"query": "and on saturday"})],
        answers=["lookup says: fish for friday", "lookup says: fish for saturday"],
        # Not checked: the execution kept is the one whose span came first, and AutoGen's own span
        # (inside OpenInference's, so exported first span by span) gives no result.
        runs=3,
    ),
    Case(
        "adk/spans.jsonl",  # content as log events (capture ``true``): the tool span names only its call
        users=["what is on the menu friday", "and on saturday"],
        tools=[("lookup", {"query": "what is on the menu friday"}), ("lookup", {"query": "and on saturday"})],
        answers=['lookup says: {"result": "fish for friday"}', 'lookup says: {"result": "fish for saturday"}'],
        model="openai/mock-gpt",  # LiteLLM's name of the model
    ),
    Case(
        "adk/spans-span-only.jsonl",  # content on the spans (``SPAN_ONLY``): the tool span's own too
        users=["what is on the menu friday", "and on saturday"],
        tools=[("lookup", {"query": "what is on the menu friday"}), ("lookup", {"query": "and on saturday"})],
        answers=['lookup says: {"result": "fish for friday"}', 'lookup says: {"result": "fish for saturday"}'],
        results=[{"result": "fish for friday"}, {"result": "fish for saturday"}],
        model="openai/mock-gpt",
    ),
    Case(
        "pydanticai/spans.jsonl",  # both runs inside the app's span naming the session: one trace
        users=["what is on the menu friday", "and on saturday"],
        tools=[("lookup", {"query": "what is on the menu friday"}), ("lookup", {"query": "and on saturday"})],
        answers=["lookup says: fish for friday", "lookup says: fish for saturday"],
        results=["fish for friday", "fish for saturday"],
        runs=1,
    ),
]


def assert_users(case: Case, runs: list[list[dict[str, Any]]]) -> None:
    assert len(runs) == case.runs
    said = [message for events in runs for message in messages(events)]
    assert {role for role, _ in said} <= ROLES
    assert [text for role, text in said if role == "user"] == case.users


def assert_tools(case: Case, runs: list[list[dict[str, Any]]]) -> None:
    done = [execution for events in runs for execution in executions(events)]
    assert [(name, arguments) for _, name, arguments, _ in done] == case.tools
    for events in runs:
        asked = {call["id"]: call for call in tool_calls(events)}
        done_here = executions(events)
        for call_id, name, arguments, _ in done_here:
            assert call_id in asked, f"{name} answers no call the model asked for"
            assert (asked[call_id]["name"], asked[call_id]["arguments"]) == (name, arguments)
        assert len({call_id for call_id, *_ in done_here}) == len(done_here)
    if case.results is not None:
        assert [result for *_, result in done] == case.results


def assert_replies(case: Case, runs: list[list[dict[str, Any]]]) -> None:
    said = [payload for events in runs for payload in replies(events)]
    assert said, "no reply journaled"
    texts = ["".join(b["text"] for b in payload["content"] if b["kind"] == "text") for payload in said]
    assert [text for text in texts if text] == case.answers
    for payload in said:
        assert payload.get("model") == case.model
        if case.usage:
            assert payload["usage"]["input_tokens"] > 0 and payload["usage"]["output_tokens"] > 0


@pytest.fixture(params=CASES, ids=str)
def case(request) -> Case:
    return request.param


@pytest.fixture
def runs(case, tmp_path) -> list[list[dict[str, Any]]]:
    return recorded_runs(case.fixture, tmp_path)


def test_each_user_message_once_in_the_journals_roles(case, runs):
    assert_users(case, runs)


def test_each_tool_once_with_its_arguments_linked_to_its_call(case, runs):
    assert_tools(case, runs)


def test_replies_with_their_model_and_tokens(case, runs):
    assert_replies(case, runs)
