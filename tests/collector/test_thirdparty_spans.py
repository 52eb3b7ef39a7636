"""What the real third-party instrumentations emit, through OTLP and the collector, into bundles.

Each scenario of ``thirdparty_agent.py`` runs in the third-party venv (``thirdparty_venv.py``):
OpenInference's openai and openai-agents instrumentors, Traceloop (OpenLLMetry) with its openai
instrumentor and ``@tool``, LangChain traced by OpenInference, all against the mock LLM on
loopback, exporting to a real collector. The bundles must hold each reply once, the stop reason,
the model and token usage, tool executions with clean arguments linked to the model's tool call,
and the agent's name on the run.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from otel_session.demo.mock_llm import MockLLMServer
from otel_session.bundle.read import BundleStatus

from .conftest import sealed_bundles
from .thirdparty_venv import thirdparty_python

pytestmark = pytest.mark.slow

AGENT = Path(__file__).with_name("thirdparty_agent.py")
ENV = {
    **{key: value for key, value in os.environ.items() if not key.startswith("OTEL_")},
    "TRACELOOP_TELEMETRY": "false",
    # The batch processor holds each run until the scenario's force_flush: its 5-s timer firing in
    # the middle of a run slowed by a loaded machine would send the run's first spans without the
    # span that names its agent (run.json's agent comes from the request that opens the run,
    # docs/conventions.md), and the test would depend on the machine's speed.
    "OTEL_BSP_SCHEDULE_DELAY": "120000",
}


@pytest.fixture(scope="module")
def python() -> Path:
    return thirdparty_python()


def run_scenario(python: Path, scenario: str, collector, runs: int, bundle_root: Path, env: dict | None = None):
    """Run ``scenario`` against the mock LLM and the collector: (tool call id, bundles by agent)."""
    with MockLLMServer() as llm:
        done = subprocess.run(
            [str(python), str(AGENT), scenario, str(collector.grpc_port), llm.base_url, f"s-{scenario}"],
            capture_output=True, text=True, timeout=300, env={**ENV, **(env or {})},
        )
    assert done.returncode == 0, done.stderr[-3000:]
    bundles = sealed_bundles(bundle_root, runs)
    assert len(bundles) == runs
    for bundle in bundles:
        assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
        assert bundle.session_id == f"s-{scenario}"
    return done.stdout.split()[-1], sorted(bundles, key=lambda bundle: bundle.manifest["created_at"])


def messages(bundle) -> list[dict]:
    """Each message of the bundle: ``role``, ``content`` [(kind, text)] and its finished payload's other fields."""
    found: dict[str, dict] = {}
    for event in bundle.events:
        if event["type"] == "message_started":
            found[event["message_id"]] = {"role": event["payload"]["role"]}
        elif event["type"] == "message_finished":
            payload = dict(event["payload"])
            content = [(block["kind"], block["text"]) for block in payload.pop("content")]
            payload.pop("settled")
            found[event["message_id"]].update(payload, content=content)
    return list(found.values())


def tools(bundle) -> list[tuple[str, str, dict]]:
    return [(event["type"], event["tool_call_id"], event["payload"])
            for event in bundle.events if event["type"].startswith("tool_execution")]


def call_block(call_id: str, arguments: dict) -> tuple[str, dict]:
    return ("tool_call", {"id": call_id, "name": "get_weather", "arguments": arguments})


def decoded(content):
    return [(kind, json.loads(text) if kind == "tool_call" else text) for kind, text in content]


def test_openinference_openai_replies_once_with_stop_reason_model_and_usage(python, collector, bundle_root):
    call_id, (bundle,) = run_scenario(python, "openinference-openai", collector, 1, bundle_root)
    assistant = [m for m in messages(bundle) if m["role"] == "assistant"]
    assert [decoded(m["content"]) for m in assistant] == [
        [call_block(call_id, {"query": "Paris"})],
        [("text", "get_weather says: sunny in Paris")],
        [("text", "You said: and in Rome?")],  # Responses: message.content and .contents, once
    ]
    assert [m.get("stop_reason") for m in assistant] == ["tool_calls", "stop", None]
    assert [(m["model"], m["usage"]) for m in assistant] == [
        ("mock-gpt", {"input_tokens": 1, "output_tokens": 2}),
        ("mock-gpt", {"input_tokens": 4, "output_tokens": 5}),
        # The Responses API call: OpenInference reports its cached input tokens (none, here).
        ("mock-gpt", {"input_tokens": 3, "output_tokens": 5, "cached_input_tokens": 0}),
    ]


