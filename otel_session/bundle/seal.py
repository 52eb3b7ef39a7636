"""Group commit of seals: the runs one writer pass closes are made durable together (SPEC §5.3).

Contract::

    sync = seal_sync_from_env()           # SyncFs() where syncfs(2) reports errors, else FsyncEach()
    captures = seal_together(recorders, sync, root, pool)  # seal every run of one writer pass as one group

A group's seal, for every member at once: (1) the journal rewritten in order, if asked, and the
terminal capture written to temporary files beside their targets; (2) ``sync.files``: everything
each member's bundle holds made durable (journal, ``run.json``, both temporaries, and the directory
entries from the bundle up to the root); (3) each temporary renamed over its target (the
``recording`` capture it replaces linked into the writer's ``CapturePool`` first: no inode freed); (4)
``sync.renames``: the renames made durable. Only then is any member reported sealed. ``SyncFs``
does (2) and (4) with one ``syncfs(2)`` per file system — the fsync of every file at once — where
``FsyncEach`` fsyncs each file and directory (other systems, old kernels, ``OTEL_SESSION_SEAL_SYNC=fsync``).
A sync that fails fails every member of the group (capture ``failed``, ``io_error``): nothing is
reported complete that is not durable. A member whose own step fails (a full disk) finishes alone
the way a single seal always did (``write_terminal_capture``: atomic, else in place).
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from otel_session.core import layout
from otel_session.bundle.capture_pool import CapturePool
from otel_session.core.config import seal_sync_setting
from otel_session.bundle.files import (
    json_document,
    temporary_suffix,
    unlink_quietly,
    write_temporary,
    write_terminal_capture,
)
from otel_session.core.log import get_logger

if TYPE_CHECKING:
    from otel_session.bundle.recorder import RunRecorder

__all__ = ["FsyncEach", "SealPlan", "SealSync", "SyncFs", "libc_syncfs", "seal_sync_from_env", "seal_together"]

logger = get_logger(__name__)


@dataclass
class SealPlan:
    """One member of a group seal: what its recorder wrote aside, to be synced and renamed."""

    recorder: RunRecorder
    root: Path
    directory: str
    """The bundle's directory."""
    capture_tmp: str = ""
    device: int = -1
    """The file system the bundle is on (``st_dev``; -1 until a sync asks)."""
    journal_rewritten: bool = False
    """The journal rewritten in order is at ``journal_tmp``."""
    journal_lines: int = 0
    capture_written: bool = False
    """The terminal capture is at ``capture_tmp`` (False: it could not be written aside; finish alone)."""
    capture: dict[str, Any] = field(default_factory=dict)
    resequenced: bool = False
    """The rewritten journal replaced the appended one."""
    spare: str | None = None
    """The replaced ``recording`` capture's name in the writer's ``CapturePool``: a spare once the
    renames are durable (until then a crash may bring the bundle's old name for it back)."""

    @property
    def path(self) -> Path:
        return self.recorder.path

    @property
    def journal_tmp(self) -> str:
        return f"{self.directory}/.{layout.EVENTS_FILE}.reorder.tmp"


    def dirs(self) -> list[Path]:
        """The directories whose entries lead to the bundle: its session directory up to the root."""
        found = []
        directory = self.path.parent
        while directory != self.root.parent and directory != directory.parent:
            found.append(directory)
            directory = directory.parent
        return found

    def synced_paths(self) -> list[str]:
        """The files whose bytes this member's seal makes durable (by path: a sealing group holds
        no descriptor per member)."""
        paths = [self.journal_tmp if self.journal_rewritten else self.recorder.journal_path]
        if self.capture_written:
            paths.append(self.capture_tmp)
        return paths


class SealSync(Protocol):
    """How a group's bytes and renames are made durable."""

    name: str

    def files(self, plans: Sequence[SealPlan]) -> None:
        """Make every member's files and the directory entries leading to its bundle durable."""

    def renames(self, plans: Sequence[SealPlan]) -> None:
        """Make the renames done in every member's directory durable."""


def libc_syncfs() -> Callable[[int], None] | None:
    """``syncfs(2)`` through ctypes (Python's ``os`` has none), raising ``OSError``; None where the
    C library has no ``syncfs`` (not Linux) or ctypes cannot load it."""
    syncfs = getattr(os, "syncfs", None)
    if syncfs is not None:
        return syncfs
    try:
        function = ctypes.CDLL(None, use_errno=True).syncfs
    except (AttributeError, OSError):
        return None
    function.argtypes = [ctypes.c_int]
    function.restype = ctypes.c_int

    def call(fd: int) -> None:
        if function(fd) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"syncfs: {os.strerror(error)}")

    return call


