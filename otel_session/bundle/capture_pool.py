"""Spare ``capture.json`` inodes of one writer: a seal frees no inode, an open creates no capture.

Contract::

    pool = CapturePool(root)            # <root>/.capture-pool/<pid>.<n>/, made at the first keep()
    pool.take(path) -> bool             # a spare ``recording`` capture renamed to ``path``; False: create one
    entry = pool.keep(capture_path)     # link the capture a seal is about to replace; None: pool full or off
    pool.kept(entry); pool.drop(entry)  # the replace durable (a spare now) / failed (the link removed)
    pool.close()                        # remove the pool (writer shutdown)
    remove_dead_pools(root) -> int      # pools of dead processes: removed, never reused

Why: on ext4 without a journal (this project's machines) allocating an inode scans past every inode
freed in the last minute, and every seal freed one (the ``recording`` capture replaced by the
terminal one, SPEC §5.3). Here the seal links the ``recording`` capture into the pool just before
the rename over it, so the rename frees nothing, and the next bundle's open renames that inode into
place instead of creating and writing one: its bytes are the ``recording`` document already.

Every bundle's capture stays an inode of its own (the pool's link is gone before any other
write to it: ``drop`` before the in-place fallback of a full disk), so nothing a reader sees
changes. Only captures this writer made are kept (a continued bundle's came from another process).
A pool belongs to one writer object: a forked child or a new process never adopts it (an entry may
be a crashed bundle's live ``capture.json``, linked before a rename the crash prevented); a dead
process's pool is removed when the next writer makes its own. Any failure (no hard links, another
file system: ``EXDEV``, a read-only root) turns the pool off: the writer creates captures as before.
"""

from __future__ import annotations

import collections
import fcntl
import itertools
import os
import shutil

from otel_session.bundle.files import DIR_MODE, process_alive, require_real_dir
from otel_session.core.layout import UnsafePathError
from otel_session.core.log import get_logger, log_setting

__all__ = ["POOL_DIR", "CapturePool", "remove_dead_pools"]

logger = get_logger(__name__)

POOL_DIR = ".capture-pool"
"""Under the root: hidden, so no reader lists it (``find_bundles`` skips hidden directories)."""
DEFAULT_LIMIT = 512
"""Spare inodes a pool holds at most (each a ``recording`` document: one block)."""

_writers = itertools.count()
_made_here: set[str] = set()
"""The pool directories this process made (a pool named by this pid that is not here is a dead
process's whose pid came back: a container's pid 1 after a restart)."""


class CapturePool:
    """One writer's spare captures. ``take`` may run on any thread; the rest on the writer thread."""

    def __init__(self, root: str, *, limit: int = DEFAULT_LIMIT) -> None:
        self._root = root
        self._limit = limit
        self._dir = ""
        """The pool's directory once made ("" before, or when it is off)."""
        self._lock_fd = -1
        """The pool's directory, open and ``flock``-ed for this writer's life: it is alive."""
        self._off = False
        self._spares: collections.deque[str] = collections.deque()
        """Entries holding a spare ``recording`` capture (append and pop are atomic)."""
        self._names = itertools.count()

    def take(self, path: str) -> bool:
        """Rename a spare capture to ``path`` (which must not exist); False when there is none."""
        try:
            name = self._spares.pop()
        except IndexError:
            return False
        try:
            os.rename(f"{self._dir}/{name}", path)
        except OSError as exc:
            logger.info("capture pool %s: could not reuse %s (%s); creating captures from now on", self._dir, name, exc)
            self._off = True
            self._spares.clear()
            return False
        return True

    def keep(self, capture_path: str) -> str | None:
        """Link ``capture_path`` (a ``recording`` capture this writer made) into the pool; the entry,
        or None when the pool is full or off (the rename over it then frees the inode, as ever)."""
        if self._off or len(self._spares) >= self._limit or not (self._dir or self._make()):
            return None
        name = str(next(self._names))
        try:
            os.link(capture_path, f"{self._dir}/{name}")
        except OSError as exc:
            logger.info("capture pool %s off (%s): creating captures from now on", self._dir, exc)
            self._off = True
            self._spares.clear()
            return None
        return name

    def kept(self, name: str) -> None:
        """The capture linked as ``name`` was replaced, durably: its inode is a spare now."""
        self._spares.append(name)

    def drop(self, name: str) -> None:
        """The replace of the capture linked as ``name`` failed: remove the link, so that no
        in-place rewrite of that capture writes through a second name."""
        try:
            os.unlink(f"{self._dir}/{name}")
        except OSError as exc:  # the entry is never taken (not a spare) and goes with the pool
            logger.warning("capture pool %s: could not remove %s (%s)", self._dir, name, exc)

    def close(self) -> None:
        """Remove the pool and its spares (frees their inodes, once); the pools' directory too if
        no other writer's pool is in it."""
        self._off = True
        self._spares.clear()
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            try:
                os.rmdir(os.path.dirname(self._dir))
            except OSError:
                pass  # another writer's pool is there
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def abandon(self) -> None:
        """In a forked child: the pool is the parent's; touch none of it (its lock stays the parent's)."""
        self._off = True
        self._spares.clear()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # not LOCK_UN: the lock is the parent's open file too
            self._lock_fd = -1

    def _make(self) -> bool:
        """Make this writer's pool directory, locked; remove dead processes' pools first."""
        parent = f"{self._root}/{POOL_DIR}"
        directory = f"{parent}/{os.getpid()}.{next(_writers)}"
        try:
            remove_dead_pools(self._root)  # a dead one's of this name too (this pid's, before a restart)
            _made_here.add(directory)  # before it exists: another writer's remove_dead_pools skips it
            for attempt in range(2):
                try:
                    os.mkdir(parent, DIR_MODE)
                except FileExistsError:
                    require_real_dir(parent)  # never a pool through a symlink planted there
                try:
                    os.mkdir(directory, DIR_MODE)
                    break
                except FileNotFoundError:  # the last other writer's close removed ``parent`` meanwhile
                    if attempt:
                        raise
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BaseException:
                os.close(fd)
                raise
        except (OSError, UnsafePathError) as exc:
            logger.info("no capture pool under %s (%s): creating captures", log_setting(str(self._root)), exc)
            self._off = True
            return False
        self._dir, self._lock_fd = directory, fd
        return True


def remove_dead_pools(root: str) -> int:
    """Remove the pools under ``root`` whose process is gone (its lock free); how many.

    A pool is never reused: one of its entries may be a crashed bundle's live ``capture.json``
    (removing the pool's name for it leaves the bundle's). A live process's pools, and those a
    forked child of a dead one still holds, are left alone; one named by this process's pid that
    this process did not make is a dead one's.
    """
    removed = 0
    try:
        entries = list(os.scandir(f"{root}/{POOL_DIR}"))
    except OSError:
        return 0
    for entry in entries:
        pid = entry.name.split(".", 1)[0]
        if not pid.isdigit() or entry.path in _made_here or int(pid) != os.getpid() and process_alive(int(pid)):
            continue
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # held: a forked child of that process writes with it
        finally:
            os.close(fd)
        shutil.rmtree(entry.path, ignore_errors=True)
        removed += 1
    return removed
