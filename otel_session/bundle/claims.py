"""One writer per run, without holding a descriptor per run: a writer's live lock and each run's owner mark.

Contract::

    claims = WriterClaims(root)     # <root>/.writers/<token>: made and flock-ed for this writer's life at first use
    claims.mark(building)           # a bundle being made (before its rename into place) is this writer's
    claims.claim(run_dir)           # an existing bundle, its journal flock-ed by the caller for the moment:
                                    # raises RunLockedError while another live writer owns it; then it is ours
    release(run_dir)                # the seal: the mark goes (nothing in the bundle names a writer)
    claims.close()                  # writer shutdown;  claims.abandon(): in a forked child
    remove_dead_claims(root) -> int # lock files of writers that are gone
    files = JournalFiles(limit)     # the writer thread's open journals, at most ``limit`` (``journal_limit()``)
    fd = files.fd(recorder); files.close(recorder)

Why: the one-writer lock used to be an ``flock`` on each run's journal, held while the run recorded,
so every open run held a descriptor: 20,000 open traces exhausted ``RLIMIT_NOFILE`` and new runs
were refused. Now a writer holds one lock for all its runs (an ``flock`` on its own file under
``<root>/.writers``, released by the kernel when the process dies), and a run names its owner in a
mark inside the bundle: ``.writer``, a symbolic link whose target is the owner's token (one system
call to make, one to read; never followed). A writer that finds a bundle to continue (a crash, a
reopen) takes the journal's ``flock`` for the moment of the claim (two claimers exclude each other;
an older writer that still holds that lock for good is refused too), reads the mark, and refuses
the run while the mark's writer is alive (its lock file is locked), else replaces the mark by its
own. The journal's descriptor is then only a cache (``JournalFiles``): closing it releases nothing.
"""

from __future__ import annotations

import errno
import fcntl
import itertools
import os
import uuid
from collections import OrderedDict
from typing import Any

from otel_session.bundle.files import DIR_MODE, FILE_MODE, lock_held, require_real_dir
from otel_session.core.log import get_logger

__all__ = ["CLAIMS_DIR", "MARK", "JournalFiles", "WriterClaims", "journal_limit", "release", "remove_dead_claims"]

logger = get_logger(__name__)

CLAIMS_DIR = ".writers"
"""Under the root: hidden, so no reader lists it."""
MARK = ".writer"
"""In a bundle while it records: a symbolic link to its writer's token."""

_writers = itertools.count()


class RunLockedError(RuntimeError):
    """Another writer (this or another process) holds the run directory."""


