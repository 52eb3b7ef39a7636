"""``--store`` on ``sessions``, ``facts``, ``replay``, ``verify`` and ``reindex``: a host with no bundles
of its own reads every sealed run a real collector stored in a real SeaweedFS, with the catalog in
SQLite (a shared file) and in a real PostgreSQL."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from otel_session.bundle.fetched import FETCHED_DIR, FetchedRuns
from otel_session.cli import main
from otel_session.testing import wait_for
from tests.store.conftest import s3_client
from tests.catalog.conftest import postgres, postgres_url  # noqa: F401 - the session's PostgreSQL fixture
from tests.catalog.test_sync import _post, _trace_request

KEY = "store-cli-test"
PII_SESSION = "caller-+14155550100"


def _collector(root: Path, store_url: str, catalog: str) -> tuple[subprocess.Popen, int]:
    process = subprocess.Popen(
        [sys.executable, "-m", "otel_session.cli", "collect", "--dir", str(root), "--grpc", "off",
         "--http", "127.0.0.1:0", "--seal-after", "0.05", "--store", store_url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "OTEL_SESSION_REDACTION_KEY": KEY, "OTEL_SESSION_CATALOG": catalog})
    banner = process.stdout.readline()
    assert "otel-session collector:" in banner, process.stderr.read()
    return process, int(banner.split("http=")[1].split()[0].rsplit(":", 1)[1])


def _stored_locations(catalog: str) -> list[str | None]:
    from otel_session.catalog import RunQuery, SqlCatalog
    from otel_session.catalog.settings import catalog_url

    opened = SqlCatalog(catalog_url(".", catalog), "reader")
    try:
        return [row.location for row in opened.page(RunQuery(limit=100, with_total=False)).rows]
    finally:
        opened.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def shared_catalog(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgresql":
        return postgres_url(request.getfixturevalue("postgres"))
    return f"sqlite:///{tmp_path / 'shared-catalog.sqlite3'}"


@pytest.fixture
def stored(tmp_path: Path, store, shared_catalog: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict]:
    """Two sessions (one whose id holds a phone number) recorded by a collector with ``--store``:
    uploaded, their rows' locations in the shared catalog, no local copy left."""
    for name in ("OTEL_SESSION_CATALOG", "OTEL_SESSION_STORE", "OTEL_SESSION_ORIGIN", "OTEL_SESSION_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_SESSION_REDACTION_KEY", KEY)
    collector_root = tmp_path / "collector-host"
    store_url = f"s3://{store.bucket}/{store.prefix}"
    process, port = _collector(collector_root, store_url, shared_catalog)
    try:
        _post(port, _trace_request("call-a"))
        _post(port, _trace_request(PII_SESSION))
        wait_for(lambda: (locations := _stored_locations(shared_catalog)) and len(locations) == 2
                 and None not in locations and not list(collector_root.glob("sessions/*/run-*")), timeout=90)
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    yield {"store": store, "url": store_url, "catalog": shared_catalog, "collector_root": collector_root}


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _sessions(root: Path, stored: dict) -> list[dict]:
    code, out, err = _cli("sessions", "--dir", str(root), "--store", stored["url"], "--catalog", stored["catalog"], "--json")
    assert code == 0, err
    return orjson.loads(out)


