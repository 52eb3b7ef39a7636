"""The compose topology as local processes: two real collectors behind a router that splits by trace id.

The router (``tests/scaleout/router.py``) stands in for the OpenTelemetry Collector's
``loadbalancing`` exporter with ``routing_key: traceID``: a loopback OTLP/HTTP server that decodes
each export request and re-posts each trace's spans to the collector its trace id picks. Every run must land whole,
complete, in exactly the collector chosen for it.
"""

from __future__ import annotations

import re
import sys
import time
from collections import defaultdict

import orjson
import pytest

from otel_session.demo.stack import Service, http_ready
from otel_session.bundle.read import BundleStatus, iter_runs, read_bundle
from otel_session.testing import wait_for
from tests.scaleout.router import TraceIdRouter

from .conftest import otel_session_cli

pytestmark = pytest.mark.slow


def _said_port(service: Service, marker: str) -> int:
    """The port ``service`` says it listens on (the number after ``marker`` in its log), once said:
    every service here binds port 0, so no port picked free can be taken before it binds."""
    def said() -> int | None:
        text = service.log_path.read_text(errors="replace") if service.log_path.exists() else ""
        assert service.process.poll() is None, f"{service.name} exited while starting:\n{text}"
        found = re.search(re.escape(marker) + r"(\d+)", text)
        return int(found[1]) if found else None

    return wait_for(said, timeout=120)


def _run_topology(tmp_path, *, by_request: bool):
    """Two collectors, the router, the LLM and the agent; the driver twice. Where each run landed."""
    roots = [tmp_path / "collector-1", tmp_path / "collector-2"]
    services = [
        Service(f"collector-{n + 1}",
                otel_session_cli("collect", "--dir", str(roots[n]), "--grpc", "off",
                                 "--http", "127.0.0.1:0", "--seal-after", "1"),
                lambda: True)  # ready once it says its port: it says it listening
        for n in range(2)
    ]
    try:
        for service in services:
            service.start(tmp_path)
        http_ports = [_said_port(service, "http=127.0.0.1:") for service in services]
        targets = [f"http://127.0.0.1:{port}/v1/traces" for port in http_ports]
        with TraceIdRouter(targets, by_request=by_request) as router:
            llm = Service("llm", [sys.executable, "-m", "otel_session.demo.booking_llm", "--port", "0"], lambda: True)
            services.append(llm)
            llm.start(tmp_path)
            llm_port = _said_port(llm, "at http://127.0.0.1:")
            agent = Service("agent",
                            [sys.executable, "-m", "otel_session.demo.agent", "--port", "0",
                             "--llm", f"http://127.0.0.1:{llm_port}/v1", "--otlp-endpoint", router.endpoint,
                             "--journal-dir", str(tmp_path / "agent-journal")],
                            lambda: True, env={"OTEL_BSP_SCHEDULE_DELAY": "100"})
            services.append(agent)
            agent.start(tmp_path)
            agent_port = _said_port(agent, "booking agent at http://127.0.0.1:")
            wait_for(http_ready(f"http://127.0.0.1:{agent_port}/healthz"), timeout=120)
            from otel_session.demo.driver import play_all

            results = play_all(f"http://127.0.0.1:{agent_port}", tag="a") + play_all(
                f"http://127.0.0.1:{agent_port}", tag="b")
            assert not [r.error for r in results if r.error]
            run_ids = {run_id for r in results for run_id in r.run_ids}
            assert services[3].stop() == 0  # the agent flushes its spans on SIGTERM
            deadline = time.monotonic() + 120  # generous under load
            while time.monotonic() < deadline:
                found = [(n, run) for n, root in enumerate(roots) for run in iter_runs(root, include_evals=True)]
                if sum(run.capture_status == "complete" for _, run in found) >= len(run_ids):
                    break
                time.sleep(0.1)
    finally:
        for service in reversed(services):
            service.stop()
    placed: dict[str, list[int]] = defaultdict(list)
    statuses: dict[str, list[BundleStatus]] = defaultdict(list)
    for n, root in enumerate(roots):
        for run in iter_runs(root, include_evals=True):
            placed[run.run_id].append(n)
            statuses[run.run_id].append(read_bundle(run.path).status)
    return run_ids, router, placed, statuses


def test_every_run_lands_whole_in_exactly_the_collector_its_trace_id_picks(tmp_path):
    run_ids, router, placed, statuses = _run_topology(tmp_path, by_request=False)
    assert set(placed) == run_ids == set(router.routed)
    assert all(len(where) == 1 for where in placed.values()), "a run was split across collectors"
    assert all(found == [BundleStatus.COMPLETE] for found in statuses.values()), orjson.dumps(statuses).decode()
    assert {run_id: where[0] for run_id, where in placed.items()} == router.routed
    assert set(router.routed.values()) == {0, 1}, "14 runs all routed to one collector"
    assert router.requests > 1


def test_routing_whole_requests_instead_splits_runs(tmp_path):
    """The contrast that shows what the check above detects: without trace-id routing runs split.

    With separate bundle roots each collector seals its part, and each part reads as a sealed
    bundle of its own: only "every run in exactly one collector" catches it (on a shared volume
    the run lock refuses the second writer instead).
    """
    run_ids, _, placed, statuses = _run_topology(tmp_path, by_request=True)
    split = [run_id for run_id, where in placed.items() if len(where) > 1]
    assert split, "no run was split: the agent exported every run in a single request"
    assert set(placed) == run_ids
