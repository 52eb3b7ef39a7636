"""The real frameworks, each in its own venv (``FRAMEWORK_VENVS``), run their agent against the
mock LLM and export spans and GenAI log records over OTLP/gRPC to a collector on loopback: the
bundles hold what the recorded fixtures give (``test_recorded_spans``' table, row by row)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from otel_session.redact import RedactionPolicy, Redactor
from otel_session.testing import bundles, running_collectors, wait_for

from ..collector.thirdparty_venv import framework_python
from .journals import runs_of
from .test_recorded_spans import CASES, Case, assert_replies, assert_tools, assert_users

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
LATEST = {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}


# A fixture's name after the framework's → the environment it was recorded in.
MODES = {"spans-latest.jsonl": LATEST,
         "spans-span-only.jsonl": {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"}}


def live(case: Case) -> tuple[str, dict[str, str]]:
    """The framework of a table row and the environment its fixture was recorded in."""
    framework, name = case.fixture.split("/")
    return framework, MODES.get(name, {})


@pytest.mark.parametrize("case", CASES, ids=str)
def test_the_framework_exported_to_the_collector_journals_as_recorded(case, tmp_path):
    framework, env = live(case)
    python = framework_python(framework)
    root = tmp_path / "collected"
    redactor = Redactor(RedactionPolicy(), key=b"frameworks-live")
    with running_collectors(grpc_address="127.0.0.1:0", http_address="127.0.0.1:0", seal_after_s=0.2,
                            redactor=redactor) as make:
        collector = make(root)
        done = subprocess.run(
            [str(python), str(HERE / f"agent_{framework}.py"), "--otlp", f"127.0.0.1:{collector.grpc_port}"],
            env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        wait_for(lambda: len([b for b in bundles(root) if b.capture and b.capture.get("status") != "recording"])
                 >= case.runs, timeout=60)
    runs = runs_of(root)
    assert_users(case, runs)
    assert_tools(case, runs)
    assert_replies(case, runs)
