"""Where bundles live on disk (SPEC §5.1), and the only place paths are derived from ids.

``<root>/sessions/<session-dir>/<run_id>/`` for live runs and
``<root>/evals/<eval-dir>/sessions/<session-dir>/<run_id>/`` for eval runs. A session id that is a
safe name (``[A-Za-z0-9._-]{1,128}``, not ``.`` or ``..``) is its own directory name; any other id
is stored as ``~`` followed by the first 40 hex digits of the SHA-256 of its UTF-8 bytes (the true
id is in ``run.json``). No path derived from input ever leaves the root.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path

__all__ = [
    "CAPTURE_FILE",
    "EVENTS_FILE",
    "FEEDBACK_FILE",
    "INDEX_DIR",
    "RUN_FILE",
    "UnsafePathError",
    "inside_root",
    "is_encoded_dir_name",
    "is_valid_run_id",
    "run_dir",
    "run_path",
    "safe_dir_name",
    "session_dir",
    "session_dir_name",
]

RUN_FILE = "run.json"
EVENTS_FILE = "events.ndjson"
CAPTURE_FILE = "capture.json"
FEEDBACK_FILE = "feedback.ndjson"
INDEX_DIR = Path(".index", "replay")
"""Under a bundle root: where the derived read data of its sealed runs lives (``replay.index``),
at the run's own path below it."""

_SAFE_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")
_RUN_ID = re.compile(r"run-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_ENCODED_PREFIX = "~"
_ENCODED_NAME = re.compile(r"~[0-9a-f]{40}")


class UnsafePathError(ValueError):
    """An id would resolve outside the bundle root."""


def safe_dir_name(identifier: str) -> str:
    """Return the directory name that stores ``identifier`` (a session or eval id)."""
    if _SAFE_NAME.fullmatch(identifier) and identifier not in (".", ".."):
        return identifier
    digest = hashlib.sha256(identifier.encode("utf-8", "surrogatepass")).hexdigest()
    return _ENCODED_PREFIX + digest[:40]


def is_encoded_dir_name(name: str) -> bool:
    """True for a name :func:`safe_dir_name` made from a digest (``~`` and 40 hex digits): it
    holds no id, only a hash of one."""
    return _ENCODED_NAME.fullmatch(name) is not None


def is_valid_run_id(run_id: str) -> bool:
    """True for ``run-`` followed by a lower-case UUID, the only run ids this project writes."""
    return isinstance(run_id, str) and _RUN_ID.fullmatch(run_id) is not None


def session_dir(root: Path, session_id: str, *, eval_id: str | None = None) -> Path:
    """Return the directory of a session's runs (live, or under one eval)."""
    return inside_root(root, _session_dir(root, session_id, eval_id))


def run_dir(root: Path, session_id: str, run_id: str, *, eval_id: str | None = None) -> Path:
    """Return the bundle directory of one run; raise ``UnsafePathError`` for a malformed run id."""
    return inside_root(root, run_path(root, session_id, run_id, eval_id=eval_id))


def run_path(root: Path, session_id: str, run_id: str, *, eval_id: str | None = None) -> Path:
    """The bundle directory of one run, from its ids alone (no file system access).

    Every component is a safe name, so the path stays under ``root`` unless a directory on the way
    is a symlink: a writer creating it checks that with ``lstat`` (see ``run_dir`` for readers).
    """
    if not is_valid_run_id(run_id):
        raise UnsafePathError(f"malformed run id {run_id!r}: expected 'run-' followed by a UUID")
    return Path(f"{session_dir_name(os.fspath(root), session_id, eval_id)}/{run_id}")


def _session_dir(root: Path, session_id: str, eval_id: str | None) -> Path:
    return Path(session_dir_name(os.fspath(root), session_id, eval_id))


def session_dir_name(root: str, session_id: str, eval_id: str | None = None) -> str:
    """:func:`session_dir` as a string, unchecked: the writer's per-run path, built without ``pathlib``."""
    base = os.path.join(root, "sessions" if eval_id is None else f"evals/{safe_dir_name(eval_id)}/sessions")
    return f"{base}/{safe_dir_name(session_id)}"


def inside_root(root: Path, path: Path) -> Path:
    """``path`` when it resolves inside ``root`` (a symlink planted under the root cannot lead out)."""
    real_root = _real_root(os.fspath(root))
    real_path = os.path.realpath(path)
    if real_path != real_root and not real_path.startswith(real_root.rstrip(os.sep) + os.sep):
        raise UnsafePathError(f"{path} resolves outside the bundle root {root}")
    return path


@functools.lru_cache(maxsize=64)
def _real_root(root: str) -> str:
    return os.path.realpath(root)
