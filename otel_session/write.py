"""The bundle writer: run-scoped, append-only, bounded, never blocking the producer (SPEC §5.3–5.4).

Contract::

    writer = BundleWriter(root)                       # one writer thread for all runs
    run = writer.open_run(session_id=..., run_id=...)  # creates the bundle, takes the run's lock
    run.append("turn_started", {"state": "greet", "required_slots": []}, at_ns=...)  # -> AppendResult
    run.close()                                       # drain, count lines, write terminal capture
    writer.force_flush(); writer.shutdown()           # like an OTel SpanExporter

Producers enqueue fully stamped records (``seq`` assigned at enqueue, ``at`` from the event's own
timestamp) and never touch the disk; the writer thread appends them in batches (a flush starts 25 ms
after the first queued record, or at once when 256 records or 256 KiB are queued; everything queued
goes out in one ``write``, one line per record, records never merged). Reaching a queue bound, an
oversized event or an append error marks that run's capture ``failed`` with a code, stops its
recording and is logged; nothing raises into the producer and nothing is dropped silently.
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import logging
import os
import shutil
import stat
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from otel_session import layout
from otel_session.journal import (
    CAPTURE_SCHEMA,
    RUN_SCHEMA,
    CaptureStatus,
    EventType,
    RunKind,
    decode_line,
    encode_record,
    format_timestamp,
)

__all__ = [
    "AppendResult",
    "BundleWriter",
    "FailureCode",
    "RunLockedError",
    "RunRecorder",
    "RunSealedError",
    "WriterClosedError",
    "WriterLimits",
    "write_json_atomic",
]

if TYPE_CHECKING:
    from otel_session.normalize import JournalEvent

logger = logging.getLogger(__name__)

_DIR_MODE = 0o700
_FILE_MODE = 0o600
_KNOWN_DIRS = 4096
_RECORDING_CAPTURE = {"schema": CAPTURE_SCHEMA, "status": CaptureStatus.RECORDING.value, "event_count": 0}


class AppendResult(Enum):
    """What became of one record handed to :meth:`RunRecorder.append`."""

    ACCEPTED = "accepted"
    """Queued; the writer thread will append it."""
    CAPTURE_STOPPED = "capture_stopped"
    """Refused: the run's capture is closed or failed (see ``RunRecorder.failure``)."""


class FailureCode(str, Enum):
    """``capture.json`` failure codes; each names the bound or error that stopped a capture."""

    QUEUE_RECORDS_EXCEEDED = "queue_records_exceeded"
    QUEUE_BYTES_EXCEEDED = "queue_bytes_exceeded"
    EVENT_TOO_LARGE = "event_too_large"
    DISK_FULL = "disk_full"
    PERMISSION_DENIED = "permission_denied"
    IO_ERROR = "io_error"
    WRITER_SHUTDOWN = "writer_shutdown"


class WriterClosedError(RuntimeError):
    """The writer was shut down; no run can be opened."""


class RunLockedError(RuntimeError):
    """Another writer (this or another process) holds the run directory."""


class RunSealedError(RuntimeError):
    """The run's capture is already terminal; its bundle never changes again."""


@dataclass(frozen=True)
class WriterLimits:
    """Batching and bounds. The defaults are the ones SPEC §5.4 gives."""

    flush_interval_s: float = 0.025
    batch_records: int = 256
    batch_bytes: int = 256 * 1024
    max_queue_records: int = 8192
    max_queue_bytes: int = 16 * 1024 * 1024
    max_event_bytes: int = 1024 * 1024
    seal_threads: int = 8
    """Runs sealed at once when several close together (each seal waits on a few fsyncs)."""


@dataclass(frozen=True)
class CaptureFailure:
    failed_at: str
    code: FailureCode
    message: str

    def as_json(self) -> dict[str, str]:
        return {"failed_at": self.failed_at, "code": self.code.value, "message": self.message}


