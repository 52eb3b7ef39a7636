"""LiteLLM's streams with no code (``otel_session_litellm``): a plain LiteLLM app under
``opentelemetry-instrument`` (real litellm and OpenInference's LiteLLM instrumentor, in their venv,
offline against the mock LLM) journals each streamed chunk as one delta — through LiteLLM's own
HTTP client (its anthropic provider) and through the openai client underneath (its openai
provider: that stream is the openai tap's, recorded once) — in process and through the collector."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from otel_session.demo.mock_llm import MockLLMServer
from otel_session.redact import RedactionPolicy, Redactor
from otel_session.testing import bundles, running_collectors, wait_for

from ..collector.thirdparty_venv import framework_python

pytestmark = pytest.mark.slow

APP = Path(__file__).resolve().parent / "litellm_app.py"
CONTACT = "ann@example.com"


def run_app(tmp_path: Path, root: Path, **env: str) -> list[dict[str, Any]]:
    """The app's calls (model, mode, streamed text, chunks with text), run under opentelemetry-instrument."""
    python = framework_python("litellm")
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "OPENAI_"))}
    environment.update({"OTEL_SESSION_DIR": str(root), "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none",
                        "OTEL_LOGS_EXPORTER": "none", "LITELLM_LOCAL_MODEL_COST_MAP": "True", **env})
    with MockLLMServer() as llm:
        # cwd: opentelemetry-instrument puts the working directory first on the app's path
        done = subprocess.run([str(python.with_name("opentelemetry-instrument")), str(python), str(APP), llm.root_url],
                              env=environment, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    calls = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [(call["model"], call["mode"]) for call in calls] == [
        ("openai/mock-gpt", "sync"), ("anthropic/mock-claude", "sync"),
        ("openai/mock-gpt", "async"), ("anthropic/mock-claude", "async")]
    return calls


def assert_deltas(root: Path, calls: list[dict[str, Any]]) -> None:
    runs = [read.events for read in bundles(root) if read.session_id == "litellm-chat"]
    assert len(runs) == len(calls)  # one trace each
    streamed = {}
    for events in runs:
        deltas = [e["payload"]["delta"] for e in events if e["type"] == "assistant_delta"]
        streamed["".join(deltas)] = len(deltas)
        replies = [e for e in events if e["type"] == "message_finished" and e["message_id"].endswith("-out-0")]
        assert len(replies) == 1  # the deltas are the reply's, settled by the span's final content
    assert streamed == {call["text"].replace(CONTACT, "[email]"): call["chunks"] for call in calls}
    for path in root.rglob("*"):
        if path.is_file():
            assert CONTACT.encode() not in path.read_bytes(), path


def test_each_chunk_is_a_delta_in_process(tmp_path):
    root = tmp_path / "bundles"
    calls = run_app(tmp_path, root)
    assert_deltas(root, calls)


def test_each_chunk_is_a_delta_through_the_collector(tmp_path):
    in_process, collected = tmp_path / "in-process", tmp_path / "collected"
    collected.mkdir()
    with running_collectors(grpc_address="127.0.0.1:0", http_address="127.0.0.1:0", seal_after_s=0.2,
                            redactor=Redactor(RedactionPolicy(), key=b"litellm-streams")) as make:
        collector = make(collected)
        calls = run_app(tmp_path, in_process, OTEL_TRACES_EXPORTER="otlp_proto_grpc",
                        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"http://127.0.0.1:{collector.grpc_port}")
        wait_for(lambda: len([b for b in bundles(collected) if b.capture and b.capture.get("status") != "recording"])
                 >= len(calls), timeout=60)
    assert_deltas(collected, calls)
    assert_deltas(in_process, calls)
