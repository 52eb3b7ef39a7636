"""Fixtures for the run catalog: real bundles written by the real BundleWriter with the catalog
hook, a real SQLite file in the root."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from otel_session.bundle.write import BundleWriter
from otel_session.catalog import CatalogHook, SqlCatalog, catalog_url
from tests.viewer.conftest import BASE_NS, Script, new_run_id, record_booking, write_booking_run

__all__ = ["BASE_NS", "Script", "new_run_id", "record_booking", "write_booking_run", "write_runs"]


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
    catalog = SqlCatalog(catalog_url(root))
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
