"""Sealed bundles in S3-compatible storage (a real SeaweedFS server): checked uploads, fetches
that give back the same bundle, an uploader that waits out an outage and never uploads twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from otel_session.bundle.read import read_bundle
from otel_session.bundle.store import BadStoreUrl, RunNotStored, S3Store, StoreUnavailable, open_store
from otel_session.bundle.upload import STORED_LEDGER, Uploader, chain_hooks
from otel_session.bundle.write import BundleWriter
from otel_session.testing import wait_for
from tests.store.conftest import s3_client
from tests.viewer.conftest import BASE_NS, new_run_id, write_booking_run

FILES = ("run.json", "events.ndjson", "capture.json")


def _write(root: Path, count: int, uploader: Uploader | None = None) -> list[str]:
    """``count`` sealed booking runs (told to ``uploader`` as they seal, and waited for when it
    is given: the writer's shutdown closes its hooks); their paths relative to ``root``."""
    writer = BundleWriter(root, hooks=chain_hooks(uploader))
    try:
        runs = [write_booking_run(writer, f"call-{number}", new_run_id(), BASE_NS + number * 10**9)
                for number in range(count)]
        for run in runs:
            assert run.wait_sealed(30)
        assert writer.force_flush(30_000)
        if uploader is not None:
            uploader.wait_idle(120)
    finally:
        writer.shutdown()
    return sorted(f"sessions/call-{number}/{run.run_id}" for number, run in enumerate(runs))


def _objects(store: S3Store) -> list[str]:
    listed = s3_client().list_objects_v2(Bucket=store.bucket, Prefix=store.prefix + "/")
    return sorted(entry["Key"] for entry in listed.get("Contents", []))


def test_a_sealed_run_comes_back_from_the_store_as_it_was_written(tmp_path: Path, store: S3Store):
    root = tmp_path / "collector"
    [relative] = _write(root, 1)
    stored = store.put_run(root, relative)
    assert stored.location == f"s3://{store.bucket}/{store.prefix}/{relative}.tar" and stored.size > 0
    assert store.has_run(relative) and not store.has_run(relative.replace("call-0", "call-9"))
    fetched = store.fetch_run(relative, tmp_path / "viewer-cache")
    assert fetched == tmp_path / "viewer-cache" / relative
    for name in FILES:
        assert (fetched / name).read_bytes() == (root / relative / name).read_bytes()
    back, there = read_bundle(fetched), read_bundle(root / relative)
    assert (back.status, back.manifest, back.events, back.diagnostics) == (there.status, there.manifest, there.events,
                                                                          there.diagnostics)


def test_a_run_the_store_lacks_and_a_path_leaving_the_root_are_refused(tmp_path: Path, store: S3Store):
    with pytest.raises(RunNotStored):
        store.fetch_run(f"sessions/x/{new_run_id()}", tmp_path)
    for bad in ("../etc/run-00000000-0000-4000-8000-000000000001", "/abs/run-00000000-0000-4000-8000-000000000001",
                "sessions/x/not-a-run"):
        with pytest.raises(BadStoreUrl):
            store.key(bad)
    with pytest.raises(BadStoreUrl, match="s3://BUCKET"):
        open_store("gs://bucket")
    assert open_store("") is None


def test_the_uploader_stores_each_sealed_run_once_and_removes_the_local_copy(tmp_path: Path, store: S3Store):
    root = tmp_path / "collector"
    recorded: dict[str, str] = {}
    uploader = Uploader(store, root, keep_local=False,
                        on_stored=lambda relative, stored: recorded.__setitem__(relative, stored.location)).start()
    try:
        written = _write(root, 3, uploader)
        assert uploader.pending() == 0
    finally:
        uploader.close()
    assert sorted(recorded) == written
    assert _objects(store) == sorted(f"{store.prefix}/{relative}.tar" for relative in written)
    assert not any((root / relative).exists() for relative in written)


def test_while_the_store_is_down_sealed_runs_wait_on_disk_and_are_uploaded_when_it_returns(
        tmp_path: Path, s3, store: S3Store):
    root = tmp_path / "collector"
    uploader = Uploader(store, root, keep_local=False, max_backoff_s=2).start()
    s3.pause()  # the server stops answering: connections hang until the client's timeout
    try:
        writer = BundleWriter(root, hooks=uploader)
        runs = [write_booking_run(writer, f"call-{number}", new_run_id(), BASE_NS) for number in range(2)]
        assert all(run.wait_sealed(30) for run in runs) and writer.force_flush(30_000)
        written = sorted(f"sessions/call-{number}/{run.run_id}" for number, run in enumerate(runs))
        wait_for(lambda: uploader.failures >= 2, timeout=120)  # two attempts: the first and a retry
        assert uploader.failures >= 2 and "failed" in (uploader.last_failure or "")
        assert uploader.pending() == 2, "nothing is uploaded while the store is down"
        assert all((root / relative / "events.ndjson").exists() for relative in written), "runs wait on disk"
    finally:
        s3.resume()
    try:
        assert uploader.wait_idle(120), "uploads retried with backoff once the store answers"
    finally:
        writer.shutdown()
    assert _objects(store) == sorted(f"{store.prefix}/{relative}.tar" for relative in written)
    assert not any((root / relative).exists() for relative in written)


def test_runs_sealed_before_a_crash_are_uploaded_at_the_next_start_and_never_twice(tmp_path: Path, store: S3Store):
    root = tmp_path / "collector"
    written = _write(root, 2)  # sealed, never uploaded: the collector was killed before it could
    first = Uploader(store, root, keep_local=True).start()
    try:
        assert first.wait_idle(60) and first.uploaded == 2
    finally:
        first.close()
    assert (root / STORED_LEDGER).exists()
    again = Uploader(store, root, keep_local=True).start()
    try:
        assert again.wait_idle(60) and again.uploaded == 0, "the ledger remembers what the store holds"
    finally:
        again.close()
    assert _objects(store) == sorted(f"{store.prefix}/{relative}.tar" for relative in written)


def test_without_a_key_pair_the_store_says_so_in_one_line(s3, bucket: str, monkeypatch: pytest.MonkeyPatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    store = S3Store(bucket, "no-credentials", timeout_s=2)
    with pytest.raises(StoreUnavailable) as raised:
        store.check()
    message = str(raised.value)
    assert "no credentials" in message and "AWS_ACCESS_KEY_ID" in message and len(message.splitlines()) == 1, message
