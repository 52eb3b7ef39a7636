"""Every refusal the client can fix by waiting is retryable (issue 31 §3).

A full disk or no free inode: a run cannot be opened, so nothing of the request is taken and the
answer is HTTP 503 + ``Retry-After`` / gRPC ``UNAVAILABLE``. The official exporters retry on their
own; once the space is back their retry lands the spans, exactly once. Before, the answer was 200 +
``partial_success``, which no exporter retries: the runs were lost.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_session.bundle.read import BundleStatus
from otel_session.redact import RedactionPolicy, Redactor
from otel_session.testing import running_collectors

from .conftest import bundles, wait_for


def finished_run(session: str, tools: int = 3) -> list:
    """One run's spans (root included), finished, as an app's SDK hands them to its exporter."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "full-disk"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("faults")
    with tracer.start_as_current_span("invoke_agent booking", attributes={"session.id": session}):
        for number in range(tools):
            with tracer.start_as_current_span("execute_tool lookup", attributes={
                    "session.id": session, "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                    "gen_ai.tool.call.arguments": f'{{"n": {number}}}'}):
                pass
    provider.shutdown()
    return list(memory.get_finished_spans())


def fill(point: Path, what: str) -> Path:
    """Use up the file system's bytes or inodes; the directory holding what it took."""
    filler = point / "filler"
    filler.mkdir()
    try:
        if what == "bytes":
            with open(filler / "blob", "wb") as blob:
                while True:
                    blob.write(b"x" * 65536)
                    blob.flush()
        else:
            number = 0
            while True:
                (filler / str(number)).touch()
                number += 1
    except OSError:
        pass
    return filler


def free(filler: Path) -> None:
    for entry in filler.iterdir():
        entry.unlink()


@pytest.mark.parametrize("transport", ["http", "grpc"])
@pytest.mark.parametrize("what", ["bytes", "inodes"])
def test_a_full_disk_refuses_a_new_run_retryably_and_the_exporters_retry_lands_it_once(tiny_fs, transport, what):
    point = tiny_fs(2048, nr_inodes=400)
    root = point / "bundles"
    with running_collectors(redactor=Redactor(RedactionPolicy(), key=b"fault-tests"), seal_after_s=0.3,
                            grpc_address="127.0.0.1:0", http_address="127.0.0.1:0") as make:
        collector = make(root)
        if transport == "http":
            exporter = HttpExporter(endpoint=f"http://127.0.0.1:{collector.http_port}/v1/traces", timeout=60)
        else:
            exporter = GrpcExporter(endpoint=f"127.0.0.1:{collector.grpc_port}", insecure=True, timeout=60)
        assert exporter.export(finished_run("before")) is SpanExportResult.SUCCESS  # the root's directories exist
        wait_for(lambda: [b for b in bundles(root) if b.status is BundleStatus.COMPLETE])

        filler = fill(point, what)
        outcome: list[SpanExportResult] = []
        sender = threading.Thread(target=lambda: outcome.append(exporter.export(finished_run("during"))))
        sender.start()
        wait_for(lambda: collector.counters.snapshot()["received"] >= 4 + 2 * 4, timeout=30)  # refused, then retried
        free(filler)
        sender.join(90)
        assert outcome == [SpanExportResult.SUCCESS], "the exporter's own retry landed it"
        exporter.shutdown()
        totals = collector.counters.snapshot()
        assert totals["rejected"] == 0 and totals["bundled"] == 8 and totals["refused_disk_full"] >= 1, totals
    during = [b for b in bundles(root) if b.manifest["session_id"] == "during"]
    assert len(during) == 1
    (run,) = during
    assert run.status is BundleStatus.COMPLETE, run.diagnostics
    assert sum(1 for e in run.events if e["type"] == "tool_execution_started") == 3, "exactly once"
    assert not list(root.rglob(".run-*.new")), "a refused open leaves nothing behind"
