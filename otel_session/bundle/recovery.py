"""Crash and fork recovery of the bundle writer: what a dead or forked process left behind.

Contract::

    check_recording(path)                   # raises RunSealedError unless the capture is ``recording``
    cut_last_record(events_path, matches) -> bool   # a recorder's own ending, cut to continue the run
    next_seq, torn = recover_journal(events_path)   # cut a torn final line of a journal being continued
    remove_seal_leftovers(path) -> int      # temporaries of a seal (or a run.json) a crash interrupted (lock held)
    remove_abandoned_builds(root) -> int    # half-made bundles of dead processes
    restart_in_forked_children(writer)      # a forked child gets a writer thread of its own
    shutdown_at_exit = weak_atexit(writer)  # drain at interpreter exit without keeping the writer alive
"""

from __future__ import annotations

import atexit
import os
import shutil
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import orjson

from otel_session.core import layout
from otel_session.core.journal import CaptureStatus, decode_line
from otel_session.core.log import get_logger
from otel_session.bundle.files import process_alive
from otel_session.bundle.recorder import RunSealedError

__all__ = [
    "check_recording", "cut_last_record", "last_record", "recover_journal", "remove_abandoned_builds", "remove_seal_leftovers", "restart_in_forked_children",
    "weak_atexit",
]

logger = get_logger(__name__)


def remove_abandoned_builds(root: Path) -> int:
    """Delete bundles a dead process left half made (hidden ``.<run_id>.<pid>.<thread>.new``
    directories: it died before the rename). A live process's are left alone. Returns how many."""
    removed = 0
    for pattern in ("sessions/*/.run-*.new", "evals/*/sessions/*/.run-*.new"):
        for building in root.glob(pattern):
            pid = builder_pid(building.name)
            if pid is None or pid == os.getpid() or process_alive(pid) or building.is_symlink():
                continue
            shutil.rmtree(building, ignore_errors=True)
            removed += 1
            logger.warning("removed %s, a bundle its process (pid %d) died making", building, pid)
    return removed


def builder_pid(name: str) -> int | None:
    parts = name.split(".")  # "", run id, pid, thread, "new"
    return int(parts[2]) if len(parts) == 5 and parts[2].isdigit() else None




def check_recording(path: Path) -> None:
    """Raise ``RunSealedError`` unless the bundle's capture says ``recording``."""
    try:
        status = orjson.loads((path / layout.CAPTURE_FILE).read_bytes()).get("status")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        status = None
    if status != CaptureStatus.RECORDING.value:
        raise RunSealedError(f"capture of {path} is {status or 'missing'}; a sealed bundle never changes", path)


def remove_seal_leftovers(path: Path) -> int:
    """Delete the temporaries of a seal or a manifest's replacement a crash interrupted (the
    rewritten journal, the terminal capture, a new ``run.json``: written aside and never renamed, so
    the bundle is still ``recording``). Call it holding the run's lock. Returns how many."""
    removed = 0
    leftovers = [*path.glob(f".{layout.CAPTURE_FILE}.*.tmp"), *path.glob(f".{layout.EVENTS_FILE}.reorder.tmp"),
                 *path.glob(f".{layout.RUN_FILE}.*.tmp")]
    for leftover in leftovers:
        try:
            os.unlink(leftover)
        except FileNotFoundError:
            continue
        removed += 1
    return removed


def last_record(events_path: Path) -> tuple[dict[str, Any] | None, int]:
    """The journal's last complete record (None if none, or it does not decode) and its line's offset."""
    with open(events_path, "rb") as journal:
        size = journal.seek(0, os.SEEK_END)
        start = max(0, size - (1 << 20))
        journal.seek(start)
        tail = journal.read()
    end = tail.rfind(b"\n") + 1
    if end == 0:
        return None, 0
    begin = tail.rfind(b"\n", 0, end - 1) + 1
    if begin == 0 and start > 0:
        return None, 0  # a last line over 1 MiB: not an ending a recorder wrote
    try:
        return decode_line(tail[begin:end]), start + begin
    except ValueError:
        return None, 0


def cut_last_record(events_path: Path, matches: Callable[[dict[str, Any]], bool]) -> bool:
    """Cut the journal's last record if ``matches`` accepts it (its recorder's own ending, written
    again when the run really ends); whether it did. Call it holding the run's claim."""
    record, offset = last_record(events_path)
    if record is None or not matches(record):
        return False
    os.truncate(events_path, offset)
    return True


def recover_journal(events_path: Path) -> tuple[int, int]:
    """Cut a torn final line from a journal being continued; return (next seq, bytes cut)."""
    try:
        data = events_path.read_bytes()
    except FileNotFoundError:
        return 1, 0
    end = data.rfind(b"\n") + 1
    torn = len(data) - end
    if torn:
        with open(events_path, "r+b") as handle:
            handle.truncate(end)
    complete = data[:end]
    if not complete:
        return 1, torn
    last_line = complete[complete.rfind(b"\n", 0, len(complete) - 1) + 1 :]
    try:
        return int(decode_line(last_line)["seq"]) + 1, torn
    except (ValueError, KeyError, TypeError):
        return complete.count(b"\n") + 1, torn



class ShutsDown(Protocol):
    def shutdown(self) -> None: ...


class WriterLifecycle(ShutsDown, Protocol):
    """What recovery needs of a writer (``BundleWriter``): drain at exit, restart after a fork."""

    def _after_fork_in_child(self) -> None: ...


def restart_in_forked_children(writer: WriterLifecycle) -> None:
    reference = weakref.ref(writer)

    def after_fork_in_child() -> None:
        live = reference()
        if live is not None:
            live._after_fork_in_child()

    os.register_at_fork(after_in_child=after_fork_in_child)


def weak_atexit(writer: ShutsDown):
    """Register shutdown at exit without keeping the writer (or the recorder over it) alive."""
    reference = weakref.ref(writer)

    def shutdown_at_exit() -> None:
        live = reference()
        if live is not None:
            live.shutdown()

    atexit.register(shutdown_at_exit)
    return shutdown_at_exit
