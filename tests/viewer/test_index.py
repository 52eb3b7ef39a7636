"""The sessions index at scale: a settled session directory is not listed again and a sealed run's
entry is kept without a stat, while new, removed and recording runs still show as they are."""

from __future__ import annotations

import os
import shutil
import time
import uuid

import pytest

from otel_session.viewer import store as store_module
from otel_session.viewer.store import BundleStore
from otel_session.bundle.write import BundleWriter


def _run(writer: BundleWriter, session_id: str, *, seal: bool = True):
    run = writer.open_run(session_id=session_id, run_id=f"run-{uuid.uuid4()}")
    run.append("run_started", {"kind": "live"})
    run.append("turn_started", {"state": "greet"}, turn_index=0)
    if seal:
        run.close(run_status="ok")
    return run


def _settle(root) -> None:
    """Age every session directory past the store's settling time (as minutes of quiet would)."""
    past = time.time() - 60
    for session in (root / "sessions").iterdir():
        os.utime(session, (past, past))


@pytest.fixture
def writer(tmp_path):
    writer = BundleWriter(tmp_path)
    yield writer
    writer.shutdown()


def _listed(store: BundleStore) -> dict[str, list[tuple[str, str, int]]]:
    return {
        session["session_id"]: sorted((run["run_id"], run["capture_status"], run["event_count"]) for run in session["runs"])
        for session in store.sessions()
    }


def test_sealed_runs_in_settled_sessions_cost_no_stat_on_a_later_listing(tmp_path, writer, monkeypatch):
    sealed = [_run(writer, f"s{number % 5}") for number in range(20)]
    live = _run(writer, "s0", seal=False)
    assert writer.force_flush(10_000)
    _settle(tmp_path)
    store = BundleStore(tmp_path)
    first = _listed(store)
    assert sum(len(runs) for runs in first.values()) == 21

    statted: list = []
    real_stat_key = store_module._stat_key
    monkeypatch.setattr(store_module, "_stat_key", lambda path: statted.append(path) or real_stat_key(path))
    listed_dirs: list = []
    real_names = store_module.run_dir_names
    monkeypatch.setattr(store_module, "run_dir_names", lambda path: listed_dirs.append(path) or real_names(path))
    assert _listed(store) == first
    assert statted == [live.path], "only the recording run is looked at again"
    assert listed_dirs == [], "no settled session directory is listed again"

    live.append("turn_finished", {"state": "done"}, turn_index=0)  # the live run grows: its entry follows
    assert writer.force_flush(10_000)
    (entry,) = [run for run in _listed(store)["s0"] if run[0] == live.run_id]
    assert entry[2] == 3
    assert {run.run_id for run in sealed} <= {run_id for runs in _listed(store).values() for run_id, _, _ in runs}


def test_runs_added_or_removed_after_a_listing_show_at_once(tmp_path, writer):
    kept = _run(writer, "s1")
    removed = _run(writer, "s1")
    assert writer.force_flush(10_000)
    _settle(tmp_path)
    store = BundleStore(tmp_path)
    assert {run_id for run_id, _, _ in _listed(store)["s1"]} == {kept.run_id, removed.run_id}
    shutil.rmtree(removed.path)  # a retention job
    added = _run(writer, "s1")
    assert writer.force_flush(10_000)
    assert {run_id for run_id, _, _ in _listed(store)["s1"]} == {kept.run_id, added.run_id}
    other = _run(writer, "s2")  # a new session
    assert writer.force_flush(10_000)
    assert other.run_id in {run_id for run_id, _, _ in _listed(store)["s2"]}
