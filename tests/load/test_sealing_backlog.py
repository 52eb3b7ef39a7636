"""Many short runs awaiting their seal: the collector refuses (retryably) instead of growing without bound."""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence

import pytest

from otel_session.collector.sink import BundleSink, Overloaded
from otel_session.normalize import SpanData
from otel_session.redact import RedactionPolicy, Redactor
from otel_session.bundle.seal import SealPlan, seal_sync_from_env
from otel_session.bundle.write import BundleWriter


def _root_span(trace_id: int) -> SpanData:
    return SpanData(trace_id, random.Random(trace_id).getrandbits(64) | 1, None, "invoke_agent booking", 1_000, 2_000,
                    attributes={"session.id": f"short-{trace_id}", "gen_ai.operation.name": "invoke_agent"})


class StalledDisk:
    """The writer's seal sync (the real one) stalls until the test lets it go."""

    def __init__(self) -> None:
        self.inner = seal_sync_from_env()
        self.name = self.inner.name
        self.go = threading.Event()

    def files(self, plans: Sequence[SealPlan]) -> None:
        self.go.wait(30)
        self.inner.files(plans)

    def renames(self, plans: Sequence[SealPlan]) -> None:
        self.inner.renames(plans)


def test_runs_awaiting_their_seal_are_bounded(tmp_path):
    disk = StalledDisk()
    writer = BundleWriter(tmp_path, seal_sync=disk)
    sink = BundleSink(writer, Redactor(RedactionPolicy(), key=b"t"), seal_after_s=0.0)
    try:
        assert sink.submit([_root_span(n) for n in range(1, 301)]).accepted == 300
        assert sink.seal_quiet_runs() == 300  # closed; the writer is stuck sealing the first group
        with pytest.raises(Overloaded, match="runs awaiting their seal"):
            sink.submit([_root_span(1_000)])
        disk.go.set()
        assert writer.force_flush(60_000)
        assert sink.submit([_root_span(1_000)]).accepted == 1  # the retry goes through
    finally:
        disk.go.set()
        sink.seal_all()
        writer.shutdown()
    assert sink.counters.snapshot()["bundled"] == 301
