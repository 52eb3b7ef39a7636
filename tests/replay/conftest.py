"""Fixtures for the replay and facts tests: the shared journals, real bundles through the real writer."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from otel_session.bundle.write import BundleWriter

_clock = itertools.count(1_800_000_000_000_000_000, 1_000_000)


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[BundleWriter]:
    bundle_writer = BundleWriter(tmp_path)
    yield bundle_writer
    bundle_writer.shutdown()


@pytest.fixture
def record_run(writer: BundleWriter) -> Callable[..., Path]:
    """Record a run through the real writer: ``record_run(session_id, [(type, payload, ids), ...])``."""

    def record(session_id: str, script: list[tuple], *, run_id: str | None = None, created_at_ns: int | None = None,
               close: bool = True) -> Path:
        run = writer.open_run(
            session_id=session_id,
            run_id=run_id or f"run-{uuid.uuid4()}",
            agent="booking",
            created_at_ns=created_at_ns or next(_clock),
        )
        for event_type, payload, ids in script:
            run.append(event_type, payload, at_ns=next(_clock), **ids)
        if close:
            run.close()
        writer.force_flush()
        return run.path

    return record
