"""The collector is unreachable from the agent: the app's turns do not wait for it, and the
in-process journal still has everything. Latency figures: ``python -m bench.unreachable``."""

from __future__ import annotations

import socket
import statistics

from otel_session.bundle.read import BundleStatus

from .conftest import assert_finished_normally, bundles, run_agent


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_collector_costs_the_app_nothing_and_the_journal_keeps_everything(tmp_path):
    root = tmp_path / "bundles"
    endpoint = f"http://127.0.0.1:{closed_port()}/v1/traces"
    result = run_agent(root, "--runs", "20", "--otlp", endpoint, timeout=120, OTEL_EXPORTER_OTLP_TRACES_TIMEOUT="2")
    assert_finished_normally(result, runs=20)
    assert "Failed to export spans batch" in result.stderr or "retrying in" in result.stderr, "the exporter tried"
    found = {bundle.run_id: bundle for bundle in bundles(root)}
    assert sorted(found) == sorted(run["run_id"] for run in result.runs)
    for bundle in found.values():
        assert bundle.status is BundleStatus.COMPLETE and bundle.diagnostics == []
        assert sum(1 for e in bundle.events if e["type"] == "assistant_delta") == 20
        assert bundle.events[-1]["payload"] == {"status": "ok"}
    # Generous sanity only: an export on the app's thread would cost seconds per span (retries).
    assert statistics.median(run["turn_ms"] for run in result.runs) < 1000
