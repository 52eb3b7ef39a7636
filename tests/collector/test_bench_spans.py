"""The benchmark's spans are what an SDK would send: every trace (= run) once, across every batch."""

from __future__ import annotations

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from bench.collector import _batch


def test_no_trace_repeats_across_exporters_and_batches():
    """Integer seeds that differed only in their upper word gave exporter 1's batch 2 the trace ids
    of exporter 0's batch 2: those runs were sealed, then refused as already sealed, under load."""
    resource, scope = Resource.create({"service.name": "t"}), InstrumentationScope("t")
    traces = [span.context.trace_id for exporter in range(4) for batch in range(6)
              for span in _batch(exporter, batch, 64, 8, resource, scope) if span.parent is None]
    assert len(traces) == 4 * 6 * 8
    assert len(set(traces)) == len(traces)