class WriterClaims:
    """One writer's lock and the marks of its runs. ``mark`` and ``claim`` may run on any thread."""

    def __init__(self, root: str) -> None:
        self._root = root
        self.token = f"{os.getpid()}.{next(_writers)}.{uuid.uuid4().hex[:12]}"
        self._lock_fd = -1

    def mark(self, building: str) -> None:
        """Name this writer the owner of the bundle being made in ``building``."""
        self._ensure_locked()
        os.symlink(self.token, f"{building}/{MARK}")

    def claim(self, run_dir: str) -> None:
        """Take over the bundle ``run_dir`` (its journal's ``flock`` held by the caller): refused with
        ``RunLockedError`` while another live writer's mark is in it."""
        self._ensure_locked()
        mark = f"{run_dir}/{MARK}"
        try:
            owner = os.readlink(mark)
        except FileNotFoundError:
            owner = None
        except OSError:  # a file or directory planted in the mark's place
            owner = ""
        if owner == self.token:
            return
        if owner is not None and writer_alive(self._root, owner):
            raise RunLockedError(f"another writer ({owner}) holds {run_dir}; one writer per run")
        staged = f"{run_dir}/{MARK}.{self.token}"
        try:
            os.unlink(staged)
        except FileNotFoundError:
            pass
        os.symlink(self.token, staged)
        os.replace(staged, mark)

    def close(self) -> None:
        """Release the lock and remove its file (writer shutdown); marks left by runs never sealed name a dead writer."""
        if self._lock_fd >= 0:
            try:
                os.unlink(f"{self._root}/{CLAIMS_DIR}/{self.token}")
            except OSError:
                pass
            os.close(self._lock_fd)
            self._lock_fd = -1

    def abandon(self) -> None:
        """In a forked child: the lock is the parent's open file; close this copy, release nothing."""
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def _ensure_locked(self) -> None:
        if self._lock_fd >= 0:
            return
        directory = f"{self._root}/{CLAIMS_DIR}"
        try:
            os.mkdir(directory, DIR_MODE)
            made = True
        except FileExistsError:
            require_real_dir(directory)  # never a lock through a symlink planted there
            made = False
        if not made:
            remove_dead_claims(self._root)
        fd = os.open(f"{directory}/{self.token}", os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException:
            os.close(fd)
            raise
        self._lock_fd = fd


def writer_alive(root: str, token: str) -> bool:
    """Whether the writer ``token`` still holds its lock (its process, or a forked child of it, lives)."""
    if "/" in token or token in ("", ".", ".."):
        return False
    return lock_held(f"{root}/{CLAIMS_DIR}/{token}")


def remove_dead_claims(root: str) -> int:
    """Remove the lock files of writers that are gone (their lock free); how many."""
    removed = 0
    try:
        entries = list(os.scandir(f"{root}/{CLAIMS_DIR}"))
    except OSError:
        return 0
    for entry in entries:
        if not writer_alive(root, entry.name):
            try:
                os.unlink(entry.path)
                removed += 1
            except OSError:
                pass
    return removed


def release(run_dir: str) -> None:
    """The run is sealed: its mark goes (a crash that brings it back leaves a dead writer's mark)."""
    try:
        os.unlink(f"{run_dir}/{MARK}")
    except OSError:
        pass


def journal_limit() -> int:
    """How many journals a writer keeps open at most: an eighth of ``RLIMIT_NOFILE``'s soft limit,
    between 4 and 256 (sockets, the catalog and the rest of the process keep the other seven)."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return 64
    if soft == resource.RLIM_INFINITY:
        return 256
    return max(4, min(256, soft // 8))


class JournalFiles:
    """The open journal descriptors of one writer, at most ``limit``: the least recently written is
    closed first, and opened again (append) when its run writes next. Writer thread only (the one
    thread that writes journals), so a descriptor is never closed under a write."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit or journal_limit()
        self._open: OrderedDict[Any, None] = OrderedDict()

    def fd(self, owner: Any) -> int:
        """``owner``'s journal (a recorder: ``_events_fd``, ``journal_path``), open for append."""
        if owner._events_fd >= 0:
            self._open.move_to_end(owner)
            return owner._events_fd
        self._close_oldest(keep=self.limit - 1)
        try:
            fd = os.open(owner.journal_path, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW)
        except OSError as exc:
            if exc.errno not in (errno.EMFILE, errno.ENFILE) or not self._open:
                raise
            self._close_oldest(keep=0)  # the process's other descriptors (sockets) took the room: give ours back
            fd = os.open(owner.journal_path, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW)
        owner._events_fd = fd
        self._open[owner] = None
        return fd

    def _close_oldest(self, *, keep: int) -> None:
        while len(self._open) > keep:
            oldest, _ = self._open.popitem(last=False)
            fd, oldest._events_fd = oldest._events_fd, -1
            os.close(fd)

    def close(self, owner: Any) -> None:
        """Close ``owner``'s journal if it is open (its seal, a rewrite that replaced the file)."""
        self._open.pop(owner, None)
        fd, owner._events_fd = owner._events_fd, -1
        if fd >= 0:
            os.close(fd)

    @property
    def open_count(self) -> int:
        return len(self._open)
