"""Many short runs awaiting their seal: the collector refuses (retryably) instead of growing without bound."""

from __future__ import annotations

import os
import random
import threading

import pytest

from otel_session.collector.sink import BundleSink, Overloaded
from otel_session.normalize import SpanData
from otel_session.redact import RedactionPolicy, Redactor
from otel_session.write import BundleWriter


def _root_span(trace_id: int) -> SpanData:
    return SpanData(trace_id, random.Random(trace_id).getrandbits(64) | 1, None, "invoke_agent booking", 1_000, 2_000,
                    attributes={"session.id": f"short-{trace_id}", "gen_ai.operation.name": "invoke_agent"})


def test_runs_awaiting_their_seal_are_bounded(tmp_path, monkeypatch):
    disk_slow = threading.Event()
    real_fsync = os.fsync

    def fsync(fd: int) -> None:  # the writer thread's disk stalls until the test lets it go
        if threading.current_thread().name == "otel-session-writer":
            disk_slow.wait(30)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    writer = BundleWriter(tmp_path)
    sink = BundleSink(writer, Redactor(RedactionPolicy(), key=b"t"), seal_after_s=0.0)
    try:
        assert sink.submit([_root_span(n) for n in range(1, 301)]).accepted == 300
        assert sink.seal_quiet_runs() == 300  # closed; the writer is stuck sealing the first
        with pytest.raises(Overloaded, match="runs awaiting their seal"):
            sink.submit([_root_span(1_000)])
        disk_slow.set()
        assert writer.force_flush(60_000)
        assert sink.submit([_root_span(1_000)]).accepted == 1  # the retry goes through
    finally:
        disk_slow.set()
        sink.seal_all()
        writer.shutdown()
    assert sink.counters.snapshot()["bundled"] == 301