def write_json_atomic(path: Path, value: dict[str, Any], *, sync_dir: bool = True) -> None:
    """Replace ``path`` with ``value`` as JSON: write a temporary file, fsync, rename, fsync dir.

    ``sync_dir=False`` leaves the directory fsync to a later atomic write in the same directory.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _FILE_MODE)
    try:
        try:
            os.fchmod(fd, _FILE_MODE)
            _write_fully(fd, _json_document(value))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)  # a full disk must not also collect temporary files
        raise
    if not sync_dir:
        return
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _overwrite_json_in_place(path: Path, value: dict[str, Any]) -> None:
    """Rewrite ``path`` with ``value`` in its own blocks (write at offset 0, truncate, fsync).

    The fallback when :func:`write_json_atomic` cannot create its temporary file (disk full, a
    directory made read-only): a document under one block reuses the space it already holds. Not
    atomic — a crash in the middle can leave it unreadable — so it is used only when the atomic
    replace already failed.
    """
    data = _json_document(value)
    fd = os.open(path, os.O_WRONLY)
    try:
        written = 0
        while written < len(data):
            written += os.pwrite(fd, data[written:], written)
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    finally:
        os.close(fd)


def _json_document(value: dict[str, Any]) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def _write_fully(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _write_terminal_capture(path: Path, capture: dict[str, Any]) -> None:
    """Replace the capture atomically; on a full disk or read-only directory, in place instead.

    Without the fallback a disk-full failure would leave ``recording`` on disk: the failure the
    capture exists to report could not be reported.
    """
    try:
        write_json_atomic(path, capture)
    except OSError as exc:
        logger.warning("atomic replace of %s failed (%s); rewriting it in place", path, exc)
        _overwrite_json_in_place(path, capture)


def _failure_code_for(error: OSError) -> FailureCode:
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return FailureCode.DISK_FULL
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return FailureCode.PERMISSION_DENIED
    return FailureCode.IO_ERROR


def _now_ns() -> int:
    return time.time_ns()


def _makedirs_private(path: Path) -> None:
    missing = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, _DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(directory, _DIR_MODE)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_new_file(path: Path, data: bytes) -> None:
    """Create ``path`` (it must not exist) holding ``data``; not synced."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _FILE_MODE)
    try:
        _write_fully(fd, data)
    finally:
        os.close(fd)


def _count_complete_lines(fd: int) -> int:
    count = 0
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        count += chunk.count(b"\n")
        offset += len(chunk)
    return count