def test_a_host_without_bundles_lists_shows_facts_replays_and_verifies_every_stored_run(tmp_path: Path, stored: dict):
    root = tmp_path / "cli-host"  # no bundles, not even the directory
    listed = _sessions(root, stored)
    assert len(listed) == 2 and "call-a" in {session["session_id"] for session in listed}
    runs = {session["session_id"]: session["runs"][0] for session in listed}
    assert all(run["location"].startswith(stored["url"] + "/sessions/") for run in runs.values())

    flags = ("--dir", str(root), "--store", stored["url"], "--catalog", stored["catalog"])
    code, out, err = _cli("facts", "call-a", *flags)
    assert code == 0, err
    assert out.startswith(f"session call-a  run {runs['call-a']['run_id']}") and "integrity: complete" in out
    code, out, err = _cli("facts", "call-a", "--all-runs", "--json", *flags)
    assert code == 0 and orjson.loads(out)["runs"][0]["run_id"] == runs["call-a"]["run_id"], err
    code, out, err = _cli("replay", "call-a", runs["call-a"]["run_id"], "--json", *flags)
    assert code == 0 and orjson.loads(out)["run_id"] == runs["call-a"]["run_id"], err
    assert (root / FETCHED_DIR / runs["call-a"]["path"] / "events.ndjson").is_file(), "kept in the bounded cache"

    code, out, err = _cli("facts", "never-recorded", *flags)
    assert code == 1 and "session 'never-recorded' has no runs" in err and "Traceback" not in err

    code, out, err = _cli("verify", "--store", stored["url"])
    assert code == 0, out + err
    lines = sorted(out.splitlines())
    assert len(lines) == 2 and all(line.startswith("complete") for line in lines)
    assert sorted(line.split()[-1] for line in lines) == sorted(run["location"] for run in runs.values())
    code, out, _ = _cli("verify", "--store", stored["url"], "--json")
    assert code == 0 and sorted(entry["path"] for entry in orjson.loads(out)) == sorted(run["location"] for run in runs.values())


def test_reindex_store_rebuilds_a_catalog_from_the_objects_and_lists_each_run_once(tmp_path: Path, stored: dict):
    root = tmp_path / "fresh-host"
    code, out, err = _cli("reindex", "--dir", str(root), "--store", stored["url"])  # its own, empty SQLite catalog
    assert code == 0 and out.startswith("indexed 2 run(s)"), err
    code, out, err = _cli("sessions", "--dir", str(root), "--json")
    assert code == 0, err
    listed = orjson.loads(out)
    assert len(listed) == 2 and all(session["runs"][0]["location"].startswith(stored["url"]) for session in listed)
    assert all(session["runs"][0]["event_count"] > 0 and session["runs"][0]["status"] == "complete" for session in listed)
    code, out, _ = _cli("reindex", "--dir", str(root), "--store", stored["url"])
    assert code == 0 and out.startswith("indexed 2 run(s)")
    assert len(orjson.loads(_cli("sessions", "--dir", str(root), "--json")[1])) == 2, "rebuilt, not added twice"

    # A host whose own catalog is new fills it from the store at its first list.
    code, out, err = _cli("sessions", "--dir", str(tmp_path / "first-list-host"), "--store", stored["url"], "--json")
    assert code == 0 and len(orjson.loads(out)) == 2, err

    # In the shared catalog the collector's rows already say where the runs are: none is added twice.
    code, out, err = _cli("reindex", "--dir", str(root), "--store", stored["url"], "--catalog", stored["catalog"])
    assert code == 0 and out.startswith("indexed 0 run(s)"), err
    assert sum(len(session["runs"]) for session in _sessions(tmp_path / "other-host", stored)) == 2


