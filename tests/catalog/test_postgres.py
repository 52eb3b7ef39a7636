"""The catalog in a shared PostgreSQL database: only its own tables are ever dropped, URLs of
every spelling name psycopg 3, and a password never reaches a message."""

from __future__ import annotations

import socket
from pathlib import Path

import psycopg
import pytest

from otel_session.catalog import CatalogUnavailable, SqlCatalog, catalog_url, catch_up

from .conftest import postgres_url, write_runs

pytestmark = pytest.mark.sqlite_only  # each test makes its own PostgreSQL database


def _plain(url: str) -> str:
    return url.replace("+psycopg", "")


@pytest.mark.parametrize("scheme", ["postgres", "postgresql", "postgresql+psycopg"])
def test_every_postgresql_url_spelling_names_psycopg(root: Path, scheme: str):
    assert catalog_url(root, f"{scheme}://u@127.0.0.1:5/db") == "postgresql+psycopg://u@127.0.0.1:5/db"


def test_a_plain_postgresql_url_opens_the_catalog(root: Path, writer, postgres):
    url = _plain(postgres_url(postgres))
    write_runs(writer, 3)
    catalog = SqlCatalog(catalog_url(root, url), "here")
    try:
        assert catalog.rebuilt and catch_up(catalog, root).added == 3 and catalog.count() == 3
    finally:
        catalog.close()


def test_another_schema_version_drops_only_the_catalogs_tables(root: Path, writer, postgres):
    url = postgres_url(postgres)
    with psycopg.connect(_plain(url), autocommit=True) as connection:
        connection.execute("CREATE TABLE invoices (id int)")
        connection.execute("INSERT INTO invoices VALUES (7)")
    write_runs(writer, 2)
    first = SqlCatalog(url, "here")
    catch_up(first, root)
    first.close()
    with psycopg.connect(_plain(url), autocommit=True) as connection:
        connection.execute("UPDATE catalog_meta SET value = '0' WHERE key = 'schema'")
    again = SqlCatalog(url, "here")
    try:
        assert again.rebuilt and again.count() == 0
    finally:
        again.close()
    with psycopg.connect(_plain(url)) as connection:
        assert connection.execute("SELECT id FROM invoices").fetchall() == [(7,)]


def test_a_runs_table_the_catalog_did_not_make_is_refused_never_dropped(postgres):
    url = postgres_url(postgres)
    with psycopg.connect(_plain(url), autocommit=True) as connection:
        connection.execute("CREATE TABLE runs (job text)")
        connection.execute("INSERT INTO runs VALUES ('nightly')")
    with pytest.raises(CatalogUnavailable, match="did not make"):
        SqlCatalog(url)
    with psycopg.connect(_plain(url)) as connection:
        assert connection.execute("SELECT job FROM runs").fetchall() == [("nightly",)]


def test_a_password_never_reaches_the_message(postgres):
    if isinstance(postgres, str):
        pytest.skip(postgres)
    url = postgres.url("postgres").replace("otel@", "otel:s3cret-pw@").replace(f":{postgres.port}/", ":1/")
    with pytest.raises(CatalogUnavailable) as raised:
        SqlCatalog(url)
    assert "s3cret-pw" not in str(raised.value)


def test_two_roots_share_one_catalog_and_each_viewer_lists_every_run(tmp_path: Path, postgres, monkeypatch):
    """A collector's root and a viewer's root on one PostgreSQL catalog: each writes and keeps its
    own rows (a pass over one root never drops the other's), and a viewer lists them all."""
    from otel_session.bundle.write import BundleWriter
    from otel_session.catalog import CatalogHook, ENV_CATALOG, RunQuery, open_catalog
    from otel_session.viewer import create_app

    monkeypatch.setenv(ENV_CATALOG, postgres_url(postgres))
    roots = [tmp_path / "collector-a", tmp_path / "viewer-b"]
    written: dict[str, list[str]] = {}
    for root in roots:
        writer = BundleWriter(root, hooks=CatalogHook(root))
        try:
            written[root.name] = write_runs(writer, 4, session=root.name)
        finally:
            writer.shutdown()
    for root in roots:  # a pass over one root drops none of the other's rows
        catalog = open_catalog(root)
        try:
            assert catch_up(catalog, root).removed == 0 and catalog.page(RunQuery(limit=100)).total == 8
            assert {row.origin for row in catalog.page(RunQuery(limit=100)).rows} == {
                f"{socket.gethostname()}:{each.resolve()}" for each in roots}
        finally:
            catalog.close()
    apps = [create_app({"BUNDLE_DIR": str(root), "TESTING": True}) for root in roots]
    try:
        for app in apps:
            answer = app.test_client().get("/api/runs?limit=100").get_json()
            assert sorted(run["run_id"] for run in answer["runs"]) == sorted(written["collector-a"] + written["viewer-b"])
            assert "warning" not in answer
    finally:
        for app in apps:
            app.extensions["otel_session_listing"].close()


