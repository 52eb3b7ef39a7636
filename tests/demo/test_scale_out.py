"""The compose topology as local processes: two real collectors behind a router that splits by trace id.

The router stands in for the OpenTelemetry Collector's ``loadbalancing`` exporter with
``routing_key: traceID``: a loopback OTLP/HTTP server that decodes each export request and
re-posts each trace's spans to the collector its trace id picks. Every run must land whole,
complete, in exactly the collector chosen for it.
"""

from __future__ import annotations

import sys
import threading
import time
import urllib.request
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import orjson
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from otel_session.demo.stack import Service, http_ready, tcp_ready
from otel_session.core.journal import run_id_from_trace_id
from otel_session.bundle.read import BundleStatus, iter_runs, read_bundle

from .conftest import otel_session_cli

pytestmark = pytest.mark.slow


class TraceIdRouter:
    """OTLP/HTTP in, one request per target collector out, each trace to ``trace_id % len(targets)``.

    ``by_request=True`` is the broken alternative for contrast: whole requests round-robin.
    """

    def __init__(self, targets: list[str], *, by_request: bool = False) -> None:
        self.targets = targets
        self.by_request = by_request
        self.routed: dict[str, int] = {}  # run id → target index
        self.requests = 0
        router = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                status = router.route(ExportTraceServiceRequest.FromString(body))
                payload = ExportTraceServiceResponse().SerializeToString()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"

    def route(self, request: ExportTraceServiceRequest) -> int:
        self.requests += 1
        parts: dict[int, ExportTraceServiceRequest] = defaultdict(ExportTraceServiceRequest)
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    trace_id = int.from_bytes(span.trace_id, "big")
                    target = (self.requests if self.by_request else trace_id) % len(self.targets)
                    self.routed[run_id_from_trace_id(trace_id)] = target
                    out = parts[target]
                    rs = out.resource_spans.add()
                    rs.resource.CopyFrom(resource_spans.resource)
                    rs.schema_url = resource_spans.schema_url
                    ss = rs.scope_spans.add()
                    ss.scope.CopyFrom(scope_spans.scope)
                    ss.spans.add().CopyFrom(span)
        for target, part in parts.items():
            forward = urllib.request.Request(
                self.targets[target], data=part.SerializeToString(),
                headers={"Content-Type": "application/x-protobuf"}, method="POST",
            )
            try:
                with urllib.request.urlopen(forward, timeout=10) as response:
                    if response.status != 200:
                        return 503
            except OSError:
                return 503  # the exporter retries
        return 200

    def __enter__(self) -> TraceIdRouter:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _run_topology(tmp_path, free_ports, *, by_request: bool):
    """Two collectors, the router, the LLM and the agent; the driver twice. Where each run landed."""
    http_ports = free_ports(2)
    llm_port, agent_port = free_ports(4)[2:]
    roots = [tmp_path / "collector-1", tmp_path / "collector-2"]
    services = [
        Service(f"collector-{n + 1}",
                otel_session_cli("collect", "--dir", str(roots[n]), "--grpc", "off",
                                 "--http", f"127.0.0.1:{http_ports[n]}", "--seal-after", "1"),
                tcp_ready(http_ports[n]))
        for n in range(2)
    ]
    targets = [f"http://127.0.0.1:{port}/v1/traces" for port in http_ports]
    with TraceIdRouter(targets, by_request=by_request) as router:
        services += [
            Service("llm", [sys.executable, "-m", "otel_session.demo.booking_llm", "--port", str(llm_port)],
                    http_ready(f"http://127.0.0.1:{llm_port}/v1/models")),
            Service("agent",
                    [sys.executable, "-m", "otel_session.demo.agent", "--port", str(agent_port),
                     "--llm", f"http://127.0.0.1:{llm_port}/v1", "--otlp-endpoint", router.endpoint,
                     "--journal-dir", str(tmp_path / "agent-journal")],
                    http_ready(f"http://127.0.0.1:{agent_port}/healthz"),
                    env={"OTEL_BSP_SCHEDULE_DELAY": "100"}),
        ]
        try:
            for service in services:
                service.start(tmp_path)
            for service in services:
                service.wait_ready(30)
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


def test_every_run_lands_whole_in_exactly_the_collector_its_trace_id_picks(tmp_path, free_ports):
    run_ids, router, placed, statuses = _run_topology(tmp_path, free_ports, by_request=False)
    assert set(placed) == run_ids == set(router.routed)
    assert all(len(where) == 1 for where in placed.values()), "a run was split across collectors"
    assert all(found == [BundleStatus.COMPLETE] for found in statuses.values()), orjson.dumps(statuses).decode()
    assert {run_id: where[0] for run_id, where in placed.items()} == router.routed
    assert set(router.routed.values()) == {0, 1}, "14 runs all routed to one collector"
    assert router.requests > 1


def test_routing_whole_requests_instead_splits_runs(tmp_path, free_ports):
    """The contrast that shows what the check above detects: without trace-id routing runs split.

    With separate bundle roots each collector seals its part, and each part reads as a sealed
    bundle of its own: only "every run in exactly one collector" catches it (on a shared volume
    the run lock refuses the second writer instead).
    """
    run_ids, _, placed, statuses = _run_topology(tmp_path, free_ports, by_request=True)
    split = [run_id for run_id, where in placed.items() if len(where) > 1]
    assert split, "no run was split: the agent exported every run in a single request"
    assert set(placed) == run_ids
