"""The deterministic OpenAI-compatible mock LLM (shared with the demo)."""

from __future__ import annotations

import urllib.error
import urllib.request

import orjson
import pytest

from otel_session.demo.mock_llm import MockLLMServer


@pytest.fixture(scope="module")
def llm():
    with MockLLMServer() as server:
        yield server


def call(llm, body: dict) -> bytes:
    request = urllib.request.Request(
        f"{llm.base_url}/chat/completions", data=orjson.dumps(body), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read()


def test_replies_are_byte_for_byte_deterministic(llm):
    body = {"model": "mock-gpt", "messages": [{"role": "user", "content": "hi"}]}
    assert call(llm, body) == call(llm, body)
    assert orjson.loads(call(llm, body))["choices"][0]["message"]["content"] == "You said: hi"


def test_streaming_chunks_fold_to_the_tool_call(llm):
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]
    body = {"model": "mock-gpt", "stream": True, "messages": [{"role": "user", "content": "friday"}], "tools": tools}
    events = [line[6:] for line in call(llm, body).split(b"\n\n") if line.startswith(b"data: ")]
    assert events[-1] == b"[DONE]"
    chunks = [orjson.loads(event) for event in events[:-1]]
    arguments = "".join(
        call_delta["function"].get("arguments", "")
        for chunk in chunks
        for call_delta in chunk["choices"][0]["delta"].get("tool_calls", ())
    )
    assert orjson.loads(arguments) == {"query": "friday"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_bad_requests_get_openai_style_errors(llm):
    request = urllib.request.Request(f"{llm.base_url}/chat/completions", data=b"[]")
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(request, timeout=10)
    assert error.value.code == 400
    assert "messages" in orjson.loads(error.value.read())["error"]["message"]
