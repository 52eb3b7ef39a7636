"""Fixtures for the run catalog: real bundles written by the real BundleWriter with the catalog
hook, in a real SQLite file in the root and, again, in a real PostgreSQL server.

Every test here runs once per engine (``catalog_engine``: ``$OTEL_SESSION_CATALOG`` names a fresh
PostgreSQL database for the second run) but those marked ``sqlite_only`` (they handle the SQLite
file itself). The PostgreSQL variant is skipped, with the reason, only when no server can start."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from otel_session.bundle.write import BundleWriter
from otel_session.catalog import ENV_CATALOG, ENV_ORIGIN, CatalogHook, SqlCatalog, open_catalog
from tests.pg_server import PostgresServer, PostgresUnavailable
from tests.viewer.conftest import BASE_NS, Script, new_run_id, record_booking, write_booking_run

__all__ = ["BASE_NS", "Script", "new_run_id", "record_booking", "write_booking_run", "write_runs"]

_databases = itertools.count()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "catalog_engine" in metafunc.fixturenames:
        only_sqlite = metafunc.definition.get_closest_marker("sqlite_only") is not None
        metafunc.parametrize("catalog_engine", ["sqlite"] if only_sqlite else ["sqlite", "postgresql"], indirect=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer | str]:
    """One private PostgreSQL cluster for the session, or why none could start."""
    try:
        server = PostgresServer.start()
    except PostgresUnavailable as exc:
        yield str(exc)
        return
    yield server
    server.stop()


def postgres_url(postgres: PostgresServer | str) -> str:
    """A new empty database of the session's server (the test is skipped when there is none)."""
    if isinstance(postgres, str):
        pytest.skip(f"no PostgreSQL server here: {postgres}")
    return postgres.create_database(f"catalog_{next(_databases)}")


@pytest.fixture(autouse=True)
def catalog_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The catalog's engine for this test: SQLite in the root, or a fresh PostgreSQL database
    named by ``$OTEL_SESSION_CATALOG`` (so hooks, viewers, CLI and subprocesses all use it)."""
    monkeypatch.delenv(ENV_ORIGIN, raising=False)
    if request.param == "postgresql":
        monkeypatch.setenv(ENV_CATALOG, postgres_url(request.getfixturevalue("postgres")))
    else:
        monkeypatch.delenv(ENV_CATALOG, raising=False)
    return request.param


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "bundles"


@pytest.fixture
def writer(root: Path) -> Iterator[BundleWriter]:
    root.mkdir(parents=True, exist_ok=True)
    hook = CatalogHook(root)
    assert hook.wait_ready(60)
    writer = BundleWriter(root, hooks=hook)
    yield writer
    writer.shutdown()


@pytest.fixture
def catalog(root: Path) -> Iterator[SqlCatalog]:
    root.mkdir(parents=True, exist_ok=True)
    catalog = open_catalog(root)
    assert catalog is not None
    yield catalog
    catalog.close()


def write_runs(writer: BundleWriter, count: int, *, session: str = "s", start_ns: int = BASE_NS, step_s: int = 1) -> list[str]:
    """``count`` small sealed runs, ``step_s`` apart, sessions ``{session}{n % 3}``; their run ids."""
    ids = []
    for number in range(count):
        run_id = new_run_id()
        at_ns = start_ns + number * step_s * 10**9
        run = writer.open_run(session_id=f"{session}{number % 3}", run_id=run_id, agent=f"agent{number % 2}",
                              created_at_ns=at_ns)
        run.append("run_started", {"kind": "live"}, at_ns=at_ns)
        run.append("turn_started", {"state": "greet"}, turn_index=0, at_ns=at_ns)
        run.close(run_status="ok")
        ids.append(run_id)
    assert writer.force_flush(30_000)
    return ids
