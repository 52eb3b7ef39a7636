"""Past feedback and scores of a run (``feedback.ndjson``, appended by ``BundleStore.append_feedback``).

Contract::

    index = FeedbackIndex()
    index.records(run_dir)   # [{at, session_id, run_id, rating, comment, ...}] in file order
    index.score(run_dir)     # {"count", "mean"} or None without feedback
    index.scores(run_dir)    # [{at, session_id, run_id, kind: "score", name, value, comment, turn_index?}]

The file is read without following a symlink planted in its place; lines that are not feedback
records are skipped. Answers are cached while the file keeps its size, mtime and inode, in a cache
bounded by bytes (least recently used out first).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from otel_session.catalog.rows import is_score_value
from otel_session.core import layout

from .cache import ByteLRU

__all__ = ["FeedbackIndex"]

_CACHE_BYTES = 64 << 20


def _record(line: bytes) -> dict[str, Any] | None:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict):
        return None
    if type(value.get("rating")) is int or (value.get("kind") == "score" and isinstance(value.get("name"), str)
                                            and is_score_value(value.get("value"))):
        return value
    return None


class FeedbackIndex:
    """Feedback records per run directory, read again only when the file changes."""

    def __init__(self) -> None:
        self._cache = ByteLRU(_CACHE_BYTES)

    def records(self, run_dir: Path) -> list[dict[str, Any]]:
        """The ratings (feedback records) of the run, in file order."""
        return [record for record in self._lines(run_dir) if "rating" in record]

    def scores(self, run_dir: Path) -> list[dict[str, Any]]:
        """The evaluation scores of the run, in file order."""
        return [record for record in self._lines(run_dir) if "rating" not in record]

    def _lines(self, run_dir: Path) -> list[dict[str, Any]]:
        path = run_dir / layout.FEEDBACK_FILE
        try:
            stat = os.stat(path, follow_symlinks=False)
        except OSError:
            return []
        key = (stat.st_size, stat.st_mtime_ns, stat.st_ino)
        known = self._cache.get(path)
        if known is not None and known[0] == key:
            return known[1]
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
            with os.fdopen(fd, "rb") as handle:
                data = handle.read()
        except OSError:
            return []
        records = [record for record in map(_record, data.splitlines()) if record is not None]
        self._cache.put(path, (key, records), 256 + 3 * len(data))  # parsed records hold about 3× their lines
        return records

    def score(self, run_dir: Path) -> dict[str, Any] | None:
        records = self.records(run_dir)
        if not records:
            return None
        return {"count": len(records), "mean": round(sum(record["rating"] for record in records) / len(records), 2)}