def test_agents_sdk_streamed_chat_completions_runs_are_complete_and_named(python, collector, bundle_root, tmp_path):
    call_id, (chat, responses) = run_scenario(python, "openinference-agents-streamed", collector, 2, bundle_root,
                                              {"OTEL_SESSION_DIR": str(tmp_path / "in-process")})
    assert (chat.manifest["agent"], responses.manifest["agent"]) == ("Booker", "Concierge")
    chat_messages = messages(chat)
    assert [(m["role"], decoded(m["content"])) for m in chat_messages] == [
        ("system", [("text", "Be brief.")]),
        ("user", [("text", "Paris")]),
        ("assistant", [call_block(call_id, {"query": "Paris"})]),  # only in output.value, as a Responses document
        ("tool", [("text", "sunny in Paris")]),
        ("assistant", [("text", "get_weather says: sunny in Paris")]),
    ]
    assert chat_messages[2]["model"] == "mock-gpt"
    assert tools(chat) == [  # the Agents SDK's tool span names no call id: linked by name and arguments
        ("tool_execution_started", call_id, {"name": "get_weather", "arguments": {"query": "Paris"}}),
        ("tool_execution_finished", call_id, {"status": "ok", "result": "sunny in Paris"}),
    ]
    streamed: dict[str, str] = {}  # the otel_session instrumentor's deltas of the streamed replies
    for event in chat.events:
        if event["type"] == "assistant_delta":
            streamed[event["message_id"]] = streamed.get(event["message_id"], "") + event["payload"]["delta"]
    assert sorted(streamed.values()) == sorted([
        json.dumps({"id": call_id, "name": "get_weather", "arguments": {"query": "Paris"}}, separators=(",", ":")),
        "get_weather says: sunny in Paris"])
    (reply,) = [m for m in messages(responses) if m["role"] == "assistant"]
    assert reply["content"] == [("text", "You said: hello")]
    assert (reply["stop_reason"], reply["usage"]) == ("stop", {"input_tokens": 3, "output_tokens": 3, "cached_input_tokens": 0})


def test_traceloop_tool_arguments_and_results_are_unwrapped_and_linked(python, collector, bundle_root, tmp_path):
    call_id, (bundle,) = run_scenario(python, "traceloop", collector, 1, bundle_root,
                                      {"OTEL_SESSION_DIR": str(tmp_path / "in-process")})
    assert bundle.manifest["agent"] == "booking"
    assert tools(bundle) == [
        ("tool_execution_started", call_id, {"name": "get_weather", "arguments": {"query": "Paris"}}),
        ("tool_execution_finished", call_id, {"status": "ok", "result": {"forecast": "sunny in Paris"}}),
    ]
    first, last, streamed = [m for m in messages(bundle) if m["role"] == "assistant"]
    assert (first["stop_reason"], first["model"], first["usage"]) == (
        "tool_call", "mock-gpt", {"input_tokens": 1, "output_tokens": 2})
    assert last["usage"] == {"input_tokens": 5, "output_tokens": 6}
    deltas = [e["payload"]["delta"] for e in bundle.events if e["type"] == "assistant_delta"]
    assert (deltas, streamed["content"]) == (["You ", "said: ", "Lima"], [("text", "You said: Lima")])


def test_langchain_bare_tool_input_is_an_object_linked_to_the_call(python, collector, bundle_root):
    call_id, (bundle,) = run_scenario(python, "langchain", collector, 1, bundle_root)
    assert tools(bundle) == [
        ("tool_execution_started", call_id, {"name": "get_weather", "arguments": {"input": "Paris"}}),
        ("tool_execution_finished", call_id, {"status": "ok", "result": "sunny in Paris"}),
    ]
    first, last = [m for m in messages(bundle) if m["role"] == "assistant"]
    assert (first["stop_reason"], first["usage"]) == ("tool_calls", {"input_tokens": 1, "output_tokens": 2})
    assert (last["content"], last["stop_reason"]) == ([("text", "get_weather says: sunny in Paris")], "stop")


def test_responses_streams_beside_openinference_are_deltas_in_process_and_through_the_collector(
        python, collector, bundle_root, tmp_path):
    """openai-v2 2.4b0 does not trace the Responses API; OpenInference does: the otel_session
    instrumentor taps its streams (sync, async, a function call) and a Chat Completions stream."""
    from otel_session.replay.reduce import replay_state

    from .test_openai_streams import conversation, deltas_of

    call_id, (collected,) = run_scenario(python, "openinference-streams", collector, 1, bundle_root,
                                         {"OTEL_SESSION_DIR": str(tmp_path / "in-process")})
    (in_process,) = sealed_bundles(tmp_path / "in-process")
    assert deltas_of(in_process) == deltas_of(collected)
    assert conversation(in_process) == conversation(collected)
    texts = {}
    for message_id, index, kind, delta in deltas_of(in_process):
        texts[message_id] = texts.get(message_id, "") + delta
    assert sorted(texts.values()) == sorted([
        "You said: Paris", "You said: async Rome", "You said: Lima",
        json.dumps({"id": call_id, "name": "get_weather", "arguments": {"query": "Oslo"}}, separators=(",", ":")),
    ])
    for bundle in (in_process, collected):
        assert not [d for d in replay_state(bundle.events)["diagnostics"] if d["code"] == "reconcile_mismatch"]
