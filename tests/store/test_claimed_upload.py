"""A run another collector took over (this one paused past its lease) is never stored over the new
owner's bundle: the uploader asks the run claims first and sets this collector's part aside
(a real collector, SeaweedFS, a shared catalog file)."""

from __future__ import annotations

import http.client
from pathlib import Path

import orjson
import pytest
from sqlalchemy import create_engine, text

from otel_session.collector.server import Collector
from otel_session.core.journal import run_id_from_trace_id
from otel_session.testing import wait_for
from tests.catalog.test_sync import _trace_request


def _post(port: int, body: bytes) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", "/v1/traces", body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def _halves(session: str) -> tuple[bytes, bytes, str]:
    """The tool span alone, then the root span alone, of one trace; and its run id."""
    document = orjson.loads(_trace_request(session))
    root, tool = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    halves = []
    for span in (tool, root):
        document["resourceSpans"][0]["scopeSpans"][0]["spans"] = [span]
        halves.append(orjson.dumps(document))
    return halves[0], halves[1], run_id_from_trace_id(int(root["traceId"], 16))


def test_a_run_taken_over_meanwhile_is_set_aside_not_stored(tmp_path: Path, s3, store, monkeypatch: pytest.MonkeyPatch):
    shared = f"sqlite:///{tmp_path / 'shared.sqlite3'}"
    monkeypatch.setenv("OTEL_SESSION_CATALOG", shared)
    monkeypatch.delenv("OTEL_SESSION_ORIGIN", raising=False)
    root = tmp_path / "root"
    collector = Collector(root, grpc_address=None, http_address="127.0.0.1:0", seal_after_s=0.05,
                          store=f"s3://{store.bucket}/{store.prefix}")
    collector.uploader.store = store
    collector.start()
    try:
        assert _post(collector.http_port, _trace_request("kept-call")) == 200
        wait_for(lambda: collector.uploader.uploaded == 1, timeout=60)
        tool, run_root, run_id = _halves("lost-call")
        assert _post(collector.http_port, tool) == 200  # the run is open here, claimed by this collector
        engine = create_engine(shared)
        with engine.begin() as connection:  # what a takeover while this collector was paused leaves
            connection.execute(text("UPDATE run_claims SET owner = 'elsewhere' WHERE run_id = :run_id"),
                               {"run_id": run_id})
        engine.dispose()
        assert _post(collector.http_port, run_root) == 200  # its root: the run seals here all the same
        wait_for(lambda: list((root / ".taken-over").rglob(f"{run_id}/events.ndjson")), timeout=60)
        wait_for(lambda: collector.uploader.pending() == 0, timeout=60)
    finally:
        collector.stop()
    assert collector.uploader.uploaded == 1
    keys = [item["Key"] for item in s3.client().list_objects_v2(Bucket=store.bucket, Prefix=store.prefix)["Contents"]]
    assert [key.split("/")[-2] for key in keys] == ["kept-call"]