@pytest.mark.slow
def test_while_postgresql_is_down_recording_goes_on_and_the_catalog_catches_up_when_it_returns(
        tmp_path: Path, monkeypatch):
    """A collector on a PostgreSQL catalog whose server goes away: runs are recorded all the same,
    their rows kept by the catalog hook; once the server is back the hook's timer (a backoff with a
    cap, ``catalog.settings.RETRY_S``) writes them, with no later run and no other pass."""
    import signal

    from otel_session.catalog import ENV_CATALOG, RunQuery, open_catalog
    from otel_session.testing import wait_for
    from tests.catalog.test_sync import _post, _start_collector, _trace_request
    from tests.pg_server import PostgresServer, PostgresUnavailable

    try:
        server = PostgresServer.start()  # its own: this test stops it
    except PostgresUnavailable as exc:
        pytest.skip(f"no PostgreSQL server here: {exc}")
    try:
        monkeypatch.setenv(ENV_CATALOG, server.create_database("outage"))
        root = tmp_path / "bundles"
        process, port = _start_collector(root)

        def sealed() -> int:
            return len([run for run in root.glob("sessions/*/run-*")
                        if b'"recording"' not in (run / "capture.json").read_bytes()])

        def listed(search: str) -> int:
            catalog = open_catalog(root)
            try:
                return catalog.page(RunQuery(search=search)).total
            finally:
                catalog.close()

        try:
            _post(port, _trace_request("before-outage"))  # the catalog opens and is written
            wait_for(lambda: sealed() == 1 and listed("") == 1, timeout=60)
            server.halt()
            for number in range(3):
                _post(port, _trace_request(f"during-outage-{number}"))
            wait_for(lambda: sealed() == 4, timeout=60)
            server.restart()
            wait_for(lambda: listed("") == 4, timeout=90)  # no post, no viewer: the hook's own retry
            from otel_session.catalog.sync import complete_pending

            catalog = open_catalog(root)
            try:
                complete_pending(catalog, root)  # as every list does: the hook's rows hold no text yet
                assert catalog.page(RunQuery(search="during-outage")).total == 3
            finally:
                catalog.close()
        finally:
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        assert "catalog: rows not written" in err
    finally:
        server.stop()


@pytest.mark.slow
def test_a_keeper_whose_pass_failed_tries_again_soon_not_at_its_interval(root: Path, writer):
    """The viewer's keeper over a PostgreSQL catalog whose server goes away: while its passes fail
    the lists scan every bundle, so it tries again with the hook's backoff (``RETRY_S``), not at its
    next interval (5 minutes in a viewer), and a run recorded meanwhile is listed once it is back."""
    from otel_session.catalog import CatalogKeeper, RunQuery
    from otel_session.testing import wait_for
    from tests.pg_server import PostgresServer, PostgresUnavailable

    try:
        server = PostgresServer.start()  # its own: this test stops it
    except PostgresUnavailable as exc:
        pytest.skip(f"no PostgreSQL server here: {exc}")
    try:
        catalog = SqlCatalog(catalog_url(root, server.create_database("keeper")), "here")
        keeper = CatalogKeeper(catalog, root, interval_s=300).start()
        try:
            wait_for(keeper.first_pass.is_set, timeout=60)
            assert keeper.failure is None
            server.halt()
            keeper.pass_now()
            wait_for(lambda: keeper.failure is not None, timeout=60)
            write_runs(writer, 2)
            server.restart()
            wait_for(lambda: keeper.failure is None, timeout=60)  # before: the next pass 300 s on
            assert catalog.page(RunQuery()).total == 2
        finally:
            keeper.stop()
            catalog.close()
    finally:
        server.stop()
