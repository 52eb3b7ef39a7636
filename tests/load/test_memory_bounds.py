"""Bounded by bytes (issue 31 §4): spans of traces that name no session are held up to
``--max-held-bytes``; beyond, their trace is recorded at once as a session of its own (counted),
so the collector's memory stays below the bound plus a base, whatever the spans' sizes.

The issue's probe: 300 spans of 512 KiB whose traces name no session. Before, the hold was
bounded by count only (10,000 spans): the collector grew from 55 to 392 MiB. RSS is read from
``/proc/<pid>/status`` (``VmHWM``: the peak), compared with a generous bound, never timed. The
serving process also fixes glibc's mmap threshold (``settle_heap_for_serving``): with its dynamic
threshold, freed 512 KiB buffers stayed in the heap and the peak was 216 MiB with the bound in place.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_session.bundle.read import iter_run_dirs

SPANS = 300
SPAN_BYTES = 512 * 1024
HELD_BOUND_MIB = 16
BASE_MIB = 100
"""What a collector allocates beyond the held spans while it takes this load (requests being
decoded and journaled, allocator slack; measured here: about 50 MiB in all): generous, the point is
the 300 spans (150 MiB, twice that decoded) not held."""


def _kib(status: str, field: str) -> int:
    line = next(line for line in status.splitlines() if line.startswith(field + ":"))
    return int(line.split()[1])


def test_large_spans_of_traces_without_a_session_stay_within_the_held_byte_bound(tmp_path):
    collector = subprocess.Popen(
        [sys.executable, "-m", "otel_session.cli", "collect", "--dir", str(tmp_path), "--grpc", "off",
         "--http", "127.0.0.1:0", "--status-interval", "3600"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "OTEL_SESSION_REDACTION_KEY": "memory-test",
             "OTEL_SESSION_MAX_HELD_BYTES": f"{HELD_BOUND_MIB}MiB"},
    )
    status = f"/proc/{collector.pid}/status"
    try:
        banner = collector.stdout.readline()
        assert "otel-session collector:" in banner, collector.stderr.read()
        port = int(banner.split("http=")[1].split()[0].rsplit(":", 1)[1])
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout=60)
        provider = TracerProvider(resource=Resource.create({"service.name": "big-spans"}))
        processor = BatchSpanProcessor(exporter, max_queue_size=SPANS, max_export_batch_size=8)
        provider.add_span_processor(processor)
        tracer = provider.get_tracer("memory")
        with tracer.start_as_current_span("warm-up"):
            pass
        assert processor.force_flush(60_000)
        with open(status) as handle:
            base_kib = _kib(handle.read(), "VmRSS")
        blob = "b" * SPAN_BYTES
        for number in range(SPANS):  # each its own trace, naming no session
            with tracer.start_as_current_span(f"step {number}", attributes={"payload": blob}):
                pass
        assert processor.force_flush(300_000)
        provider.shutdown()
        with open(status) as handle:
            peak_kib = _kib(handle.read(), "VmHWM")
    finally:
        collector.send_signal(signal.SIGTERM)
        out, err = collector.communicate(timeout=300)
    assert collector.returncode == 0, err[-3000:]
    grown_mib = (peak_kib - base_kib) / 1024
    assert grown_mib < HELD_BOUND_MIB + BASE_MIB, f"grew {grown_mib:.0f} MiB {out}"
    assert "rejected=0" in out and f"received={SPANS + 1} bundled={SPANS + 1}" in out, out
    assert "held_spans_derived_early=0" not in out, "the bound was reached, and said so"
    assert len(list(iter_run_dirs(tmp_path))) == SPANS + 1, "every trace recorded, none dropped"
