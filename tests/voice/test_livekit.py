"""LiveKit Agents' own telemetry → sessions, turns, messages, tools and voice latency.

The real livekit-agents ``AgentSession`` (``tests/voice/livekit_app.py``: its OpenAI plugin against
the loopback mock, the caller's turns as text through ``session.run(user_input=…)`` as LiveKit's
test harness does), recorded through ``otel-session collect`` with the official OTLP exporter and
in process with ``otel_session.configure()``. Text turns have no speech, so LiveKit reports no
end-of-utterance or end-to-end latency for them: only the model's time to first token. A reply cut
off is ``session.interrupt()``, what LiveKit calls when the caller speaks over the agent.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from otel_session.demo.mock_llm import MockLLMServer, canned_reply
from otel_session.replay.facts import load_session_facts
from otel_session.testing import bundles, running_collectors, wait_for

from .conftest import run_app

pytestmark = pytest.mark.slow

SAID = ("what is the weather", "thanks")


@pytest.fixture(scope="module")
def collected(mock_llm, tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("collected")
    with running_collectors(grpc_address="127.0.0.1:0", http_address="127.0.0.1:0", seal_after_s=0.2) as make:
        collector = make(root)
        run_app("livekit_app.py", mock_llm.base_url, "lk-collected", "--otlp", f"127.0.0.1:{collector.grpc_port}", *SAID)
        wait_for(lambda: any(b.capture and b.capture.get("status") != "recording" for b in bundles(root)))
    return load_session_facts(root, "lk-collected")


@pytest.fixture(scope="module")
def in_process(mock_llm, tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("in-process")
    run_app("livekit_app.py", mock_llm.base_url, "lk-in-process", "--in-process", str(root), *SAID)
    return load_session_facts(root, "lk-in-process")


@pytest.fixture(scope="module")
def in_process_no_code(mock_llm, tmp_path_factory) -> dict[str, Any]:
    """Only ``otel_session.configure(tracer_provider=…)`` on the provider given to LiveKit: no
    session or run opened in the app (the collector's rule, in process)."""
    root = tmp_path_factory.mktemp("in-process-no-code")
    run_app("livekit_app.py", mock_llm.base_url, "lk-no-code", "--in-process", str(root), "--no-code", *SAID)
    return load_session_facts(root, "lk-no-code")


@pytest.fixture(params=["collected", "in_process", "in_process_no_code"])
def facts(request) -> dict[str, Any]:
    return request.getfixturevalue(request.param)


def test_each_agent_turn_is_a_turn_of_the_sessions_run(facts):
    assert facts["integrity"]["status"] == "complete"
    assert [turn["turn_index"] for turn in facts["turns"]] == [0, 1]
    assert all(turn["finished"] and turn["interrupted"] is False for turn in facts["turns"])
    assert facts["notes"] == []


def test_each_turn_holds_its_words_tool_call_and_reply(facts):
    for turn, said in zip(facts["turns"], SAID):
        spoken = [(m["role"], m["text"]) for m in turn["messages"] if m["role"] in ("user", "assistant") and m["text"]]
        assert spoken == [("user", said), ("assistant", "get_weather says: sunny")]
        assert [(tool["name"], tool["status"]) for tool in turn["tools"]] == [("get_weather", "ok")]


def test_the_models_time_to_first_token_per_turn(facts):
    for turn in facts["turns"]:
        assert set(turn["latency"]) == {"llm_ttft_ms"} and turn["latency"]["llm_ttft_ms"] > 0
        assert turn["slow"] is False  # no end-to-end figure: nothing to call slow
    assert facts["latency"]["user_to_agent_ms"] is None


def _slow_model(request: dict[str, Any]) -> Any:
    time.sleep(1.0)  # a model that takes a second to answer: the caller cuts the reply off while it thinks
    return canned_reply(request)


def test_a_reply_the_caller_cuts_off_is_an_interrupted_turn(tmp_path):
    with MockLLMServer(port=0, responder=_slow_model) as slow:
        run_app("livekit_app.py", slow.base_url, "lk-cut", "--in-process", str(tmp_path), "--interrupt-first", *SAID)
    turns = load_session_facts(tmp_path, "lk-cut")["turns"]
    assert [(turn["turn_index"], turn["interrupted"]) for turn in turns] == [(0, True), (1, False)]
    assert [m["text"] for m in turns[0]["messages"] if m["role"] == "assistant"] == []  # cut off before it spoke
    assert [m["text"] for m in turns[1]["messages"] if m["role"] == "assistant"][-1] == "get_weather says: sunny"
