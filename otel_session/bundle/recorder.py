"""The recording of one run: stamp, number and queue records; the writer thread appends and seals.

Contract::

    run = writer.open_run(...)                      # -> RunRecorder (see otel_session.bundle.write)
    run.append(type, payload, at_ns=...)            # -> AppendResult; never raises, never blocks on disk
    run.append_events(events) -> int                # a batch under one lock: how many were accepted
    head = run.head(type, turn_index=..., message_id=..., trace_id=..., span_id=...)  # once per message
    run.append_to(head, payload, at_ns) -> bool     # the hot path: the head encoded once, the payload now
    run.close(run_status=None, reorder=None, capture_extras=None)   # drain, (rewrite,) seal
    run.failure, run.sealed, run.wait_sealed(timeout)
    run.written(run.enqueued_seq) -> Written        # in the journal file yet? (BundleWriter.wait_written)

``seq`` is assigned at enqueue. The caller's thread makes each record's whole line, byte for byte
``encode_record``'s, so the queue holds lines of their exact size for the bounds: its payload
encoded at once (a snapshot), its head ``append_to``'s once for many records or from the run's
parts encoded once (``journal.HeadEncoder``; a batch's in one loop, ``HeadEncoder.parts``),
the ``seq`` and ``at`` stamped under the run's lock; the writer thread joins the queue in one
``b"".join`` and writes it. A
record only ``encode_record`` can tell about (a value to cut or fall back for) is encoded whole. Reaching a queue
bound, an oversized event or an append error marks the capture ``failed`` with a ``FailureCode``, stops the recording and is logged. ``reorder`` is a
mechanism, not a policy: the recorder rewrites the journal sorted by the caller's key (the
collector's assembly decides when, and which ``capture_extras`` say so); when that moved any
record, ``capture.json`` says ``"resequenced": true`` so a live follower knows its ``seq``s changed.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from otel_session.core import layout
from otel_session.bundle.files import count_complete_lines, write_json_atomic, write_temporary
from otel_session.core.journal import (
    CAPTURE_SCHEMA,
    CaptureStatus,
    EventType,
    HeadEncoder,
    composed_payload,
    compose_line,
    decode_line,
    encode_record,
    format_timestamp,
    stamp_lines,
)
from otel_session.core.log import get_logger
from otel_session.bundle.recording import (
    AppendResult,
    CaptureFailure,
    FailureCode,
    RecordHead,
    RunLockedError,
    RunSealedError,
    WriterClosedError,
    WriterLimits,
    WriterLoop,
    Written,
    failure_code_for,
    now_ns,
)

if TYPE_CHECKING:
    from otel_session.normalize import JournalEvent

__all__ = [
    "AppendResult",
    "CaptureFailure",
    "FailureCode",
    "RecordHead",
    "RunLockedError",
    "RunRecorder",
    "RunSealedError",
    "WriterClosedError",
    "WriterLimits",
    "Written",
]

logger = get_logger(__name__)


class RunRecorder:
    """The recording of one run. ``append`` is safe from any thread and never waits for disk."""

    def __init__(
        self,
        writer: WriterLoop,
        path: str | Path,
        manifest: dict[str, Any],
        next_seq: int,
        recovered_torn_bytes: int,
        *,
        created: bool,
    ) -> None:
        self.directory = os.fspath(path)
        """The bundle's directory as a string (``path`` is made from it when first asked)."""
        self.session_id: str = manifest["session_id"]
        self.run_id: str = manifest["run_id"]
        self.manifest = manifest
        self.recovered_torn_bytes = recovered_torn_bytes
        """Bytes of a torn final line cut when this run was reopened after a crash (0 if none)."""
        self._writer = writer
        self._limits = writer.limits
        self.journal_path = f"{self.directory}/{layout.EVENTS_FILE}"
        self._events_fd = -1
        """The journal while the writer keeps it open (``claims.JournalFiles``), else -1: no
        descriptor per open run; the one-writer lock is the writer's (``claims``)."""
        self._heads = HeadEncoder(self.session_id, self.run_id)
        self._lines_on_disk: int | None = 0 if created else None
        """Lines the journal holds when this process made it (None: count them at seal)."""
        self.created = created
        """Made by this writer, not continued: its capture holds this writer's ``recording`` bytes."""
        self._lock = threading.Lock()
        self._next_seq = next_seq
        self._written_seq = next_seq - 1
        """The last ``seq`` handed to the OS (``write`` returned): it survives a kill of this process."""
        self._pending: list[bytes] = []
        """Queued lines, joined and written by the writer thread."""
        self._pending_bytes = 0
        self._scheduled = False
        self._full_signalled = False
        self._accepting = True
        self._close_requested = False
        self._seal_claimed = False
        self._discard_pending = False
        self._sealed = False
        self._sealed_event: threading.Event | None = None
        """Made by the first :meth:`wait_sealed` only: an ``Event`` (its ``Condition``) cost as much as
        the rest of a recorder's construction, and the collector never waits on one."""
        self._failure: CaptureFailure | None = None
        self._reorder: Callable[[dict[str, Any]], Any] | None = None
        self._capture_extras: dict[str, Any] = {}
        self.peak_queued_records = 0
        self.peak_queued_bytes = 0
        self.batches_written = 0

    @functools.cached_property
    def path(self) -> Path:
        """The bundle's directory (built on first use: a ``Path`` per run cost as much as a system call)."""
        return Path(self.directory)

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
        event_type = event_type.value if isinstance(event_type, EventType) else event_type
        at_ns = now_ns() if at_ns is None else at_ns
        body = composed_payload(payload, at_ns)
        if body is None:  # a value only encode_record can tell about
            queued = self._enqueue(self._whole, event_type, at_ns, turn_index, message_id, tool_call_id, trace_id,
                                   span_id, payload)
        else:
            head = self._heads.encode(event_type, turn_index, message_id, tool_call_id, trace_id, span_id)
            queued = self._enqueue(compose_line, at_ns, head, body)
        return AppendResult.ACCEPTED if queued else AppendResult.CAPTURE_STOPPED

    def append_events(self, events: Iterable[JournalEvent]) -> int:
        """Encode, stamp and enqueue normalized (and redacted) events in order: their heads and
        payloads encoded first (``HeadEncoder.parts``: a value's ``repr`` may append to this run),
        their lines stamped under one lock (``stamp_lines``: ``seq`` follows the queue's order).

        Returns how many were accepted: all of them, or those before the first refusal (the
        capture stopped there, see :attr:`failure`). Never raises, never blocks on disk.
        """
        records = events if type(events) is list else list(events)
        return self._enqueue(stamp_lines, records, self._heads.parts(records), self._whole)

    def head(
        self,
        event_type: str | EventType,
        *,
        turn_index: int | None = None,
        message_id: str | None = None,
        tool_call_id: str | None = None,
        trace_id: str | None = None,
        span_id: str | None = None,
    ) -> RecordHead:
        """The fields records of one kind share (a message's deltas, a turn's slot writes), for
        :meth:`append_to`: encoded once, not per record."""
        event_type = event_type.value if isinstance(event_type, EventType) else event_type
        correlation = (turn_index, message_id, tool_call_id, trace_id, span_id)
        return RecordHead(event_type, correlation, self._heads.encode(event_type, *correlation))

    def append_to(self, head: RecordHead, payload: dict[str, Any] | None, at_ns: int) -> bool:
        """Enqueue one record of ``head``: the payload is encoded now (later changes to it are not
        recorded), the line stamped at enqueue. False when refused (the capture
        stopped). Never raises, never blocks on disk."""
        body = composed_payload(payload, at_ns)
        if body is None:  # a value only encode_record can tell about
            return self._enqueue(self._whole, head.type, at_ns, *head.correlation, payload) == 1
        return self._enqueue(compose_line, at_ns, head.encoded, body) == 1

    def _whole(
        self,
        seq: int,
        event_type: str,
        at_ns: int,
        turn_index: int | None,
        message_id: str | None,
        tool_call_id: str | None,
        trace_id: str | None,
        span_id: str | None,
        payload: dict[str, Any] | None,
    ) -> bytes:
        """The line of a record only ``encode_record`` can encode (``journal.stamp_lines``' ``whole``)."""
        record: dict[str, Any] = {
            "seq": seq,
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
        return encode_record(record)

    def _enqueue(self, lines_from: Callable[..., bytes | list[bytes]], *args: Any) -> int:
        """Number, size and queue records in order: ``lines_from(seq, *args)``, called under the
        lock (so ``seq`` follows the queue's order), gives their line or lines numbered from
        ``seq``; stop the capture at the first that would pass a bound. Returns how many were queued."""
        limits = self._limits
        with self._lock:
            if not self._accepting:
                return 0
            seq = self._next_seq
            lines = lines_from(seq, *args)
            if type(lines) is bytes:
                lines = [lines]
            pending = self._pending
            added = sum(map(len, lines))
            queued_bytes = self._pending_bytes + added
            if (len(pending) + len(lines) > limits.max_queue_records or queued_bytes > limits.max_queue_bytes
                    or (added > limits.max_event_bytes and max(map(len, lines)) > limits.max_event_bytes)):
                lines = self._within_bounds_locked(seq, lines)
                queued_bytes = self._pending_bytes + sum(map(len, lines))
            pending += lines
            self._next_seq = seq + len(lines)
            wake = self._queued_locked(queued_bytes) if lines else None
        if wake is not None:
            self._writer.schedule(self, urgent=wake)
        return len(lines)

    def _within_bounds_locked(self, seq: int, lines: list[bytes]) -> list[bytes]:
        """The lines before the first that would pass a bound; the capture fails there, with the bound's code."""
        limits = self._limits
        queued, queued_bytes = len(self._pending), self._pending_bytes
        for index, line in enumerate(lines):
            size = len(line)
            if size > limits.max_event_bytes or queued >= limits.max_queue_records or queued_bytes + size > limits.max_queue_bytes:
                self._fail_bound_locked(seq + index, str(decode_line(line).get("type")), size, queued, queued_bytes)
                return lines[:index]
            queued += 1
            queued_bytes += size
        return lines

    def _queued_locked(self, queued_bytes: int) -> bool | None:
        """Records were queued: note the queue's size and peaks; whether to wake the writer (``_wake_locked``)."""
        self._pending_bytes = queued_bytes
        if len(self._pending) > self.peak_queued_records:
            self.peak_queued_records = len(self._pending)
        if queued_bytes > self.peak_queued_bytes:
            self.peak_queued_bytes = queued_bytes
        return self._wake_locked()

    def _fail_bound_locked(self, seq: int, event_type: str, size: int, queued: int, queued_bytes: int) -> None:
        """A record of ``size`` bytes passes a bound: the capture fails with the bound's code."""
        limits = self._limits
        if size > limits.max_event_bytes:
            self._fail_locked(
                FailureCode.EVENT_TOO_LARGE,
                f"event seq {seq} ({event_type}) is {size} bytes; the limit is {limits.max_event_bytes}",
            )
        elif queued >= limits.max_queue_records:
            self._fail_locked(
                FailureCode.QUEUE_RECORDS_EXCEEDED, f"{limits.max_queue_records} records already queued at seq {seq}"
            )
        else:
            self._fail_locked(
                FailureCode.QUEUE_BYTES_EXCEEDED,
                f"{queued_bytes} bytes already queued at seq {seq}; the limit is {limits.max_queue_bytes}",
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
        capture_extras: dict[str, Any] | None = None,
    ) -> None:
        """Stop accepting records; the writer drains, counts lines and writes terminal capture.

        With ``run_status`` a final ``run_finished`` record with that status is appended first.
        With ``reorder`` (a sort key over decoded records) the writer thread rewrites the journal
        sorted by that key, stably, with ``seq`` renumbered 1…N, before the terminal capture
        (temporary file, sync, rename: with the other runs sealed in the same writer pass,
        ``otel_session.bundle.seal``) — unless it is in that order already; when records moved, the
        capture says ``"resequenced": true``. A journal that cannot be rewritten stays as
        appended. ``capture_extras`` are added to the terminal ``capture.json``.
        Idempotent; returns at once (use :meth:`wait_sealed` or ``BundleWriter.force_flush``).
        """
        if run_status is not None:
            self.append(EventType.RUN_FINISHED, {"status": run_status})
        with self._lock:
            if capture_extras and not self._seal_claimed:  # also for a capture that failed first
                self._capture_extras.update(capture_extras)
            if self._close_requested:
                return
            self._accepting = False
            self._close_requested = True
            self._reorder = reorder
        self._writer.schedule(self, urgent=True)

    def replace_manifest(self, manifest: dict[str, Any]) -> bool:
        """Replace ``run.json`` by ``manifest`` (same ``session_id`` and ``run_id``) while the run
        records: a temporary file renamed over it, made durable by the seal like the rest of the
        bundle. False once the run is closing or its capture stopped (after its terminal status
        nothing in a bundle changes); ``OSError`` if the file cannot be replaced (it stays as it was)."""
        if (manifest.get("session_id"), manifest.get("run_id")) != (self.session_id, self.run_id):
            raise ValueError("a run's manifest keeps its session and run ids")
        with self._lock:
            if self._close_requested:
                return False
            write_json_atomic(f"{self.directory}/{layout.RUN_FILE}", manifest, sync=False)
            self.manifest = manifest
        return True

    def _disown_after_fork(self) -> None:
        """In a forked child: this run belongs to the parent; accept nothing, touch nothing."""
        self._lock = threading.Lock()  # another thread may have held it at the fork
        self._accepting = False
        self._close_requested = self._seal_claimed = True
        self._pending = []
        self._pending_bytes = 0
        self._sealed = True  # nothing to wait for here
        self._sealed_event = None
        fd, self._events_fd = self._events_fd, -1
        if fd >= 0:
            os.close(fd)  # the child's copy; the parent keeps its own

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
    def queued_bytes(self) -> int:
        """Bytes of the records enqueued and not yet handed to the writer thread."""
        return self._pending_bytes

    @property
    def enqueued_seq(self) -> int:
        """The ``seq`` of the last record accepted (0 before the first)."""
        return self._next_seq - 1

    def written(self, seq: int) -> Written:
        """Whether the records up to ``seq`` are in the journal file (handed to the OS: they survive
        a kill of this process; fsync waits for the seal), still queued, or never will be."""
        if self._written_seq >= seq:
            return Written.WRITTEN
        if self._discard_pending or self._io_failed() or self._sealed:
            return Written.LOST
        return Written.QUEUED

    @property
    def sealed(self) -> bool:
        return self._sealed

    def wait_sealed(self, timeout: float | None = None) -> bool:
        """Wait until terminal capture status is on disk."""
        if self._sealed:
            return True
        with self._lock:  # _end_seal sets the flag and reads the event under it: no wake-up is missed
            if self._sealed:
                return True
            event = self._sealed_event
            if event is None:
                event = self._sealed_event = threading.Event()
        return event.wait(timeout)

    def _fail_locked(self, code: FailureCode, message: str) -> None:
        if self._failure is None:
            self._failure = CaptureFailure(format_timestamp(now_ns()), code, message)
            logger.error("capture of %s failed (%s): %s", self.path, code.value, message)
        self._accepting = False
        if not self._close_requested:
            self._close_requested = True
            self._writer.schedule(self, urgent=True)

    # -- writer-thread side ----------------------------------------------------------------

    def _drain(self) -> bool:
        """Write what is queued; True when the run is closing and now needs its seal (once; ``otel_session.bundle.seal``)."""
        with self._lock:
            pending, self._pending = self._pending, []
            self._pending_bytes = 0
            self._scheduled = False
            self._full_signalled = False
            seal = self._close_requested and not self._seal_claimed
            self._seal_claimed = self._close_requested
            discard = self._discard_pending
            upto = self._next_seq - 1
        if pending and not discard and not self._io_failed():
            if self._write_batch(b"".join(pending), len(pending)):
                self._written_seq = upto
        return seal

    def _io_failed(self) -> bool:
        failure = self._failure
        return failure is not None and failure.code in (
            FailureCode.DISK_FULL,
            FailureCode.PERMISSION_DENIED,
            FailureCode.IO_ERROR,
        )

    def _write_batch(self, data: bytes, lines: int) -> bool:
        # Everything pending goes out in one write: a thread waiting for the GIL after each
        # syscall would otherwise fall behind a busy producer and overrun the queue bound.
        try:
            self._write_all(data)
        except OSError as exc:
            with self._lock:
                self._fail_locked(
                    failure_code_for(exc),
                    f"append to {layout.EVENTS_FILE} failed: {exc}; "
                    f"a batch of {lines} records was not (fully) written",
                )
                self._discard_pending = True
            self._lines_on_disk = None  # a partial write: count what is there
            return False
        self.batches_written += 1
        if self._lines_on_disk is not None:
            self._lines_on_disk += lines
        return True

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        fd = self._writer.journal_fd(self)
        while view:
            written = self._writer._write(fd, view)
            view = view[written:]

    def _rewrite_aside(self, tmp_path: str) -> int | None:
        """Write the journal's records sorted by the ``reorder`` key, ``seq`` renumbered, to ``tmp_path``
        (unsynced: the group seal syncs and renames it, ``otel_session.bundle.seal``); its line
        count, or None when there is nothing to rewrite.

        Not asked, a capture that failed, or a journal already in that order (numbered 1…N): None.
        Lines that do not decode (a torn tail cut at reopen never gets here) keep their relative
        position at the end, so the rewrite never loses bytes. On any error the appended journal
        stays and the error is logged.
        """
        if self._reorder is None or self._failure is not None:
            return None
        events_path = self.path / layout.EVENTS_FILE
        try:
            lines = events_path.read_bytes().splitlines()
            records: list[dict[str, Any]] = []
            undecodable: list[bytes] = []
            for line in lines:
                try:
                    records.append(decode_line(line))
                except ValueError:
                    undecodable.append(line + b"\n")
            records.sort(key=self._reorder)
            if not undecodable and all(record.get("seq") == seq for seq, record in enumerate(records, start=1)):
                return None
            chunks = []
            for seq, record in enumerate(records, start=1):
                record["seq"] = seq
                chunks.append(encode_record(record))
            chunks.extend(undecodable)
            os.close(write_temporary(tmp_path, b"".join(chunks)))
        except Exception:  # noqa: BLE001 - a bad key or I/O error keeps the appended journal
            logger.exception("could not rewrite %s in order; it stays in append order", events_path)
            return None
        return len(chunks)

    def _adopt_journal(self, lines: int) -> None:
        """The rewritten journal replaced the appended one: the old file's descriptor goes."""
        self._writer.close_journal(self)
        self._lines_on_disk = lines

    def _terminal_capture(self, lines: int | None, *, resequenced: bool) -> dict[str, Any]:
        """The terminal ``capture.json``: status from the failure (if any), ``lines`` counted (None:
        the journal as appended), the caller's extras, ``resequenced`` when the rewrite moved records."""
        if lines is None:
            lines = self._lines_on_disk
            if lines is None:
                lines = count_complete_lines(self._writer.journal_fd(self))
        capture: dict[str, Any] = {
            "schema": CAPTURE_SCHEMA,
            "status": CaptureStatus.FAILED.value if self._failure else CaptureStatus.COMPLETE.value,
            "event_count": lines,
        }
        if self._failure is not None:
            capture["failure"] = self._failure.as_json()
        capture.update(self._capture_extras)
        if resequenced:
            capture["resequenced"] = True
        return capture

    def _fail_seal(self, error: OSError, message: str) -> None:
        with self._lock:
            self._fail_locked(failure_code_for(error), message)

    def _end_seal(self) -> None:
        """The terminal capture is durable (or could not be written, logged): release the run."""
        try:
            self._writer.forget(self)  # its journal closed, its owner mark gone
        finally:
            with self._lock:
                self._sealed = True
                event = self._sealed_event
            if event is not None:
                event.set()