class RunRecorder:
    """The recording of one run. ``append`` is safe from any thread and never waits for disk."""

    def __init__(
        self,
        writer: BundleWriter,
        path: Path,
        manifest: dict[str, Any],
        events_fd: int,
        next_seq: int,
        recovered_torn_bytes: int,
        *,
        created: bool,
    ) -> None:
        self.path = path
        self.session_id: str = manifest["session_id"]
        self.run_id: str = manifest["run_id"]
        self.manifest = manifest
        self.recovered_torn_bytes = recovered_torn_bytes
        """Bytes of a torn final line cut when this run was reopened after a crash (0 if none)."""
        self._writer = writer
        self._limits = writer.limits
        self._events_fd = events_fd
        """The journal, appended to; its ``flock`` is the run's one-writer lock."""
        self._lines_on_disk: int | None = 0 if created else None
        """Lines the journal holds when this process made it (None: count them at seal)."""
        self._lock = threading.Lock()
        self._next_seq = next_seq
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._scheduled = False
        self._full_signalled = False
        self._accepting = True
        self._close_requested = False
        self._seal_claimed = False
        self._discard_pending = False
        self._sealed = threading.Event()
        self._failure: CaptureFailure | None = None
        self._reorder: Callable[[dict[str, Any]], Any] | None = None
        self.peak_queued_records = 0
        self.peak_queued_bytes = 0
        self.batches_written = 0

    # -- producer side ---------------------------------------------------------------------

    def append(
        self,
        event_type: str | EventType,
        payload: dict[str, Any] | None = None,
        *,
        at_ns: int | None = None,
        turn_index: int | None = None,
        message_id: str | None = None,
        tool_call_id: str | None = None,
        trace_id: str | None = None,
        span_id: str | None = None,
    ) -> AppendResult:
        """Stamp and enqueue one journal record. Never raises, never blocks on disk."""
        record = self._record(event_type.value if isinstance(event_type, EventType) else event_type,
                              _now_ns() if at_ns is None else at_ns, turn_index, message_id, tool_call_id, trace_id,
                              span_id, payload)
        return AppendResult.ACCEPTED if self._enqueue([record]) else AppendResult.CAPTURE_STOPPED

    def append_events(self, events: Iterable[JournalEvent]) -> int:
        """Stamp and enqueue normalized (and redacted) events in order, under one lock.

        Returns how many were accepted: all of them, or those before the first refusal (the
        capture stopped there, see :attr:`failure`). Never raises, never blocks on disk.
        """
        record = self._record
        return self._enqueue([
            record(event.type, event.at_ns, event.turn_index, event.message_id, event.tool_call_id, event.trace_id,
                   event.span_id, event.payload)
            for event in events
        ])

    def _record(
        self,
        event_type: str,
        at_ns: int,
        turn_index: int | None,
        message_id: str | None,
        tool_call_id: str | None,
        trace_id: str | None,
        span_id: str | None,
        payload: dict[str, Any] | None,
    ) -> dict[str, Any]:
        record: dict[str, Any] = {
            "seq": 0,
            "at": format_timestamp(at_ns),
            "type": event_type,
            "session_id": self.session_id,
            "run_id": self.run_id,
        }
        if turn_index is not None:
            record["turn_index"] = turn_index
        if message_id is not None:
            record["message_id"] = message_id
        if tool_call_id is not None:
            record["tool_call_id"] = tool_call_id
        if trace_id is not None:
            record["trace_id"] = trace_id
        if span_id is not None:
            record["span_id"] = span_id
        if payload is not None:
            record["payload"] = payload
        return record

    def _enqueue(self, records: list[dict[str, Any]]) -> int:
        """Number, encode and queue ``records`` in order; stop the capture at the first that
        would pass a bound. Returns how many were queued."""
        limits = self._limits
        with self._lock:
            if not self._accepting:
                return 0
            pending = self._pending
            seq = self._next_seq
            queued_bytes = self._pending_bytes
            queued = 0
            for record in records:
                record["seq"] = seq
                line = encode_record(record)
                size = len(line)
                if (size > limits.max_event_bytes or len(pending) >= limits.max_queue_records
                        or queued_bytes + size > limits.max_queue_bytes):
                    self._fail_bound_locked(record, size, len(pending), queued_bytes)
                    break
                pending.append(line)
                queued_bytes += size
                seq += 1
                queued += 1
            self._next_seq = seq
            self._pending_bytes = queued_bytes
            if len(pending) > self.peak_queued_records:
                self.peak_queued_records = len(pending)
            if queued_bytes > self.peak_queued_bytes:
                self.peak_queued_bytes = queued_bytes
            wake = self._wake_locked() if queued else None
        if wake is not None:
            self._writer._schedule(self, urgent=wake)
        return queued

    def _fail_bound_locked(self, record: dict[str, Any], size: int, queued: int, queued_bytes: int) -> None:
        limits = self._limits
        if size > limits.max_event_bytes:
            self._fail_locked(
                FailureCode.EVENT_TOO_LARGE,
                f"event seq {record['seq']} ({record['type']}) is {size} bytes; the limit is {limits.max_event_bytes}",
            )
        elif queued >= limits.max_queue_records:
            self._fail_locked(
                FailureCode.QUEUE_RECORDS_EXCEEDED, f"{limits.max_queue_records} records already queued at seq {record['seq']}"
            )
        else:
            self._fail_locked(
                FailureCode.QUEUE_BYTES_EXCEEDED,
                f"{queued_bytes} bytes already queued at seq {record['seq']}; the limit is {limits.max_queue_bytes}",
            )

    def _wake_locked(self) -> bool | None:
        """Whether to wake the writer: None (no need), False (start the flush timer), True (flush now).

        The writer is woken once when records first queue, and again once the queue reaches a
        batch threshold.
        """
        limits = self._limits
        full = len(self._pending) >= limits.batch_records or self._pending_bytes >= limits.batch_bytes
        if full and not self._full_signalled:
            self._full_signalled = True
            self._scheduled = True
            return True
        if not self._scheduled:
            self._scheduled = True
            return False
        return None

    def close(
        self,
        *,
        run_status: str | None = None,
        reorder: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        """Stop accepting records; the writer drains, counts lines and writes terminal capture.

        With ``run_status`` a final ``run_finished`` record with that status is appended first.
        With ``reorder`` (a sort key over decoded records) the writer thread rewrites the journal
        sorted by that key, stably, with ``seq`` renumbered 1…N, before the terminal capture
        (temporary file, fsync, rename); a journal that cannot be rewritten stays as appended.
        Idempotent; returns at once (use :meth:`wait_sealed` or ``BundleWriter.force_flush``).
        """
        if run_status is not None:
            self.append(EventType.RUN_FINISHED, {"status": run_status})
        with self._lock:
            if self._close_requested:
                return
            self._accepting = False
            self._close_requested = True
            self._reorder = reorder
        self._writer._schedule(self, urgent=True)

    def _disown_after_fork(self) -> None:
        """In a forked child: this run belongs to the parent; accept nothing, touch nothing."""
        self._lock = threading.Lock()  # another thread may have held it at the fork
        self._accepting = False
        self._close_requested = self._seal_claimed = True
        self._pending = []
        self._pending_bytes = 0
        self._sealed = threading.Event()
        self._sealed.set()  # nothing to wait for here
        try:
            os.close(self._events_fd)  # the child's copy; the parent keeps its descriptor and its flock
        except OSError:
            pass  # already closed in this process

    @property
    def failure(self) -> CaptureFailure | None:
        """The first failure that stopped this capture, if any."""
        return self._failure

    @property
    def accepting(self) -> bool:
        return self._accepting

    @property
    def queued_records(self) -> int:
        """Records enqueued and not yet handed to the writer thread (for back-pressure)."""
        return len(self._pending)

    @property
    def sealed(self) -> bool:
        return self._sealed.is_set()

    def wait_sealed(self, timeout: float | None = None) -> bool:
        """Wait until terminal capture status is on disk."""
        return self._sealed.wait(timeout)

    def _fail_locked(self, code: FailureCode, message: str) -> None:
        if self._failure is None:
            self._failure = CaptureFailure(format_timestamp(_now_ns()), code, message)
            logger.error("capture of %s failed (%s): %s", self.path, code.value, message)
        self._accepting = False
        if not self._close_requested:
            self._close_requested = True
            self._writer._schedule(self, urgent=True)

    # -- writer-thread side ----------------------------------------------------------------

    def _drain(self) -> bool:
        """Write what is queued; True when the run is closing and now needs :meth:`_seal` (once)."""
        with self._lock:
            pending, self._pending = self._pending, []
            self._pending_bytes = 0
            self._scheduled = False
            self._full_signalled = False
            seal = self._close_requested and not self._seal_claimed
            self._seal_claimed = self._close_requested
            discard = self._discard_pending
        if pending and not discard and not self._io_failed():
            self._write_batch(pending)
        return seal

    def _io_failed(self) -> bool:
        failure = self._failure
        return failure is not None and failure.code in (
            FailureCode.DISK_FULL,
            FailureCode.PERMISSION_DENIED,
            FailureCode.IO_ERROR,
        )

    def _write_batch(self, lines: list[bytes]) -> None:
        # Everything pending goes out in one write: a thread waiting for the GIL after each
        # syscall would otherwise fall behind a busy producer and overrun the queue bound.
        try:
            self._write_all(b"".join(lines))
        except OSError as exc:
            with self._lock:
                self._fail_locked(
                    _failure_code_for(exc),
                    f"append to {layout.EVENTS_FILE} failed: {exc}; "
                    f"a batch of {len(lines)} records was not (fully) written",
                )
                self._discard_pending = True
            self._lines_on_disk = None  # a partial write: count what is there
            return
        self.batches_written += 1
        if self._lines_on_disk is not None:
            self._lines_on_disk += len(lines)

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = self._writer._write(self._events_fd, view)
            view = view[written:]

    def _rewrite_in_order(self, key: Callable[[dict[str, Any]], Any]) -> bool:
        """Replace the journal with its records sorted by ``key`` and ``seq`` renumbered.

        Lines that do not decode (a torn tail cut at reopen never gets here) keep their relative
        position at the end, so the rewrite never loses bytes. The new file is fsynced before the
        rename; the directory is fsynced by the terminal capture's atomic replace right after.
        On any error the appended journal stays, the error is logged and False is returned.
        """
        events_path = self.path / layout.EVENTS_FILE
        tmp_path = self.path / f".{layout.EVENTS_FILE}.reorder.tmp"
        try:
            lines = events_path.read_bytes().splitlines()
            records: list[dict[str, Any]] = []
            undecodable: list[bytes] = []
            for line in lines:
                try:
                    records.append(decode_line(line))
                except ValueError:
                    undecodable.append(line + b"\n")
            records.sort(key=key)
            chunks = []
            for seq, record in enumerate(records, start=1):
                record["seq"] = seq
                chunks.append(encode_record(record))
            chunks.extend(undecodable)
            new_fd = os.open(tmp_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, _FILE_MODE)
            try:
                fcntl.flock(new_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the run's lock, once this is the journal
                os.fchmod(new_fd, _FILE_MODE)
                _write_fully(new_fd, b"".join(chunks))
                os.fsync(new_fd)
                os.replace(tmp_path, events_path)
            except BaseException:
                os.close(new_fd)
                _unlink_quietly(tmp_path)
                raise
        except Exception:  # noqa: BLE001 - a bad key or I/O error keeps the appended journal
            logger.exception("could not rewrite %s in order; it stays in append order", events_path)
            return False
        os.close(self._events_fd)
        self._events_fd = new_fd
        self._lines_on_disk = len(chunks)
        return True

    def _seal(self) -> None:
        """Make the bundle durable (journal, manifest), then write the terminal capture."""
        if self._sealed.is_set():
            return
        try:
            rewritten = self._reorder is not None and self._failure is None and self._rewrite_in_order(self._reorder)
            try:
                if not rewritten:
                    os.fsync(self._events_fd)
                _fsync_file(self.path / layout.RUN_FILE)  # written unsynced when the run was opened
            except OSError as exc:
                with self._lock:
                    self._fail_locked(_failure_code_for(exc), f"fsync of the bundle failed: {exc}")
            lines = self._lines_on_disk
            capture: dict[str, Any] = {
                "schema": CAPTURE_SCHEMA,
                "status": CaptureStatus.FAILED.value if self._failure else CaptureStatus.COMPLETE.value,
                "event_count": lines if lines is not None else _count_complete_lines(self._events_fd),
            }
            if self._failure is not None:
                capture["failure"] = self._failure.as_json()
            capture.update(self._writer._capture_extras.get(self.run_id, {}))
            _write_terminal_capture(self.path / layout.CAPTURE_FILE, capture)
        except OSError:
            logger.exception("could not write terminal capture of %s", self.path)
        finally:
            os.close(self._events_fd)  # releases the run's lock
            self._sealed.set()
            self._writer._forget(self)


class BundleWriter:
    """Writes run bundles under ``root`` with one background thread. Follows the exporter contract:
    :meth:`force_flush` and :meth:`shutdown` (idempotent, drains once, leaves no thread or file)."""

    def __init__(self, root: str | os.PathLike[str], *, limits: WriterLimits | None = None) -> None:
        self.root = Path(root)
        self.limits = limits or WriterLimits()
        self._cond = threading.Condition()
        self._dirty: dict[RunRecorder, None] = {}
        self._deadline = 0.0
        self._urgent = False
        self._busy = False
        self._stopping = False
        self._closed = False
        self._open_runs: dict[str, RunRecorder] = {}
        self._open_lock = threading.Lock()
        self._capture_extras: dict[str, dict[str, Any]] = {}
        self._known_dirs: set[str] = set()
        """Session directories made or checked already (under ``_open_lock``)."""
        self._thread = threading.Thread(target=self._run, name="otel-session-writer", daemon=True)
        self._thread.start()
        self._atexit = _weak_atexit(self)
        _restart_in_forked_children(self)

    def _after_fork_in_child(self) -> None:
        """A forked child (gunicorn ``--preload``, multiprocessing) gets a writer of its own.

        ``fork`` copies no thread: without this the child's records would queue and never be
        written. Runs the parent had open stay the parent's (their journals, their locks): the
        child refuses records for them and starts a new writer thread for the runs it opens.
        """
        if self._closed:
            return  # shut down in the parent: nothing to restart, nothing of the child's to write
        self._cond = threading.Condition()
        self._open_lock = threading.Lock()
        self._dirty = {}
        self._urgent = self._busy = self._stopping = False
        inherited, self._open_runs = list(self._open_runs.values()), {}
        for recorder in inherited:
            recorder._disown_after_fork()
        if inherited:
            logger.warning("forked child: %d run(s) open in the parent stay the parent's; records for them "
                           "are refused here", len(inherited))
        self._thread = threading.Thread(target=self._run, name="otel-session-writer", daemon=True)
        self._thread.start()

    # -- opening runs ----------------------------------------------------------------------

    def open_run(
        self,
        *,
        session_id: str,
        run_id: str,
        kind: RunKind | str = RunKind.LIVE,
        eval_id: str | None = None,
        agent: str | None = None,
        service: str | None = None,
        created_at_ns: int | None = None,
        recorded_by: str | None = None,
    ) -> RunRecorder:
        """Create (or continue, after a crash) the bundle of one run and take its lock.

        ``recorded_by`` names the recorder in ``run.json`` (the collector resumes only its own runs).

        Raises ``UnsafePathError`` for ids that would leave the root, ``RunLockedError`` when
        another writer holds the run, ``RunSealedError`` when its capture is already terminal,
        ``WriterClosedError`` after shutdown, and ``OSError`` when the directory cannot be made.
        """
        kind = RunKind(kind)
        for name, value in (("session_id", session_id), ("eval_id", eval_id), ("agent", agent), ("service", service)):
            if isinstance(value, str) and value.encode("utf-8", "replace").decode("utf-8") != value:
                raise ValueError(f"{name} {value!r} is not valid Unicode text")
        if kind is RunKind.EVAL and not eval_id:
            raise ValueError("an eval run needs an eval_id")
        path = layout.run_path(self.root, session_id, run_id, eval_id=eval_id if kind is RunKind.EVAL else None)
        new_manifest: dict[str, Any] = {
            "schema": RUN_SCHEMA,
            "session_id": session_id,
            "run_id": run_id,
            "kind": kind.value,
            "created_at": format_timestamp(created_at_ns or _now_ns()),
            "service": service or os.environ.get("OTEL_SERVICE_NAME") or "unknown_service",
        }
        optional = {"eval_id": eval_id if kind is RunKind.EVAL else None, "agent": agent, "recorded_by": recorded_by}
        new_manifest.update((key, value) for key, value in optional.items() if value)
        with self._open_lock:
            if self._closed:
                raise WriterClosedError("the bundle writer was shut down")
            if run_id in self._open_runs:
                raise RunLockedError(f"run {run_id} is already open in this writer")
            recorder = self._create_run(path, new_manifest) or self._continue_run(path)
            self._open_runs[run_id] = recorder
        return recorder

    def _create_run(self, path: Path, manifest: dict[str, Any]) -> RunRecorder | None:
        """Make a new bundle, or return None when ``path`` already exists.

        The bundle is assembled in a hidden directory beside ``path`` (journal locked, ``run.json``,
        ``capture.json`` ``recording``) and renamed into place, so a reader never sees it half made
        and an existing bundle is never touched. Nothing is fsynced here: a bundle is made durable
        as a whole when it seals. Every step is one system call; on a busy file system each costs.
        """
        self._ensure_private_dir(path.parent)
        building = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.new")
        try:
            os.mkdir(building, _DIR_MODE)  # 0700 at most: a umask only takes bits away
        except FileNotFoundError:  # the session directory was removed since (retention, a move)
            self._known_dirs.discard(str(path.parent))
            self._ensure_private_dir(path.parent)
            os.mkdir(building, _DIR_MODE)
        events_fd = -1
        try:
            events_fd = os.open(building / layout.EVENTS_FILE, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL, _FILE_MODE)
            fcntl.flock(events_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            _write_new_file(building / layout.RUN_FILE, _json_document(manifest))
            _write_new_file(building / layout.CAPTURE_FILE, _json_document(_RECORDING_CAPTURE))
            os.rename(building, path)
        except BaseException as exc:
            if events_fd >= 0:
                os.close(events_fd)
            shutil.rmtree(building, ignore_errors=True)
            if isinstance(exc, OSError) and exc.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR):
                return None  # the run exists: continue it, or be refused (lock, seal, symlink)
            raise
        return RunRecorder(self, path, manifest, events_fd, 1, 0, created=True)

    def _ensure_private_dir(self, directory: Path) -> None:
        """Make ``directory`` (0700) unless it exists; refuse a symlink or a file in its place."""
        key = str(directory)
        if key in self._known_dirs:
            return
        try:
            os.mkdir(directory, _DIR_MODE)
        except FileExistsError:
            _require_real_dir(directory)
        except FileNotFoundError:  # the first run under this root (or eval): check the way there
            _makedirs_private(layout.inside_root(self.root, directory))
        if len(self._known_dirs) >= _KNOWN_DIRS:
            self._known_dirs.clear()
        self._known_dirs.add(key)

    def _continue_run(self, path: Path) -> RunRecorder:
        """Take over an existing bundle that is still ``recording`` (left by a crashed writer)."""
        _require_real_dir(path)
        events_path = path / layout.EVENTS_FILE
        try:
            events_fd = os.open(events_path, os.O_RDWR | os.O_APPEND)
        except FileNotFoundError:  # a journal made on first append by older writers, or none yet
            _check_recording(path)
            events_fd = os.open(events_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, _FILE_MODE)
        try:
            try:
                fcntl.flock(events_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RunLockedError(f"another writer holds {path} (an flock on {layout.EVENTS_FILE}); one writer per run") from None
            _check_recording(path)
            manifest = orjson.loads((path / layout.RUN_FILE).read_bytes())
            next_seq, torn = _recover_journal(events_path)
        except BaseException:
            os.close(events_fd)
            raise
        if torn:
            logger.warning("reopened %s: cut a torn final line of %d bytes", path, torn)
        return RunRecorder(self, path, manifest, events_fd, next_seq, torn, created=False)

    def remove_abandoned_builds(self) -> int:
        """Delete bundles a dead process left half made (hidden ``.<run_id>.<pid>.<thread>.new``
        directories: it died before the rename). A live process's are left alone. Returns how many."""
        removed = 0
        for pattern in ("sessions/*/.run-*.new", "evals/*/sessions/*/.run-*.new"):
            for building in self.root.glob(pattern):
                pid = _builder_pid(building.name)
                if pid is None or pid == os.getpid() or _process_alive(pid) or building.is_symlink():
                    continue
                shutil.rmtree(building, ignore_errors=True)
                removed += 1
                logger.warning("removed %s, a bundle its process (pid %d) died making", building, pid)
        return removed

    def set_capture_extras(self, run_id: str, extras: dict[str, Any]) -> None:
        """Extra fields for a run's terminal ``capture.json`` (e.g. the collector's ``order``)."""
        self._capture_extras[run_id] = dict(extras)

    # -- exporter contract -----------------------------------------------------------------

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Write everything enqueued so far (and seal runs already closed). True when done in time."""
        deadline = time.monotonic() + timeout_millis / 1000
        with self._cond:
            self._urgent = True
            self._cond.notify_all()
            while self._dirty or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._thread.is_alive():
                    return False
                self._cond.wait(remaining)
        return True

    def shutdown(self, timeout_millis: int = 30_000) -> None:
        """Finish open runs as interrupted, drain once, stop the thread. Idempotent."""
        with self._open_lock:
            if self._closed:
                return
            self._closed = True
            open_runs = list(self._open_runs.values())
        for recorder in open_runs:
            if recorder.accepting:
                recorder.close(run_status="interrupted")
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout_millis / 1000)
        if self._thread.is_alive():
            logger.error("bundle writer did not drain within %d ms", timeout_millis)
        atexit.unregister(self._atexit)

    @property
    def open_runs(self) -> list[RunRecorder]:
        with self._open_lock:
            return list(self._open_runs.values())

    # -- writer thread ---------------------------------------------------------------------

    def _seal_together(self, recorders: list[RunRecorder]) -> None:
        """Seal runs that closed in the same pass, up to ``seal_threads`` at once.

        A seal mostly waits on fsync; fsyncs issued together share the file system's journal
        commits, so many short runs seal in about the time of one. Helper threads live for this
        pass only: nothing outlives the writer thread.
        """
        pending = iter(recorders)  # shared: each run is taken by exactly one thread

        def seal_pending() -> None:
            for recorder in pending:
                _guarded(recorder, recorder._seal)

        helpers = []
        for _ in range(min(len(recorders), self.limits.seal_threads) - 1):
            helper = threading.Thread(target=seal_pending, name="otel-session-seal", daemon=True)
            try:
                helper.start()
            except RuntimeError:  # interpreter shutting down: seal on this thread
                break
            helpers.append(helper)
        seal_pending()
        for helper in helpers:
            helper.join()

    def _schedule(self, recorder: RunRecorder, *, urgent: bool) -> None:
        # May be called with the recorder's lock held: the condition is never held while
        # taking a recorder's lock, so the two locks are always taken in this order.
        with self._cond:
            if not self._dirty:
                self._deadline = time.monotonic() + self.limits.flush_interval_s
            self._dirty[recorder] = None
            if urgent:
                self._urgent = True
            self._cond.notify()

    def _forget(self, recorder: RunRecorder) -> None:
        with self._open_lock:
            self._open_runs.pop(recorder.run_id, None)
        self._capture_extras.pop(recorder.run_id, None)

    def _write(self, fd: int, data: memoryview) -> int:
        """The one syscall that appends journal bytes (a seam for fault-injection tests)."""
        return os.write(fd, data)

    def _run(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._dirty and not self._stopping:
                    cond.wait()
                while self._dirty and not self._urgent and not self._stopping:
                    remaining = self._deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    cond.wait(remaining)
                if not self._dirty and self._stopping:
                    cond.notify_all()
                    return
                runs = list(self._dirty)
                self._dirty.clear()
                self._urgent = False
                self._busy = True
            closing = [recorder for recorder in runs if _guarded(recorder, recorder._drain)]
            if closing:
                self._seal_together(closing)
            with cond:
                self._busy = False
                cond.notify_all()


def _builder_pid(name: str) -> int | None:
    parts = name.split(".")  # "", run id, pid, thread, "new"
    return int(parts[2]) if len(parts) == 5 and parts[2].isdigit() else None


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _require_real_dir(path: Path) -> None:
    """Raise ``UnsafePathError`` unless ``path`` is a directory itself (not a symlink to one)."""
    if not stat.S_ISDIR(os.lstat(path).st_mode):
        raise layout.UnsafePathError(f"{path} is not a directory (a symlink or a file in its place)")


def _check_recording(path: Path) -> None:
    """Raise ``RunSealedError`` unless the bundle's capture says ``recording``."""
    try:
        status = orjson.loads((path / layout.CAPTURE_FILE).read_bytes()).get("status")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        status = None
    if status != CaptureStatus.RECORDING.value:
        raise RunSealedError(f"capture of {path} is {status or 'missing'}; a sealed bundle never changes")


def _recover_journal(events_path: Path) -> tuple[int, int]:
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


def _guarded(recorder: RunRecorder, step: Callable[[], bool | None]) -> bool | None:
    """Run one writer step of a run; a bug in one run must not stop the others."""
    try:
        return step()
    except Exception:  # noqa: BLE001
        logger.exception("bundle writer failed on %s", recorder.path)
        return None


def _restart_in_forked_children(writer: BundleWriter) -> None:
    reference = weakref.ref(writer)

    def after_fork_in_child() -> None:
        live = reference()
        if live is not None:
            live._after_fork_in_child()

    os.register_at_fork(after_in_child=after_fork_in_child)


def _weak_atexit(writer: BundleWriter):
    """Register shutdown at exit without keeping the writer alive."""
    reference = weakref.ref(writer)

    def shutdown_at_exit() -> None:
        live = reference()
        if live is not None:
            live.shutdown()

    atexit.register(shutdown_at_exit)
    return shutdown_at_exit
