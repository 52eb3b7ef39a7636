"""``otel-session collect --store s3://…``: a run sealed by a real collector process is uploaded,
its catalog row says where, and its local copy goes (a real SeaweedFS server, SQLite catalog)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from otel_session.catalog import RunQuery, catch_up, open_catalog
from otel_session.testing import wait_for
from tests.store.conftest import s3_client
from tests.catalog.test_sync import _post, _trace_request


def _collector(root: Path, *store_args: str) -> tuple[subprocess.Popen, int]:
    process = subprocess.Popen(
        [sys.executable, "-m", "otel_session.cli", "collect", "--dir", str(root), "--grpc", "off",
         "--http", "127.0.0.1:0", "--seal-after", "0.05", *store_args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "OTEL_SESSION_REDACTION_KEY": "store-test"})
    banner = process.stdout.readline()
    assert "otel-session collector:" in banner, process.stderr.read()
    return process, int(banner.split("http=")[1].split()[0].rsplit(":", 1)[1])


def catalog_rows(root: Path) -> list:
    catalog = open_catalog(root)
    try:
        return catalog.page(RunQuery(search="stored-call")).rows
    finally:
        catalog.close()


def _stop(process: subprocess.Popen) -> str:
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return err


def test_a_sealed_run_is_stored_its_row_says_where_and_its_local_copy_goes(tmp_path: Path, store, monkeypatch):
    monkeypatch.delenv("OTEL_SESSION_CATALOG", raising=False)
    root = tmp_path / "collector"
    process, port = _collector(root, "--store", f"s3://{store.bucket}/{store.prefix}")
    try:
        _post(port, _trace_request("stored-call"))
        wait_for(lambda: root.exists() and (root / ".catalog.sqlite3").exists() and catalog_rows(root)
                 and catalog_rows(root)[0].location is not None, timeout=60)
    finally:
        _stop(process)
    [row] = catalog_rows(root)
    assert row.location == f"s3://{store.bucket}/{store.prefix}/{row.path}.tar"
    assert store.has_run(row.path) and not (root / row.path).exists()
    fetched = store.fetch_run(row.path, tmp_path / "cache")
    assert (fetched / "events.ndjson").read_bytes().count(b"\n") == row.event_count

    process, _ = _collector(root, "--store", f"s3://{store.bucket}/{store.prefix}")  # its keeper passes at start
    _stop(process)
    assert [kept.location for kept in catalog_rows(root)] == [row.location], "a stored run's row outlives its local copy"


def test_a_store_url_no_store_accepts_is_one_line_on_collect_and_view(tmp_path: Path):
    done = subprocess.run([sys.executable, "-m", "otel_session.cli", "collect", "--dir", str(tmp_path), "--grpc", "off",
                           "--http", "127.0.0.1:0", "--store", "ftp://somewhere"], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "s3://BUCKET" in done.stderr and "Traceback" not in done.stderr
    viewed = subprocess.run([sys.executable, "-m", "otel_session.cli", "view", "--dir", str(tmp_path), "--port", "0",
                             "--store", "ftp://somewhere"], capture_output=True, text=True, timeout=60)
    assert viewed.returncode == 2 and "s3://BUCKET" in viewed.stderr and "Traceback" not in viewed.stderr


def test_a_viewer_on_a_host_without_the_bundles_lists_replays_and_shows_facts_from_the_store(
        tmp_path: Path, store, monkeypatch):
    from otel_session.viewer import create_app

    shared = f"sqlite:///{tmp_path / 'shared-catalog.sqlite3'}"  # one catalog for both hosts
    monkeypatch.setenv("OTEL_SESSION_CATALOG", shared)
    collector_root, viewer_root = tmp_path / "collector-host", tmp_path / "viewer-host"
    process, port = _collector(collector_root, "--store", f"s3://{store.bucket}/{store.prefix}")
    try:
        _post(port, _trace_request("stored-call"))
        wait_for(lambda: collector_root.exists() and [row.location for row in catalog_rows(collector_root)] != [None]
                 and catalog_rows(collector_root), timeout=60)
    finally:
        _stop(process)
    [row] = catalog_rows(collector_root)
    assert not (collector_root / row.path).exists(), "the collector host kept no copy"

    viewer_root.mkdir()
    app = create_app({"BUNDLE_DIR": str(viewer_root), "TESTING": True, "STORE": f"s3://{store.bucket}/{store.prefix}"})
    try:
        client = app.test_client()
        listed = client.get("/api/runs").get_json()
        assert [(run["run_id"], run["location"]) for run in listed["runs"]] == [(row.run_id, row.location)]
        runs = client.get("/api/sessions/stored-call/runs")
        assert runs.status_code == 200, runs.get_data(as_text=True)
        events = client.get(f"/api/sessions/stored-call/runs/{row.run_id}/events")
        assert events.status_code == 200 and events.get_json()["events"], events.get_data(as_text=True)
        facts = client.get("/api/sessions/stored-call/facts")
        assert facts.status_code == 200, facts.get_data(as_text=True)
        assert client.get("/api/sessions/never-recorded/runs").status_code == 404
        catalog = open_catalog(viewer_root)
        try:  # a pass over the viewer's root: the fetched copy is not a run of its own
            assert catch_up(catalog, viewer_root).added == 0
        finally:
            catalog.close()
        assert [run["run_id"] for run in client.get("/api/runs").get_json()["runs"]] == [row.run_id]
    finally:
        app.extensions["otel_session_listing"].close()


def test_kill_9_of_a_collector_mid_upload_then_restart_stores_the_run_exactly_once(tmp_path: Path, s3, store,
                                                                                      monkeypatch):
    monkeypatch.delenv("OTEL_SESSION_CATALOG", raising=False)
    root = tmp_path / "collector"
    flags = ("--store", f"s3://{store.bucket}/{store.prefix}")
    process, port = _collector(root, *flags)
    s3.pause()  # the upload that starts at seal hangs in the middle
    try:
        _post(port, _trace_request("stored-call"))
        wait_for(lambda: root.exists() and any(
            (run / "capture.json").exists() and b'"recording"' not in (run / "capture.json").read_bytes()
            for run in root.glob("sessions/*/run-*")), timeout=60)
        os.kill(process.pid, signal.SIGKILL)
        process.communicate(timeout=30)
    finally:
        s3.resume()
    [local] = list(root.glob("sessions/*/run-*"))  # the sealed run waits on disk
    process, _ = _collector(root, *flags)
    try:
        wait_for(lambda: not local.exists(), timeout=120)  # uploaded at start, then removed
    finally:
        _stop(process)
    relative = local.relative_to(root).as_posix()
    listed = s3_client().list_objects_v2(Bucket=store.bucket, Prefix=store.prefix + "/")
    assert [entry["Key"] for entry in listed["Contents"]] == [f"{store.prefix}/{relative}.tar"]
    assert [row.location for row in catalog_rows(root)] == [f"s3://{store.bucket}/{store.prefix}/{relative}.tar"]
