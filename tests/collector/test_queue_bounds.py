"""The runs' queues are bounded by bytes, and what happens at a bound is a retryable refusal
(issue 31 §3, §4): while the writer is stuck, a run whose queue holds half of
``max_run_queue_bytes``, or all runs' queues together past ``max_queued_bytes``, refuse new
requests with 503 + ``Retry-After`` (gRPC ``UNAVAILABLE``), counted; the official exporter's own
retry lands them once the writer moves again, each span once. Before, the queues were bounded by
records only: megabytes of large spans queued until the run's capture failed (``queue_bytes_exceeded``).
"""

from __future__ import annotations

import threading

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_session.bundle.read import BundleStatus

from .conftest import bundles, wait_for


class StuckWrites:
    """The writer's append seam: every write waits until ``release()``; the first started is signalled."""

    def __init__(self, writer) -> None:
        self.real = writer._write
        self.started = threading.Event()
        self.go = threading.Event()

    def __call__(self, fd: int, data: memoryview) -> int:
        self.started.set()
        self.go.wait(60)
        return self.real(fd, data)


def tool_spans(session: str, count: int, argument_bytes: int) -> list:
    """``count`` finished tool spans of one trace (its root left open), arguments of ``argument_bytes``."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "bounded"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bounds")
    root = tracer.start_span("invoke_agent booking", attributes={"session.id": session})
    with trace.use_span(root, end_on_exit=False):
        for number in range(count):
            with tracer.start_as_current_span("execute_tool lookup", attributes={
                    "session.id": session, "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                    "gen_ai.tool.call.arguments": '{"pad": "%s"}' % ("p" * argument_bytes)}):
                pass
    provider.shutdown()
    return list(memory.get_finished_spans())


def test_a_stuck_writer_refuses_by_queued_bytes_retryably_and_the_retry_lands_once(make_collector, bundle_root):
    collector = make_collector(bundle_root, grpc_address=None, http_address="127.0.0.1:0", seal_after_s=30,
                               max_run_queue_bytes=1024 * 1024, max_queued_bytes=128 * 1024)
    stuck = StuckWrites(collector.writer)
    collector.writer._write = stuck
    url = f"http://127.0.0.1:{collector.http_port}/v1/traces"
    one = tool_spans("one", 8, 40_000)  # about 160 KiB of records a request
    other = tool_spans("other", 4, 40_000)
    batches = [one[:4], one[4:], other]
    outcomes: dict[int, SpanExportResult] = {}

    def send(index: int) -> None:
        outcomes[index] = OTLPSpanExporter(endpoint=url, timeout=60).export(batches[index])

    first = threading.Thread(target=send, args=(0,))
    first.start()
    stuck.started.wait(30)  # its records are in the writer's hands, the write stuck
    second = threading.Thread(target=send, args=(1,))
    second.start()
    wait_for(lambda: collector.writer.queued_bytes > 128 * 1024)  # queued behind the stuck write
    third = threading.Thread(target=send, args=(2,))
    third.start()
    wait_for(lambda: collector.counters.snapshot()["refused_queue_bytes"] > 0)
    stuck.go.set()
    for thread in (first, second, third):
        thread.join(90)
    assert outcomes == {0: SpanExportResult.SUCCESS, 1: SpanExportResult.SUCCESS, 2: SpanExportResult.SUCCESS}
    totals = collector.counters.snapshot()
    assert totals["bundled"] == 12 and totals["rejected"] == 0, totals
    collector.stop()
    by_session = {bundle.manifest["session_id"]: bundle for bundle in bundles(bundle_root)}
    for session, spans in (("one", 8), ("other", 4)):
        run = by_session[session]
        assert run.status is BundleStatus.COMPLETE, run.diagnostics
        assert "failure" not in run.capture
        assert sum(1 for e in run.events if e["type"] == "tool_execution_started") == spans, "each span once"


def test_a_run_whose_queue_is_half_full_refuses_retryably_before_its_capture_fails(make_collector, bundle_root):
    collector = make_collector(bundle_root, grpc_address=None, http_address="127.0.0.1:0", seal_after_s=30,
                               max_run_queue_bytes=256 * 1024)
    stuck = StuckWrites(collector.writer)
    collector.writer._write = stuck
    url = f"http://127.0.0.1:{collector.http_port}/v1/traces"
    spans = tool_spans("one", 12, 40_000)  # about 160 KiB of records a request
    batches = [spans[:4], spans[4:8], spans[8:]]
    outcomes: dict[int, SpanExportResult] = {}

    def send(index: int) -> None:
        outcomes[index] = OTLPSpanExporter(endpoint=url, timeout=60).export(batches[index])

    threads = [threading.Thread(target=send, args=(index,)) for index in range(3)]
    threads[0].start()
    stuck.started.wait(30)
    threads[1].start()
    (run,) = collector.writer.open_runs
    wait_for(lambda: run.queued_bytes > 128 * 1024)
    threads[2].start()
    wait_for(lambda: collector.counters.snapshot()["refused_writer_behind"] > 0)
    stuck.go.set()
    for thread in threads:
        thread.join(90)
    assert set(outcomes.values()) == {SpanExportResult.SUCCESS}
    collector.stop()
    (bundle,) = bundles(bundle_root)
    assert bundle.status is BundleStatus.COMPLETE and "failure" not in bundle.capture
    assert sum(1 for e in bundle.events if e["type"] == "tool_execution_started") == 12
