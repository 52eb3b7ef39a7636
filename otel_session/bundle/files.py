"""File-system primitives of the bundle writer: private directories, atomic JSON, whole writes.

Contract::

    write_json_atomic(path, value, sync_dir=True)   # temporary file, fsync, rename, fsync dir (sync=False: none)
    write_terminal_capture(path, capture)           # atomic, else in place (a full disk still reports)
    fd = write_temporary(temporary_path(path), data)   # beside ``path``, unsynced, left open
    f"{directory}/.{name}{temporary_suffix()}"      # temporary_path's, one getpid for many paths
    write_new_file(path, data); write_fully(fd, data); fsync_file(path); count_complete_lines(fd)
    make_private_dirs(root, directory); require_real_dir(path)   # 0700 directories; a symlink is refused
    make_private_dir(path)                          # one, its parent known to be a real directory

Nothing here knows runs, queues or threads.
"""

from __future__ import annotations

import fcntl
import os
import stat
import threading
from pathlib import Path
from typing import Any

import orjson

from otel_session.core import layout
from otel_session.core.log import get_logger

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "count_complete_lines",
    "fsync_file",
    "json_document",
    "lock_held",
    "make_private_dir",
    "make_private_dirs",
    "require_real_dir",
    "temporary_path",
    "temporary_suffix",
    "unlink_quietly",
    "write_fully",
    "write_json_atomic",
    "write_new_file",
    "write_temporary",
    "write_terminal_capture",
]

logger = get_logger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600


def write_json_atomic(path: str | Path, value: dict[str, Any], *, sync: bool = True, sync_dir: bool = True) -> None:
    """Replace ``path`` with ``value`` as JSON: write a temporary file, fsync, rename, fsync dir.

    ``sync_dir=False`` leaves the directory fsync to a later atomic write in the same directory;
    ``sync=False`` leaves both to a later sync of the whole bundle (a seal's).
    """
    tmp = temporary_path(path)
    fd = write_temporary(tmp, json_document(value))
    try:
        try:
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        unlink_quietly(tmp)  # a full disk must not also collect temporary files
        raise
    if sync and sync_dir:
        fsync_file(Path(path).parent)


def temporary_path(path: str | Path) -> str:
    """Where an atomic replace of ``path`` writes first: hidden, beside it, this process's and thread's."""
    directory, name = os.path.split(path)
    return f"{directory}/.{name}{temporary_suffix()}"


def temporary_suffix() -> str:
    """The end of this process's and thread's temporary names (``getpid`` is a system call)."""
    return f".{os.getpid()}.{threading.get_ident()}.tmp"


def write_temporary(tmp: str | Path, data: bytes) -> int:
    """Write ``data`` to ``tmp`` (0600, truncated if a dead writer left it) and return it open, unsynced.

    On an error nothing is left behind (a full disk must not also collect temporary files).
    """
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        write_fully(fd, data)
    except BaseException:
        os.close(fd)
        unlink_quietly(tmp)
        raise
    return fd


def overwrite_json_in_place(path: Path, value: dict[str, Any]) -> None:
    """Rewrite ``path`` with ``value`` in its own blocks (write at offset 0, truncate, fsync).

    The fallback when :func:`write_json_atomic` cannot create its temporary file (disk full, a
    directory made read-only): a document under one block reuses the space it already holds. Not
    atomic — a crash in the middle can leave it unreadable — so it is used only when the atomic
    replace already failed.
    """
    data = json_document(value)
    fd = os.open(path, os.O_WRONLY)
    try:
        written = 0
        while written < len(data):
            written += os.pwrite(fd, data[written:], written)
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    finally:
        os.close(fd)


def json_document(value: dict[str, Any]) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def write_fully(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def unlink_quietly(path: str | Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def write_terminal_capture(path: Path, capture: dict[str, Any]) -> None:
    """Replace the capture atomically; on a full disk or read-only directory, in place instead.

    Without the fallback a disk-full failure would leave ``recording`` on disk: the failure the
    capture exists to report could not be reported.
    """
    try:
        write_json_atomic(path, capture)
    except OSError as exc:
        logger.warning("atomic replace of %s failed (%s); rewriting it in place", path, exc)
        overwrite_json_in_place(path, capture)



def make_private_dirs(root: Path, directory: Path) -> None:
    """Make ``directory`` and every missing directory between it and ``root`` (0700; ``root`` and
    its own parents too, if missing). A directory on the way under ``root`` that is a symlink or a
    file raises ``UnsafePathError``: ``<root>/sessions`` linked elsewhere would put whole bundles
    outside the root. ``root`` itself may be a symlink (the user chose it)."""
    missing = []
    current = root
    while not current.exists():
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        make_private_dir(path)
    current = root
    for part in directory.relative_to(root).parts:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            make_private_dir(current)
            continue
        if not stat.S_ISDIR(mode):
            raise layout.UnsafePathError(f"{current} is not a directory (a symlink or a file in its place)")


def make_private_dir(path: str | Path) -> None:
    """Make ``path`` (0700), or check that the one there (another writer's) is a directory itself."""
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        require_real_dir(path)  # made since by another writer: it must still be a directory itself
        return
    os.chmod(path, DIR_MODE)


def fsync_file(path: str | Path) -> None:
    """fsync a file (or a directory: its entries) by path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)



def write_new_file(path: str | Path, data: bytes) -> None:
    """Create ``path`` (it must not exist) holding ``data``; not synced."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        write_fully(fd, data)
    finally:
        os.close(fd)


def make_empty_file(path: str) -> None:
    """Create the empty file ``path`` (0600) without keeping a descriptor: one ``mknod``."""
    try:
        os.mknod(path, stat.S_IFREG | FILE_MODE)
    except PermissionError:  # a file system or sandbox that refuses mknod
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))


def count_complete_lines(fd: int) -> int:
    count = 0
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        count += chunk.count(b"\n")
        offset += len(chunk)
    return count



def require_real_dir(path: Path) -> None:
    """Raise ``UnsafePathError`` unless ``path`` is a directory itself (not a symlink to one)."""
    if not stat.S_ISDIR(os.lstat(path).st_mode):
        raise layout.UnsafePathError(f"{path} is not a directory (a symlink or a file in its place)")


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def lock_held(path: str | Path) -> bool:
    """Whether a process holds an ``flock`` on the file at ``path`` (tried without waiting and let
    go at once; False when there is no such file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
