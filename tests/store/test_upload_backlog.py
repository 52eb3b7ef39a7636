"""The object store down: sealed runs wait on the local disk, bounded by ``--max-unstored-bytes``.

A real collector with a real SeaweedFS server that stops answering (paused) and comes back: past
the bound a new run is refused retryably (503 + Retry-After, ``refused_store_backlog``), spans of
a run already open are still taken, uploads are retried with backoff, and once the store answers
again every run is stored and the refused one is taken: nothing is lost.
"""

from __future__ import annotations

import http.client
from pathlib import Path

import pytest

from otel_session.collector.server import Collector
from otel_session.testing import wait_for
from tests.catalog.test_sync import _trace_request


def _post(port: int, body: bytes) -> tuple[int, str | None]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", "/v1/traces", body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        return response.status, response.getheader("Retry-After")
    finally:
        connection.close()


def test_past_the_bound_new_runs_are_refused_retryably_until_the_store_is_back(
        tmp_path: Path, s3, store, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OTEL_SESSION_CATALOG", raising=False)
    collector = Collector(tmp_path / "root", grpc_address=None, http_address="127.0.0.1:0", seal_after_s=0.05,
                          store=f"s3://{store.bucket}/{store.prefix}", max_unstored_bytes=1)
    collector.uploader.store = store  # the fixture's short timeouts: a paused server fails fast
    collector.start()
    uploader = collector.uploader
    s3.pause()
    try:
        assert _post(collector.http_port, _trace_request("first-call"))[0] == 200
        wait_for(lambda: uploader.failures >= 1 and uploader.waiting_bytes > 1, timeout=120)
        status, retry_after = _post(collector.http_port, second := _trace_request("second-call"))
        assert (status, retry_after) == (503, "1")
        assert collector.counters.snapshot()["refused_store_backlog"] == 1
        assert not (tmp_path / "root" / "sessions" / "second-call").exists()
    finally:
        s3.resume()
    wait_for(lambda: uploader.waiting_bytes == 0 and uploader.uploaded == 1, timeout=120)
    assert _post(collector.http_port, second)[0] == 200  # the exporter's retry, taken now
    wait_for(lambda: uploader.uploaded == 2 and uploader.pending() == 0, timeout=120)
    collector.stop()
    assert not list((tmp_path / "root" / "sessions").glob("*/run-*")), "a stored run's local copy is removed"
    keys = [item["Key"] for item in s3.client().list_objects_v2(Bucket=store.bucket, Prefix=store.prefix)["Contents"]]
    assert sorted(key.split("/")[-2] for key in keys) == ["first-call", "second-call"], keys  # each once
