"""One build of a run's replay index at a time, across threads and processes (issue 30).

Contract::

    with build_turn(root, directory, wait_s=BUILD_WAIT_S):
        ...   # this caller's turn: load what a build before it kept, else build

A build holds an exclusive ``flock`` on ``<index directory>/build.lock`` while it reads the journal
and writes the files: the collector's build at seal (``replay.indexer``, in its child), a viewer's
first open, the CLI's. Whoever comes while one is in progress waits for it, polling, at most
``wait_s``, instead of building the same index again beside it (at 1M records: 20 s of CPU and
0.9 GB each); it then loads what that build kept. The kernel drops the lock of a process that dies
(a killed child), so nothing stale holds it; one that never ends (a suspended build) is waited for
``wait_s``, then built beside. A root that cannot be written has no lock: its readers build alone,
as before.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from otel_session.bundle import files
from otel_session.core import layout
from otel_session.core.log import get_logger

__all__ = ["BUILD_WAIT_S", "LOCK_FILE", "build_turn"]

logger = get_logger(__name__)

LOCK_FILE = "build.lock"
BUILD_WAIT_S = 180.0
"""The longest a reader waits for a build in progress: a 1M-record build at seal took 92 s of wall
time, niced on a loaded machine. Past it (the builder stopped, not dead) the reader builds beside it."""
_POLL_S = (0.02, 0.5)  # first and longest pause between two tries


@contextmanager
def build_turn(root: Path, directory: Path, *, wait_s: float = BUILD_WAIT_S) -> Iterator[None]:
    """Hold the run's build lock while the body builds, once any build holding it has ended."""
    fd = _open_lock(root, directory)
    if fd is None:
        yield
        return
    try:
        if not _try_lock(fd):
            logger.info("replay index of %s: a build is in progress; waiting for it (at most %.0f s)", directory, wait_s)
            if not _wait_lock(fd, wait_s):
                logger.warning("replay index of %s: the build in progress did not end in %.0f s; building it beside it",
                               directory, wait_s)
        yield
    finally:
        os.close(fd)  # releases the lock


def _open_lock(root: Path, directory: Path) -> int | None:
    try:
        files.make_private_dirs(root, directory)
        return os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
    except (OSError, layout.UnsafePathError):
        return None


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _wait_lock(fd: int, wait_s: float) -> bool:
    deadline, pause = time.monotonic() + wait_s, _POLL_S[0]
    while time.monotonic() < deadline:
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        if _try_lock(fd):
            return True
        pause = min(pause * 2, _POLL_S[1])
    return _try_lock(fd)
