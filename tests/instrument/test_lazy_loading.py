"""The project's instrumentors patch a framework when the app imports it, never by importing it
(issue 29): ``opentelemetry-instrument`` starts every app with all of them on, and importing
``anthropic``, ``agents`` and ``langgraph`` for an app that uses none cost seconds. Each scenario
runs ``lazy_app.py`` in a child process, whose ``sys.modules`` starts without the frameworks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

for framework in ("openai", "anthropic", "agents", "langgraph"):
    pytest.importorskip(framework)

APP = Path(__file__).with_name("lazy_app.py")
PATCHED_ONCE = {
    "openai.Stream": 1,
    "openai.AsyncStream": 1,
    "anthropic.Stream": 1,
    "anthropic.start_api_call_span": 1,
    "agents.AgentRunner.run": 1,
    "agents.AgentRunner.run_streamed": 1,
    "langgraph.Pregel.stream": 1,
}
UNPATCHED = dict.fromkeys(PATCHED_ONCE, 0)


def run_app(scenario: str, tmp_path: Path) -> dict[str, Any]:
    env = {
        **os.environ,
        "OTEL_SESSION_DIR": str(tmp_path / "bundles"),
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
    }
    env.pop("OTEL_SESSION_LANGGRAPH_REQUIRED_SLOTS", None)
    done = subprocess.run([sys.executable, str(APP), scenario, str(tmp_path / "bundles")], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_instrumenting_imports_no_framework_and_a_later_import_is_patched_once(tmp_path):
    facts = run_app("after", tmp_path)
    assert facts["imported_by_instrument"] == []
    assert facts["patched"] == PATCHED_ONCE
    assert facts["graph_runs"] == ["booking"]  # the patch records: a graph invoked after the import


def test_uninstrumenting_cancels_a_pending_patch(tmp_path):
    assert run_app("cancelled", tmp_path)["patched"] == UNPATCHED


def test_a_framework_imported_first_is_patched_once_and_put_back(tmp_path):
    facts = run_app("before", tmp_path)
    assert facts == {"patched": PATCHED_ONCE, "undone": UNPATCHED, "again": PATCHED_ONCE}


@pytest.fixture
def fresh_module(tmp_path, monkeypatch):
    """The name of a module the app has not imported yet (a file in a directory on ``sys.path``)."""
    name = f"lazy_framework_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text("class Client:\n    def call(self):\n        return 'called'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_a_patch_that_fails_is_said_once_and_the_app_imports_on(fresh_module, caplog):
    from otel_session.instrument._on_import import PatchState, on_import

    def apply(module: Any) -> Any:
        raise AttributeError("a framework version this patch does not know")

    patch = on_import(fresh_module, apply)
    assert patch.state is PatchState.PENDING
    module = __import__(fresh_module)
    assert module.Client().call() == "called"
    assert patch.state is PatchState.FAILED
    assert caplog.text.count(f"could not instrument {fresh_module}") == 1


def test_a_patch_is_made_at_the_import_and_undone(fresh_module):
    from otel_session.instrument._on_import import PatchState, on_import

    def apply(module: Any) -> Any:
        original = module.Client.call
        module.Client.call = lambda self: "recorded " + original(self)
        return lambda: setattr(module.Client, "call", original)

    patch = on_import(fresh_module, apply)
    module = __import__(fresh_module)
    assert (patch.state, module.Client().call()) == (PatchState.APPLIED, "recorded called")
    patch.undo()
    patch.undo()  # idempotent
    assert (patch.state, module.Client().call()) == (PatchState.UNDONE, "called")
