"""What a recording is made of and ends with: append results, failure codes, bounds, errors.

Contract::

    AppendResult.ACCEPTED | CAPTURE_STOPPED       # one record handed to ``RunRecorder.append``
    FailureCode.DISK_FULL, ...                    # ``capture.json`` ``failure.code``
    WriterLimits(max_queue_bytes=...)             # batching and bounds (SPEC §5.4)
    Written.WRITTEN | QUEUED | LOST               # where a recorder's records are
    WaitResult(WaitStatus.WRITTEN | LOST | TIMED_OUT, lost)   # ``BundleWriter.wait_written``
    failure_code_for(os_error) -> FailureCode
    WriterLoop                                    # what a recorder needs of its writer

The recorder (``otel_session.bundle.recorder``) and the writer (``otel_session.bundle.write``) share
these; both re-export them.
"""

from __future__ import annotations

import errno
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from otel_session.bundle.claims import RunLockedError

__all__ = [
    "AppendResult",
    "CaptureFailure",
    "FailureCode",
    "RecordHead",
    "RunLockedError",
    "RunSealedError",
    "WriterClosedError",
    "WriterLimits",
    "WaitResult",
    "WaitStatus",
    "WriterLoop",
    "Written",
    "failure_code_for",
    "now_ns",
]


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


class RunSealedError(RuntimeError):
    """The run's capture is already terminal; its bundle never changes again (``path``: the
    bundle, when known; only its recorder may reopen it, ``BundleWriter.continue_run``)."""

    def __init__(self, message: str, path: Any = None) -> None:
        super().__init__(message)
        self.path = path


@dataclass(frozen=True)
class WriterLimits:
    """Batching and bounds. The defaults are the ones SPEC §5.4 gives."""

    flush_interval_s: float = 0.025
    batch_records: int = 256
    batch_bytes: int = 256 * 1024
    max_queue_records: int = 8192
    max_queue_bytes: int = 16 * 1024 * 1024
    max_event_bytes: int = 1024 * 1024


@dataclass(frozen=True)
class CaptureFailure:
    failed_at: str
    code: FailureCode
    message: str

    def as_json(self) -> dict[str, str]:
        return {"failed_at": self.failed_at, "code": self.code.value, "message": self.message}


class RecordHead:
    """A record's fields that stay the same across many records (type, ids, turn), encoded once."""

    __slots__ = ("type", "correlation", "encoded")

    def __init__(self, event_type: str, correlation: tuple[Any, ...], encoded: bytes) -> None:
        self.type = event_type
        self.correlation = correlation
        """``(turn_index, message_id, tool_call_id, trace_id, span_id)``, as ``RunRecorder._whole`` takes them."""
        self.encoded = encoded


class WaitStatus(Enum):
    """How ``BundleWriter.wait_written`` ended."""

    WRITTEN = "written"
    LOST = "lost"
    """Some recorders' captures stopped before their records were written (``WaitResult.lost``)."""
    TIMED_OUT = "timed_out"


@dataclass(frozen=True)
class WaitResult:
    status: WaitStatus
    lost: list[Any] = field(default_factory=list)
    """The ``RunRecorder``s whose records will never be written."""


class Written(Enum):
    """Where records handed to a recorder are (:meth:`RunRecorder.written`)."""

    WRITTEN = "written"
    """In the journal file: written to the OS, so a kill -9 of this process keeps them."""
    QUEUED = "queued"
    """Still in memory, waiting for the writer thread."""
    LOST = "lost"
    """The capture stopped (I/O error, bound) before they were written: they never will be."""


class WriterLoop(Protocol):
    """What a recorder needs from its ``BundleWriter``."""

    limits: WriterLimits

    def schedule(self, recorder: Any, *, urgent: bool) -> None: ...

    def forget(self, recorder: Any) -> None:
        """The run is sealed: its journal closed, its owner mark gone, out of the open runs."""

    def journal_fd(self, recorder: Any) -> int:
        """The run's journal, open for append (writer thread: ``claims.JournalFiles``)."""

    def close_journal(self, recorder: Any) -> None: ...

    def _write(self, fd: int, data: memoryview) -> int: ...


def failure_code_for(error: OSError) -> FailureCode:
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return FailureCode.DISK_FULL
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return FailureCode.PERMISSION_DENIED
    return FailureCode.IO_ERROR


def now_ns() -> int:
    return time.time_ns()
