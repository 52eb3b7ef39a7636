"""Openers of one new catalog at once: a collector's writer hook and its keeper, a viewer, the CLI,
a second collector. Every one of them opens it; none finds it locked."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from otel_session.catalog import CATALOG_FILE, catalog_url, open_catalog
from otel_session.catalog import engine
from otel_session.catalog.claims import ClaimTable

_PROCESSES = 3
_THREADS = 2
"""Openers in each process, as a collector has two (its writer hook's thread and its keeper)."""


@pytest.mark.sqlite_only
def test_a_new_sqlite_catalog_opens_while_another_opener_holds_its_write_lock(root: Path, monkeypatch):
    root.mkdir(parents=True)
    other = sqlite3.connect(root / CATALOG_FILE, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another opener of the new file, between its read and its switch to WAL
    waits: list[float] = []

    def pause(seconds: float) -> None:  # the opener found the lock taken: the other one is done now
        waits.append(seconds)
        if other.in_transaction:
            other.execute("COMMIT")

    monkeypatch.setattr(engine, "_pause", pause, raising=False)
    try:
        catalog = open_catalog(root)  # before: "database is locked" at once, whatever the busy timeout
    finally:
        other.close()
    try:
        assert catalog.count() == 0 and waits
        assert sqlite3.connect(root / CATALOG_FILE).execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        catalog.close()


def _open_at_once(root: str, start: Any, failures: list[str]) -> None:
    start.wait()
    try:
        catalog = open_catalog(root)
        try:
            claims = ClaimTable(catalog_url(root), owner=f"test:{root}", collector=threading.current_thread().name)
            claims.close()
            catalog.count()
        finally:
            catalog.close()
    except Exception as exc:  # noqa: BLE001 - every failure is reported back, the first one fails the test
        failures.append(f"{type(exc).__name__}: {exc}")


def _opener_process(root: str, start: Any, answers: multiprocessing.Queue) -> None:
    failures: list[str] = []
    threads = [threading.Thread(target=_open_at_once, args=(root, start, failures)) for _ in range(_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    answers.put(failures)


@pytest.mark.slow
def test_processes_and_threads_opening_one_new_root_at_once_all_open_it(root: Path):
    root.mkdir(parents=True)
    context = multiprocessing.get_context("spawn")  # no fork of pytest's threads; the environment (a catalog URL) is inherited
    start = context.Barrier(_PROCESSES * _THREADS, timeout=300)
    answers = context.Queue()
    processes = [context.Process(target=_opener_process, args=(str(root), start, answers)) for _ in range(_PROCESSES)]
    for process in processes:
        process.start()
    try:
        failures = [failure for _ in processes for failure in answers.get(timeout=300)]
    finally:
        for process in processes:
            process.join(60)
    assert failures == []
    assert all(process.exitcode == 0 for process in processes)
