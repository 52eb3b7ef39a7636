"""The catalog keeps up with the bundles: reindex, catch-up passes, and a collector killed with
SIGKILL while it writes the catalog."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import orjson
import pytest

from otel_session.bundle.write import BundleWriter
from otel_session.catalog import RunQuery, SqlCatalog, catch_up, open_catalog, reindex
from otel_session.testing import wait_for

from .conftest import BASE_NS, new_run_id, write_runs


def _agrees(catalog: SqlCatalog, root: Path) -> bool:
    """Every bundle has its row, with the capture status its capture.json says, and no row is extra."""
    on_disk = {}
    for run in root.glob("**/sessions/*/run-*"):
        try:
            on_disk[run.relative_to(root).as_posix()] = json.loads((run / "capture.json").read_bytes()).get("status")
        except (OSError, ValueError):
            on_disk[run.relative_to(root).as_posix()] = None
    return {path: known.capture_status for path, known in catalog.known().items()} == on_disk


def _disagreement(catalog: SqlCatalog, root: Path) -> str:
    rows = {path: known.capture_status for path, known in catalog.known().items()}
    on_disk = {run.relative_to(root).as_posix(): run for run in root.glob("**/sessions/*/run-*")}
    lines = [f"no row: {path}" for path in sorted(set(on_disk) - set(rows))]
    lines += [f"no bundle: {path}" for path in sorted(set(rows) - set(on_disk))]
    lines += [f"row {rows[path]} / bundle {(on_disk[path] / 'capture.json').read_text(errors='replace')[:200]}: {path}"
              for path in sorted(set(rows) & set(on_disk)) if not _agrees_on(rows[path], on_disk[path])]
    return "\n".join(lines) or "the catalog agrees with the bundles"


def _agrees_on(status: str | None, run: Path) -> bool:
    try:
        return json.loads((run / "capture.json").read_bytes()).get("status") == status
    except (OSError, ValueError):
        return status is None


def test_reindex_rebuilds_every_row_from_the_bundles(root: Path, tmp_path: Path):
    writer = BundleWriter(root)  # no hook: bundles written before the catalog existed
    try:
        write_runs(writer, 12)
        evaluation = writer.open_run(session_id="e", run_id=f"run-{uuid.uuid4()}", kind="eval", eval_id="nightly")
        evaluation.close(run_status="ok")
        assert evaluation.wait_sealed(10)
    finally:
        writer.shutdown()
    catalog = open_catalog(root)
    try:
        assert catalog.count() == 0
        assert reindex(catalog, root).runs == 13 and catalog.count() == 13 and _agrees(catalog, root)
        assert catalog.facets()["eval_id"] == ["nightly"]
        assert reindex(catalog, root).runs == 13 and catalog.count() == 13  # again: the same rows, none twice
    finally:
        catalog.close()


def test_a_pass_adds_bundles_it_lacks_drops_deleted_ones_and_rereads_changed_ones(root: Path, writer, catalog):
    write_runs(writer, 6)
    assert catch_up(catalog, root).refreshed == 6  # the writer left their figures to count
    copied_from = next((root / "sessions").glob("s0/run-*"))
    foreign = root / "sessions" / "copied-in" / copied_from.name
    shutil.copytree(copied_from, foreign)  # a bundle restored or copied in by hand
    deleted = next((root / "sessions").glob("s1/run-*"))
    shutil.rmtree(deleted)
    changed = next((root / "sessions").glob("s2/run-*"))
    (changed / "events.ndjson").write_bytes(b"{torn")

    result = catch_up(catalog, root)
    assert (result.added, result.removed, result.refreshed) == (1, 1, 1)
    assert _agrees(catalog, root)
    rows = {row.path: row for row in catalog.page(RunQuery(limit=500)).rows}
    assert deleted.relative_to(root).as_posix() not in rows
    assert rows[changed.relative_to(root).as_posix()].integrity == "invalid"
    assert catch_up(catalog, root).changed is False


def test_a_run_sealed_while_a_pass_reads_it_keeps_its_sealed_row(root: Path, writer, catalog, monkeypatch):
    """A pass reads a recording bundle, the run seals and the writer's hook writes its sealed row,
    then the pass writes what it read: the row stays sealed. (It went back to ``recording`` until the
    keeper's next pass, 5 minutes on: the kill -9 test below timed out on it.)"""
    run = writer.open_run(session_id="s", run_id=new_run_id(), created_at_ns=BASE_NS)
    run.append("run_started", {"kind": "live"}, at_ns=BASE_NS)
    assert writer.force_flush(30_000)  # its opened row written; the bundle grew since
    write_read_rows = catalog.upsert_sealed

    def seal_then_write(rows: list) -> None:
        assert [row.capture_status for row in rows] == ["recording"]
        run.close(run_status="ok")
        assert run.wait_sealed(30) and writer.force_flush(30_000)  # the hook's sealed row is in
        write_read_rows(rows)

    monkeypatch.setattr(catalog, "upsert_sealed", seal_then_write)
    assert catch_up(catalog, root).refreshed == 1
    assert _agrees(catalog, root), _disagreement(catalog, root)
    monkeypatch.undo()
    assert catch_up(catalog, root).refreshed == 1 and _agrees(catalog, root)  # the next pass reads it sealed


def test_a_viewer_started_on_a_root_the_catalog_lacks_lists_every_run(root: Path, caplog):
    from otel_session.viewer import create_app

    writer = BundleWriter(root)
    try:
        ids = write_runs(writer, 5)
    finally:
        writer.shutdown()
    app = create_app({"BUNDLE_DIR": str(root), "TESTING": True})
    try:
        answer = app.test_client().get("/api/runs").get_json()
        assert sorted(run["run_id"] for run in answer["runs"]) == sorted(ids)
        assert "catalog: adding 5 bundle(s) it lacks" in caplog.text
    finally:
        app.extensions["otel_session_listing"].close()


def _trace_request(session: str) -> bytes:
    trace_id = uuid.uuid4().hex
    root_span = os.urandom(8).hex()
    base_ns = 1_764_453_121_000_000_000
    spans = [
        {"traceId": trace_id, "spanId": root_span, "name": "invoke_agent booking", "kind": 2,
         "startTimeUnixNano": str(base_ns), "endTimeUnixNano": str(base_ns + 10_000_000),
         "attributes": [{"key": "session.id", "value": {"stringValue": session}}]},
        {"traceId": trace_id, "spanId": os.urandom(8).hex(), "parentSpanId": root_span, "name": "execute_tool lookup",
         "kind": 1, "startTimeUnixNano": str(base_ns + 1_000), "endTimeUnixNano": str(base_ns + 2_000),
         "attributes": [{"key": "session.id", "value": {"stringValue": session}},
                        {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                        {"key": "gen_ai.tool.name", "value": {"stringValue": "lookup"}}]},
    ]
    return orjson.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]})


