"""An instrumented app that exits without ``shutdown()``, or is sent SIGTERM, as a real process."""

from __future__ import annotations

import signal
import subprocess

import pytest

from otel_session.bundle.read import BundleStatus

from .conftest import agent_command, agent_env, assert_finished_normally, bundles, run_agent


def run_finished(bundle) -> dict | None:
    last = bundle.events[-1] if bundle.events else None
    return last["payload"] if last is not None and last["type"] == "run_finished" else None


def test_exit_without_shutdown_drains_at_exit(tmp_path):
    root = tmp_path / "bundles"
    result = run_agent(root, "--runs", "3", "--exit", "atexit-open")
    assert_finished_normally(result, runs=3)
    by_run = {bundle.run_id: bundle for bundle in bundles(root)}
    assert len(by_run) == 3
    for outcome in result.runs:
        bundle = by_run[outcome["run_id"]]
        assert bundle.status is BundleStatus.COMPLETE and bundle.diagnostics == []
        assert sum(1 for e in bundle.events if e["type"] == "assistant_delta") == 20
    statuses = [run_finished(by_run[outcome["run_id"]]) for outcome in result.runs]
    assert statuses == [{"status": "ok"}, {"status": "ok"}, {"status": "interrupted"}], "the open one: interrupted"


def sigterm_agent(root, *options: str, **env: str) -> tuple[int, str]:
    process = subprocess.Popen(
        agent_command(root, "--exit", "hang", *options),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=agent_env(**env),
    )
    try:
        assert process.stdout.readline().strip() == "ready", process.stderr.read()
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return process.returncode, stderr


def test_sigterm_with_the_default_action_leaves_the_run_recording(tmp_path):
    """What Python does by default: SIGTERM kills the process, atexit never runs."""
    root = tmp_path / "bundles"
    returncode, _ = sigterm_agent(root)
    assert returncode == -signal.SIGTERM
    (bundle,) = bundles(root)
    assert bundle.status is BundleStatus.RECORDING, "not sealed, but shown as recording, never lost"


@pytest.mark.parametrize(
    "options,env",
    [(["--handle-sigterm"], {}), ([], {"OTEL_SESSION_SHUTDOWN_ON_SIGTERM": "true"})],
    ids=["argument", "environment"],
)
def test_sigterm_with_shutdown_on_sigterm_drains_and_still_dies_of_sigterm(tmp_path, options, env):
    root = tmp_path / "bundles"
    returncode, stderr = sigterm_agent(root, *options, **env)
    assert returncode == -signal.SIGTERM, stderr
    (bundle,) = bundles(root)
    assert bundle.status is BundleStatus.COMPLETE and bundle.diagnostics == []
    assert sum(1 for e in bundle.events if e["type"] == "assistant_delta") == 20
    assert run_finished(bundle) == {"status": "interrupted"}


def test_an_apps_own_sigterm_handler_is_left_alone_and_atexit_drains(tmp_path):
    root = tmp_path / "bundles"
    returncode, stderr = sigterm_agent(root, "--handle-sigterm", "--own-sigterm-handler")
    assert returncode == 143, stderr
    (bundle,) = bundles(root)
    assert bundle.status is BundleStatus.COMPLETE and bundle.diagnostics == []
    turn_finished = next(e for e in bundle.events if e["type"] == "turn_finished")
    assert turn_finished["payload"]["interrupted"] is True
    assert run_finished(bundle) == {"status": "interrupted"}, "SystemExit unwinding a run is no error of the run"
