"""The mock LLM's Responses API, read by the real openai client: plain, streamed, tools, reasoning."""

from __future__ import annotations

import pytest

from otel_session.demo.mock_llm import MockLLMServer

openai = pytest.importorskip("openai")

TOOLS = [{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}]


@pytest.fixture(scope="module")
def client():
    with MockLLMServer() as llm:
        yield openai.OpenAI(base_url=llm.base_url, api_key="unused")


def test_a_response_answers_and_counts_tokens(client):
    response = client.responses.create(model="mock-gpt", input="hello there", instructions="Be brief.")
    assert response.output_text == "You said: hello there"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (4, 4)


def test_a_streamed_response_streams_reasoning_text_and_arguments(client):
    stream = client.responses.create(model="mock-gpt", input="hi", stream=True, reasoning={"effort": "low"})
    events = list(stream)
    deltas = [(event.type, event.delta) for event in events if event.type.endswith(".delta")]
    assert deltas == [
        ("response.reasoning_summary_text.delta", "Thinking "),
        ("response.reasoning_summary_text.delta", "about: "),
        ("response.reasoning_summary_text.delta", "hi"),
        ("response.output_text.delta", "You "),
        ("response.output_text.delta", "said: "),
        ("response.output_text.delta", "hi"),
    ]
    assert events[-1].type == "response.completed" and events[-1].response.output_text == "You said: hi"
    assert [event.sequence_number for event in events] == list(range(len(events)))

    with client.responses.stream(model="mock-gpt", input="find x", tools=TOOLS) as streamed:
        arguments = "".join(e.delta for e in streamed if e.type == "response.function_call_arguments.delta")
        (call,) = streamed.get_final_response().output
    assert arguments == call.arguments == '{"query":"find x"}'


def test_tool_results_in_the_input_are_answered(client):
    (call,) = client.responses.create(model="mock-gpt", input="find x", tools=TOOLS).output
    response = client.responses.create(
        model="mock-gpt", tools=TOOLS,
        input=[{"role": "user", "content": "find x"}, call.model_dump(),
               {"type": "function_call_output", "call_id": call.call_id, "output": "x is here"}],
    )
    assert response.output_text == "lookup says: x is here"
