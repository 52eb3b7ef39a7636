"""Runs a previous collector process left: resumed (still ``recording``) or reopened (sealed at its stop).

Contract::

    run = continued_run(writer, path, recorded_by=..., now=...)   # -> OpenRun; raises as open_run does
    is_collector_ending(record) -> bool     # the ``run_finished`` a collector wrote when it stopped

A restart is invisible to a run. A run open at a ``kill -9`` is ``recording`` on disk: the next
collector resumes it (torn tail cut) and seals it by the rules of a run that saw no restart, its
quiet time counted from the resume. A run open at a clean stop (SIGTERM) is sealed ``interrupted``
with ``reason: collector_stopped`` and ``"reopenable": true`` in ``capture.json``: when a span of it
reaches a later collector on the same root, that collector reopens it (``BundleWriter.continue_run``:
the capture goes back to ``recording``, ``"reopened": N``) and cuts that ending, so the bundle
continues under the same ``run_id`` at the next ``seq`` and ends once, with its real ending. A kill
in the middle of that stop's seal leaves the ending in a ``recording`` journal: it is cut the same
way on resume. Only this collector's own runs (``recorded_by``) are continued.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from otel_session.collector.sealing import COLLECTOR_STOPPED, OpenRun, latest_at_ns
from otel_session.bundle.read import read_bundle
from otel_session.bundle.write import BundleWriter
from otel_session.core.journal import EventType
from otel_session.normalize import genai

__all__ = ["continued_run", "is_collector_ending"]

_RUN_FINISHED = EventType.RUN_FINISHED.value


def is_collector_ending(record: dict[str, Any]) -> bool:
    """The ``run_finished`` a collector journaled itself when it stopped with the run open."""
    payload = record.get("payload")
    return record.get("type") == _RUN_FINISHED and isinstance(payload, dict) and payload.get("reason") == COLLECTOR_STOPPED


def continued_run(writer: BundleWriter, path: str | Path, *, recorded_by: str, now: float) -> OpenRun:
    """Continue the run at ``path`` (``recording``, or sealed at a collector's stop) as an open run
    whose quiet time starts ``now``; its journal is read back for the spans it holds (a retry of one
    is not journaled again) and for whether its root came."""

    def reopenable(manifest: dict[str, Any], capture: dict[str, Any]) -> bool:
        return manifest.get("recorded_by") == recorded_by and capture.get("reopenable") is True

    recorder = writer.continue_run(path, ending=is_collector_ending, reopenable=reopenable)
    records = read_bundle(recorder.path).events
    named = bool(recorder.manifest.get("agent"))
    run = OpenRun(recorder, now, resumed=True, latest_ns=latest_at_ns(records),
                  agents=None if named else genai.RunAgent(), agent=recorder.manifest.get("agent"))
    # Its root came before the restart: the seal adds no second (``interrupted``) ending.
    run.finished = run.root_seen = any(record.get("type") == _RUN_FINISHED for record in records)
    run.resumed_records = Counter(span_id for record in records if isinstance(span_id := record.get("span_id"), str))
    return run