def test_a_session_id_holding_pii_is_found_by_the_hashed_id_sessions_shows_and_never_reaches_an_object_key(
        tmp_path: Path, stored: dict, monkeypatch: pytest.MonkeyPatch):
    root = tmp_path / "cli-host"
    [hashed] = [session["session_id"] for session in _sessions(root, stored) if session["session_id"] != "call-a"]
    assert hashed.startswith("caller-hmac-sha256:") and "4155550100" not in hashed
    flags = ("--dir", str(root), "--store", stored["url"], "--catalog", stored["catalog"])
    for typed in (hashed, PII_SESSION):  # as listed, and as the app knows it (the key hashes it here)
        code, out, err = _cli("facts", typed, *flags)
        assert code == 0 and out.startswith(f"session {hashed}  run "), err
        assert "4155550100" not in out + err
    run_id = out.split()[3]
    code, out, err = _cli("replay", hashed, run_id, "--json", *flags)
    assert code == 0 and orjson.loads(out)["run_id"] == run_id, err

    # Locally too: the same run in a root of its own (the fetched copy), by its hashed id.
    local = root / FETCHED_DIR
    monkeypatch.delenv("OTEL_SESSION_REDACTION_KEY")
    code, out, err = _cli("facts", hashed, "--dir", str(local))
    assert code == 0 and out.startswith(f"session {hashed}  run {run_id}"), err

    # An id the store does not hold: the catalog is asked for its keyed hash only, and no answer echoes it.
    asked: list[str] = []
    monkeypatch.setenv("OTEL_SESSION_REDACTION_KEY", KEY)
    fetched = FetchedRuns(stored["store"], root, lambda session_id: asked.append(session_id) or [])
    assert fetched.fetch_session("caller-+14155559999") is None
    assert asked and not [session_id for session_id in asked if "4155559999" in session_id], asked
    code, out, err = _cli("facts", "caller-+14155559999", *flags)
    assert code == 1 and "4155559999" not in out + err and "has no runs" in err

    # The viewer on the same host: by the hashed id and by the id as the app knows it.
    from otel_session.viewer import create_app

    app = create_app({"BUNDLE_DIR": str(tmp_path / "viewer-host"), "TESTING": True, "STORE": stored["url"],
                      "CATALOG": stored["catalog"]})
    try:
        client = app.test_client()
        for typed in (hashed, PII_SESSION):
            answer = client.get("/api/sessions/" + urllib.parse.quote(typed, safe="") + "/runs")
            assert answer.status_code == 200 and "4155550100" not in answer.get_data(as_text=True), answer.get_data(as_text=True)
    finally:
        app.extensions["otel_session_listing"].close()

    client = s3_client()
    keys = [entry["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=stored["store"].bucket)
            for entry in page.get("Contents", [])]
    assert len([key for key in keys if key.startswith(stored["store"].prefix + "/")]) == 2
    assert not [key for key in keys if "4155550100" in key or "+1415" in key or "caller-+" in key], keys


def test_store_errors_are_one_line(tmp_path: Path, s3, bucket: str, monkeypatch: pytest.MonkeyPatch):
    for name in ("OTEL_SESSION_CATALOG", "OTEL_SESSION_STORE"):
        monkeypatch.delenv(name, raising=False)
    root = str(tmp_path / "host")
    for command in (["sessions"], ["facts", "call-a"], ["replay", "call-a", "run-0000"], ["reindex"], ["verify"]):
        where = [] if command == ["verify"] else ["--dir", root]
        code, _, err = _cli(*command, *where, "--store", "ftp://bucket")
        assert code == 2 and "s3://BUCKET[/PREFIX]" in err and "Traceback" not in err, (command, err)
        code, _, err = _cli(*command, *where, "--store", "s3://no-such-bucket/p")
        assert code == 1 and "no such bucket" in err and len(err.strip().splitlines()) == 1, (command, err)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    code, _, err = _cli("sessions", "--dir", root, "--store", f"s3://{bucket}/p")
    assert code == 1 and f"cannot reach the store at http://127.0.0.1:{port}" in err and len(err.strip().splitlines()) == 1


def test_fetched_copies_stay_within_their_bound_least_recently_used_out(tmp_path: Path, stored: dict):
    from otel_session.catalog import SqlCatalog
    from otel_session.catalog.settings import catalog_url
    from otel_session.replay.index import index_path, open_run_index

    catalog = SqlCatalog(catalog_url(".", stored["catalog"]), "reader")
    try:
        paths = {session: catalog.stored_paths(session) for session in ("call-a",)}
        everything = sorted(stored["store"].list_runs())
    finally:
        catalog.close()
    assert len(everything) == 2 and paths["call-a"][0] in everything
    first, second = everything
    fetched = FetchedRuns(stored["store"], tmp_path / "host", lambda _session: [], max_bytes=1)
    assert fetched.fetch([first]) == [first]
    first_index = index_path(fetched.directory, fetched.directory / first)
    assert open_run_index(fetched.directory, fetched.directory / first) is not None and first_index.is_dir()
    assert fetched.fetch([second]) == [second]
    assert not (fetched.directory / first).exists() and (fetched.directory / second).is_dir()
    assert not first_index.exists()  # the index built of an evicted copy goes with it
    assert fetched.cached_bytes > 0
    roomy = FetchedRuns(stored["store"], tmp_path / "host", lambda _session: [], max_bytes=10 << 20)
    roomy.fetch(everything)
    assert all((roomy.directory / relative).is_dir() for relative in everything)


def test_credentials_the_store_refuses_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from tests.s3_server import S3Server, S3Unavailable

    try:
        server = S3Server.start(strict=True)
    except S3Unavailable as exc:
        pytest.skip(f"no S3 server here: {exc}")
    try:
        for name, value in server.env.items():
            monkeypatch.setenv(name, value)
        server.make_bucket("guarded")
        code, _, err = _cli("sessions", "--dir", str(tmp_path / "host"), "--store", "s3://guarded/p")
        assert code == 0, err
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
        for command in (["sessions"], ["facts", "call-a"], ["reindex"]):
            code, _, err = _cli(*command, "--dir", str(tmp_path / "host"), "--store", "s3://guarded/p")
            assert code == 1 and "refused the credentials" in err and len(err.strip().splitlines()) == 1, (command, err)
        code, _, err = _cli("verify", "--store", "s3://guarded/p")
        assert code == 1 and "refused the credentials" in err, err
    finally:
        server.stop()


def test_a_store_from_the_environment_that_is_down_never_stops_a_local_read(tmp_path: Path, s3, bucket: str,
                                                                            monkeypatch: pytest.MonkeyPatch):
    from otel_session.bundle.write import BundleWriter
    from tests.viewer.conftest import BASE_NS, new_run_id, write_booking_run

    for name in ("OTEL_SESSION_CATALOG", "OTEL_SESSION_STORE"):
        monkeypatch.delenv(name, raising=False)
    root = tmp_path / "collector-host"
    writer = BundleWriter(root)
    try:
        run = write_booking_run(writer, "local-call", new_run_id(), BASE_NS)
        assert run.wait_sealed(30) and writer.force_flush(30_000)
    finally:
        writer.shutdown()
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")  # the store is down
    monkeypatch.setenv("OTEL_SESSION_STORE", f"s3://{bucket}/p")
    code, out, err = _cli("facts", "local-call", "--dir", str(root))
    assert code == 0 and out.startswith("session local-call"), err
    code, out, err = _cli("sessions", "--dir", str(root))  # a new catalog: the store's runs would be listed too
    assert code == 0 and "local-call" in out, err
    assert err.startswith("warning: the store's runs are not listed:") and len(err.strip().splitlines()) == 1, err
    code, _, err = _cli("facts", "elsewhere", "--dir", str(root))  # not here, so the store is asked: it is down
    assert code == 1 and "session 'elsewhere' has no runs" in err
    code, _, err = _cli("verify")  # no paths: the store's runs, which cannot be read now
    assert code == 1 and f"cannot reach the store at http://127.0.0.1:{port}" in err


def test_verify_store_reads_an_object_that_is_no_bundle_as_invalid(tmp_path: Path, store, monkeypatch: pytest.MonkeyPatch):
    import uuid

    monkeypatch.delenv("OTEL_SESSION_STORE", raising=False)
    relative = f"sessions/odd/run-{uuid.uuid4()}"
    s3_client().put_object(Bucket=store.bucket, Key=store.key(relative), Body=b"not a tar archive")
    code, out, err = _cli("verify", "--store", f"s3://{store.bucket}/{store.prefix}")
    assert code == 1 and "Traceback" not in err
    [line] = out.splitlines()
    assert line.startswith("invalid") and line.split()[3] == store.location(relative)