def syncfs_reports_errors(release: str | None = None) -> bool:
    """Linux 5.8 and later return writeback errors from ``syncfs`` (earlier kernels return 0)."""
    match = re.match(r"(\d+)\.(\d+)", release if release is not None else os.uname().release)
    return os.uname().sysname == "Linux" and match is not None and (int(match[1]), int(match[2])) >= (5, 8)


class SyncFs:
    """One ``syncfs`` per file system the group's bundles are on, for its files and for its renames.

    It also writes back every other dirty file of those file systems: on a root shared with busy
    writers a seal waits for their writeback too (``OTEL_SESSION_SEAL_SYNC=fsync`` then).
    """

    name = "syncfs"

    def __init__(self, syncfs: Callable[[int], None]) -> None:
        self._syncfs = syncfs

    def files(self, plans: Sequence[SealPlan]) -> None:
        devices: set[int] = set()
        for plan in plans:
            if plan.device < 0:
                plan.device = os.stat(plan.directory).st_dev
            if plan.device not in devices:
                devices.add(plan.device)
                fd = os.open(plan.directory, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    self._syncfs(fd)
                finally:
                    os.close(fd)

    renames = files


class FsyncEach:
    """``fsync`` of each file and directory: the fallback where ``syncfs`` is missing or unreliable.

    Up to ``threads`` fsyncs wait at once (helper threads of this call only): fsyncs issued together
    share the file system's commits, so a group seals in about the time of a few fsyncs, not of all.
    """

    name = "fsync"

    def __init__(self, threads: int = 8, fsync: Callable[[int], None] = os.fsync) -> None:
        self.threads = threads
        self._fsync = fsync

    def files(self, plans: Sequence[SealPlan]) -> None:
        jobs: list[Callable[[], None]] = []
        for plan in plans:
            jobs += [functools.partial(self._fsync_path, path) for path in plan.synced_paths()]
            jobs.append(functools.partial(self._fsync_path, f"{plan.directory}/{layout.RUN_FILE}"))
        self._all(jobs)
        self._all([functools.partial(self._fsync_path, directory)
                   for directory in dict.fromkeys(os.fspath(directory) for plan in plans for directory in plan.dirs())])

    def renames(self, plans: Sequence[SealPlan]) -> None:
        self._all([functools.partial(self._fsync_path, plan.directory) for plan in plans])

    def _fsync_path(self, path: str) -> None:
        """fsync a file or a directory (its entries) by path."""
        fd = os.open(path, os.O_RDONLY)
        try:
            self._fsync(fd)
        finally:
            os.close(fd)

    def _all(self, jobs: list[Callable[[], None]]) -> None:
        """Run every job, up to ``threads`` at once; raise the first ``OSError`` once all are done."""
        pending = iter(jobs)  # shared: each job is taken by exactly one thread
        errors: list[OSError] = []

        def work() -> None:
            for job in pending:
                try:
                    job()
                except OSError as exc:
                    errors.append(exc)

        helpers = []
        for _ in range(min(len(jobs), self.threads) - 1):
            helper = threading.Thread(target=work, name="otel-session-fsync", daemon=True)
            try:
                helper.start()
            except RuntimeError:  # interpreter shutting down: fsync on this thread
                break
            helpers.append(helper)
        work()
        for helper in helpers:
            helper.join()
        if errors:
            raise errors[0]


def seal_sync_from_env() -> SealSync:
    """``OTEL_SESSION_SEAL_SYNC``: ``syncfs``, ``fsync``, or ``auto`` (syncfs where it reports errors)."""
    setting = seal_sync_setting()
    syncfs = libc_syncfs() if setting != "fsync" else None
    if syncfs is not None and (setting == "syncfs" or syncfs_reports_errors()):
        return SyncFs(syncfs)
    return FsyncEach()


def seal_together(recorders: Sequence[RunRecorder], sync: SealSync, root: Path,
                  pool: CapturePool) -> dict[str, dict[str, Any]]:
    """Seal ``recorders`` (closing, drained) as one group; every one ends sealed, whatever fails.
    The ``recording`` captures the renames replace go to ``pool`` (``otel_session.bundle.capture_pool``).
    Returns the terminal capture written, by bundle directory (the writer's hooks are told it): a
    member whose capture could not be written is left out."""
    plans: list[SealPlan] = []
    written: dict[str, dict[str, Any]] = {}
    suffix = temporary_suffix()
    for recorder in recorders:
        if recorder.sealed:
            continue
        try:
            plans.append(_plan(recorder, root, suffix))
        except Exception:  # noqa: BLE001 - a bug in one run must not stop the others
            logger.exception("could not seal %s", recorder.path)
            recorder._end_seal()
    try:
        _seal_group(plans, sync, pool)
    except Exception:  # noqa: BLE001 - a bug must not leave runs unsealed or stop the writer
        logger.exception("sealing a group of %d runs failed", len(plans))
    finally:
        for plan in plans:
            if not plan.recorder.sealed:  # reported sealed, never complete: its capture stays what it was
                _drop_journal_tmp(plan)
                _drop_capture_tmp(plan)
                plan.recorder._end_seal()
            elif plan.capture:
                written[plan.directory] = plan.capture
    return written


def _seal_group(plans: list[SealPlan], sync: SealSync, pool: CapturePool) -> None:
    if not plans:
        return
    try:
        sync.files(plans)
    except OSError as exc:
        _fail_all(plans, exc, f"{sync.name} of the bundle before its seal failed: {exc}")
        return
    renamed = []
    for plan in plans:
        if not plan.capture_written:
            _finish_alone(plan)
        elif _rename(plan, pool):
            renamed.append(plan)
    try:
        sync.renames(renamed)
    except OSError as exc:
        for plan in renamed:
            if plan.spare is not None:
                pool.drop(plan.spare)
        _fail_all(renamed, exc, f"{sync.name} of the sealed bundle failed: {exc}")
        return
    for plan in renamed:
        if plan.spare is not None:
            pool.kept(plan.spare)
        plan.recorder._end_seal()


def _plan(recorder: RunRecorder, root: Path, suffix: str) -> SealPlan:
    """Write ``recorder``'s rewritten journal (if asked) and terminal capture aside, unsynced
    (``suffix``: ``files.temporary_suffix``, the writer thread's, made once a group)."""
    directory = recorder.directory
    plan = SealPlan(recorder, root, directory, f"{directory}/.{layout.CAPTURE_FILE}{suffix}")
    rewritten = recorder._rewrite_aside(plan.journal_tmp)
    if rewritten is not None:
        plan.journal_rewritten, plan.journal_lines = True, rewritten
    plan.capture = recorder._terminal_capture(rewritten, resequenced=rewritten is not None)
    try:
        os.close(write_temporary(plan.capture_tmp, json_document(plan.capture)))
        plan.capture_written = True
    except OSError as exc:
        logger.warning("could not write the terminal capture of %s aside (%s); it is rewritten in place",
                       plan.path, exc)
        _drop_journal_tmp(plan)
        plan.capture = recorder._terminal_capture(None, resequenced=False)
    return plan


def _rename(plan: SealPlan, pool: CapturePool) -> bool:
    """Put the member's rewritten journal and terminal capture in place; False if it finished alone."""
    recorder = plan.recorder
    if plan.journal_rewritten:
        try:
            os.replace(plan.journal_tmp, f"{plan.directory}/{layout.EVENTS_FILE}")
        except OSError as exc:
            logger.error("could not replace the journal of %s by its rewrite (%s); it stays in append order",
                         plan.path, exc)
            _drop_journal_tmp(plan)
            _drop_capture_tmp(plan)
            plan.capture = recorder._terminal_capture(None, resequenced=False)
            _finish_alone(plan)
            return False
        recorder._adopt_journal(plan.journal_lines)
        plan.journal_rewritten = False
        plan.resequenced = True
    plan.capture_written = False  # renamed below, or removed on failure
    capture = f"{plan.directory}/{layout.CAPTURE_FILE}"
    kept = pool.keep(capture) if recorder.created else None  # the rename then frees no inode
    try:
        os.replace(plan.capture_tmp, capture)
    except OSError as exc:
        logger.warning("could not rename the terminal capture of %s into place (%s)", plan.path, exc)
        if kept is not None:
            pool.drop(kept)  # before the rewrite in place: never through a second name
        unlink_quietly(plan.capture_tmp)
        _finish_alone(plan)
        return False
    plan.spare = kept
    return True


def _finish_alone(plan: SealPlan) -> None:
    """Write the member's capture by itself (atomic with its own fsyncs, else in place) and end its seal."""
    try:
        write_terminal_capture(plan.path / layout.CAPTURE_FILE, plan.capture)
    except OSError:
        logger.exception("could not write terminal capture of %s", plan.path)
        plan.capture = {}  # what the bundle holds is not known here
    plan.recorder._end_seal()


def _fail_all(plans: Sequence[SealPlan], error: OSError, message: str) -> None:
    """A sync failed: every member's capture says ``failed`` (``io_error`` for an EIO), written each by itself."""
    for plan in plans:
        _drop_journal_tmp(plan)
        _drop_capture_tmp(plan)
        plan.recorder._fail_seal(error, message)
        plan.capture = plan.recorder._terminal_capture(None, resequenced=plan.resequenced)
        _finish_alone(plan)


def _drop_journal_tmp(plan: SealPlan) -> None:
    if plan.journal_rewritten:
        plan.journal_rewritten = False
        unlink_quietly(plan.journal_tmp)


def _drop_capture_tmp(plan: SealPlan) -> None:
    if plan.capture_written:
        plan.capture_written = False
        unlink_quietly(plan.capture_tmp)
