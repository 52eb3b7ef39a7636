"""The collector is unreachable from the agent: the app's turns do not wait for it, and the
in-process journal still has everything. Latency figures: ``python -m bench.unreachable``."""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from otel_session.bundle.read import BundleStatus

from .conftest import agent_command, agent_env, assert_finished_normally, bundles, parse_agent_output, run_agent


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


class _Gate:
    """An OTLP/HTTP endpoint that holds every export unanswered until it is opened."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.requested = threading.Event()


@contextmanager
def held_endpoint() -> Iterator[tuple[str, _Gate]]:
    gate = _Gate()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            gate.requested.set()
            gate.opened.wait()
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", gate
    finally:
        gate.opened.set()
        server.shutdown()
        server.server_close()


def test_the_apps_turns_finish_while_every_export_is_held_unanswered(tmp_path):
    """No wall clock: with a 600 s export timeout, an export on the app's thread would hold its
    first run until the collector answers, and the collector answers only after every run ended."""
    root = tmp_path / "bundles"
    with held_endpoint() as (endpoint, gate):
        env = agent_env(
            OTEL_EXPORTER_OTLP_TRACES_TIMEOUT="600", OTEL_BSP_MAX_EXPORT_BATCH_SIZE="1", OTEL_BSP_SCHEDULE_DELAY="1"
        )
        stderr = (tmp_path / "stderr").open("w+")
        app = subprocess.Popen(
            agent_command(root, "--runs", "20", "--otlp", endpoint), stdout=subprocess.PIPE, stderr=stderr, text=True, env=env
        )
        lines: list[str] = []
        twenty_runs = threading.Event()

        def read_runs() -> None:
            for line in app.stdout:
                lines.append(line)
                if sum("run_id" in seen for seen in lines) == 20:
                    twenty_runs.set()
                    return

        threading.Thread(target=read_runs, daemon=True).start()
        try:
            assert twenty_runs.wait(300), f"the app's runs waited for the collector: {len(lines)} of 20 ended"
            assert gate.requested.wait(300), "the exporter never sent a batch"
            gate.opened.set()
            rest, _ = app.communicate(timeout=300)
        finally:
            app.kill()
        stderr.seek(0)
        result = parse_agent_output(app.returncode, "".join(lines) + rest, stderr.read())
    assert_finished_normally(result, runs=20)
    assert len(list(bundles(root))) == 20
