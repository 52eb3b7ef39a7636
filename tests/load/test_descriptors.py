"""Descriptors independent of open runs (issue 31 §2): thousands of open traces under a small
``RLIMIT_NOFILE`` lose nothing. Before, each open run held its journal open: new runs were refused
("Too many open files") once the limit was reached, while the exporter saw success."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_session.bundle.read import BundleStatus, iter_run_dirs, read_bundle

OPEN_TRACES = 2_000
NOFILE = 128


def _limit_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


def test_two_thousand_open_traces_under_a_128_descriptor_limit_lose_nothing(tmp_path):
    root = tmp_path / "bundles"
    collector = subprocess.Popen(
        [sys.executable, "-m", "otel_session.cli", "collect", "--dir", str(root), "--grpc", "off",
         "--http", "127.0.0.1:0", "--status-interval", "3600"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_limit_descriptors,
        env={**os.environ, "OTEL_SESSION_REDACTION_KEY": "descriptor-test"},
    )
    try:
        banner = collector.stdout.readline()
        assert "otel-session collector:" in banner, collector.stderr.read()
        port = int(banner.split("http=")[1].split()[0].rsplit(":", 1)[1])
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout=30)
        provider = TracerProvider(resource=Resource.create({"service.name": "many-open"}))
        processor = BatchSpanProcessor(exporter, max_queue_size=OPEN_TRACES * 2, max_export_batch_size=256)
        provider.add_span_processor(processor)
        tracer = provider.get_tracer("descriptors")
        roots = []
        for number in range(OPEN_TRACES):  # each trace's root stays open: its run stays open
            root_span = tracer.start_span("invoke_agent booking", attributes={"session.id": f"open-{number}"})
            roots.append(root_span)
            with trace.use_span(root_span, end_on_exit=False):
                with tracer.start_as_current_span("execute_tool lookup", attributes={
                    "session.id": f"open-{number}", "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "lookup"}):
                    pass
        assert processor.force_flush(120_000)
        provider.shutdown()
    finally:
        collector.send_signal(signal.SIGTERM)
        out, err = collector.communicate(timeout=300)
    assert collector.returncode == 0, err[-3000:]
    assert f"received={OPEN_TRACES} bundled={OPEN_TRACES}" in out + err, (out + err)[-3000:]
    assert "rejected=0" in out + err
    assert "Too many open files" not in err
    runs = list(iter_run_dirs(root))
    assert len(runs) == OPEN_TRACES
    for path in runs:
        bundle = read_bundle(path)
        assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
        assert [e["type"] for e in bundle.events][:2] == ["tool_execution_started", "tool_execution_finished"]


def test_a_writer_holds_a_bounded_few_journals_open_whatever_the_number_of_open_runs(tmp_path):
    """In process: 500 runs open and appended to; the writer keeps at most its journal limit open."""
    from otel_session.bundle.write import BundleWriter

    before = len(os.listdir("/proc/self/fd"))
    writer = BundleWriter(tmp_path, identifier=str)
    runs = [writer.open_run(session_id=f"s{number}", run_id=f"run-00000000-0000-0000-0000-{number:012d}")
            for number in range(500)]
    for run in runs:
        run.append("turn_started", {"state": "greet", "required_slots": []})
    assert writer.force_flush(60_000)
    held = len(os.listdir("/proc/self/fd")) - before
    assert held <= writer._journals.limit + 4, held  # its lock, the pool's, a stray descriptor or two
    for run in runs:
        run.close(run_status="ok")
    writer.shutdown()
    assert len(os.listdir("/proc/self/fd")) <= before