def _start_collector(root: Path) -> tuple[subprocess.Popen, int]:
    process = subprocess.Popen(
        [sys.executable, "-m", "otel_session.cli", "collect", "--dir", str(root), "--grpc", "off",
         # A run the kill cut before its root span waits --seal-rootless-after once resumed, as any run would.
         "--http", "127.0.0.1:0", "--seal-after", "0.05", "--seal-rootless-after", "0.5"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "OTEL_SESSION_REDACTION_KEY": "catalog-kill-test"},
    )
    banner = process.stdout.readline()
    assert "otel-session collector:" in banner, process.stderr.read()
    return process, int(banner.split("http=")[1].split()[0].rsplit(":", 1)[1])


def _post(port: int, body: bytes) -> None:
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("POST", "/v1/traces", body=body, headers={"Content-Type": "application/json"})
        connection.getresponse().read()
    finally:
        connection.close()


@pytest.mark.slow
def test_sigkill_of_a_collector_writing_the_catalog_then_restart_agrees_with_the_bundles(root: Path):
    process, port = _start_collector(root)
    stop = threading.Event()
    try:
        def stream() -> None:
            number = 0
            while not stop.is_set():
                try:
                    _post(port, _trace_request(f"call-{number % 7}"))
                except OSError:
                    return
                number += 1

        streamer = threading.Thread(target=stream)
        streamer.start()
        wait_for(lambda: len(list(root.glob("sessions/*/run-*"))) > 40, timeout=60)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
        stop.set()
        streamer.join(10)
    finally:
        stop.set()
        if process.poll() is None:
            process.kill()
            process.wait()

    process, port = _start_collector(root)
    catalog = open_catalog(root)
    caught_up = False
    try:
        _post(port, _trace_request("after-restart"))
        wait_for(lambda: _agrees(catalog, root) and catalog.page(RunQuery(search="after-restart")).rows
                 and all(row.capture_status != "recording" for row in catalog.page(RunQuery(limit=500)).rows),
                 timeout=120)
        caught_up = True
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
        if not caught_up:  # what the catalog and the bundles disagree on, and what the collector said
            print(_disagreement(catalog, root), err, sep="\n")
        catalog.close()
    assert process.returncode == 0, err
    assert _agrees(catalog, root)
