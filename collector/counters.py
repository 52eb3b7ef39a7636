"""What became of the spans and log records handed to the assembly: per request and in total.

Contract::

    result = SubmitResult()                 # one export request's outcome
    result.reject(count, RejectReason.SEALED, "run … is already sealed")
    result.error_message                    # -> the ``partial_success`` message
    counters = Counters(); counters.add("bundled", 3); counters.snapshot(); counters.status_line()
    counters.refuse(Refused.SPAN, "sealed", 3)   # counted by what and why; a rate-limited WARNING
    counters.refused_snapshot()                  # -> {("span", "sealed"): 3, …}
    report = Reporter(counters); report.reject(result, 3, RejectReason.SEALED, "…"); report.unmatched(2, "why")

``Overloaded`` is raised before anything of a request is taken (the client retries it: HTTP 503
with ``Retry-After``, gRPC UNAVAILABLE); its ``reason`` (a ``RetryReason``) names what the client
waits for, and the refused requests are counted ``refused_<reason>``. ``partial_success`` is only for
what no retry can fix (``RejectReason``).
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from otel_session.core.log import get_logger

__all__ = [
    "Counters", "Overloaded", "RefusalLog", "Refused", "RejectReason", "Reporter", "RetryReason", "SubmitResult",
    "TooManyRequests", "kind_of",
]

logger = get_logger(__name__)

REFUSAL_LOG_INTERVAL_S = 10.0
"""At most one WARNING line per kind of refusal and reason this often (the count since the last one)."""


class RetryReason(str, Enum):
    """Why a request was refused whole, retryably: what the client's retry waits for."""

    WRITER_BEHIND = "writer_behind"
    """The bundle writer is behind (a run's queue, the runs awaiting their seal, a slow write)."""
    DESCRIPTORS = "descriptors"
    """The process or the system is out of file descriptors (EMFILE, ENFILE)."""
    DISK_FULL = "disk_full"
    """No space or no inodes left on the bundle root's file system (ENOSPC, EDQUOT)."""
    QUEUE_BYTES = "queue_bytes"
    """The runs' queues together hold ``max_queued_bytes``."""
    CLOSING = "closing"
    """The collector is shutting down."""
    CLAIMED = "claimed"
    """Another live collector holds the run's claim in the shared catalog (the gateway's ring moved)."""
    STORE_BACKLOG = "store_backlog"
    """Sealed runs waiting for the bundle store hold ``max_unstored_bytes`` of the local disk."""


class Overloaded(RuntimeError):
    """Nothing of the request was taken; the client should retry later (HTTP 429/503, gRPC
    UNAVAILABLE / RESOURCE_EXHAUSTED)."""

    def __init__(self, message: str, reason: RetryReason = RetryReason.WRITER_BEHIND) -> None:
        super().__init__(message)
        self.reason = reason


class TooManyRequests(Overloaded):
    """More concurrent export requests than the collector serves at once."""


class RejectReason(str, Enum):
    SEALED = "sealed"
    LOCKED = "locked"
    CAPTURE_STOPPED = "capture_stopped"
    INVALID_ID = "invalid_id"
    IO_ERROR = "io_error"


class Refused(str, Enum):
    """What a refusal counts: spans or log records (``partial_success``, or a forward copy dropped),
    whole export requests (an error status: retryable or malformed), or OTLP/HTTP connections
    closed by the collector (headers too slow, silent, or evicted for a newcomer)."""

    SPAN = "span"
    LOG_RECORD = "log_record"
    REQUEST = "request"
    CONNECTION = "connection"


@dataclass
class SubmitResult:
    accepted: int = 0
    rejected: int = 0
    messages: list[str] = field(default_factory=list)
    rejected_by: dict[RejectReason, int] = field(default_factory=dict)
    appended: list[tuple[Any, int, int, int]] = field(default_factory=list)
    """``(RunRecorder, seq, spans journaled, spans it had journaled already)`` per run appended to:
    what must be in the journal before the answer."""

    @property
    def error_message(self) -> str:
        return "; ".join(self.messages)

    def reject(self, count: int, reason: RejectReason, message: str) -> None:
        self.rejected += count
        self.rejected_by[reason] = self.rejected_by.get(reason, 0) + count
        if message not in self.messages:
            self.messages.append(message)


class Counters:
    """Span and log record counters (received, bundled, forwarded, rejected, no_session, …); thread-safe.

    ``received`` counts spans the receivers decoded (a retried request counts again; a request
    refused for the sealing backlog before decoding does not count); ``duplicate_spans`` those a
    run had journaled already (a retry's: accepted, journaled once); ``log_records_*`` count log
    records, ``log_events_*`` the GenAI message events among them (``log_events_duplicate``: a
    retried request's, equal to a request's taken before: accepted, kept once); ``refused_<reason>``
    export requests refused whole, retryably (``RetryReason``: the client sends them again);
    ``held_spans_derived_early`` spans of traces recorded as sessions of their own before their hold
    ended, because the held spans reached ``max_held_bytes``.
    """

    NAMES = (
        "received", "bundled", "forwarded", "forward_failed", "rejected", "no_session", "runs_sealed",
        "log_records_received", "log_records_ignored", "log_events_bundled", "log_events_unmatched",
        "log_records_rejected", "log_records_forwarded", "log_records_forward_failed", "runs_session_derived",
        "duplicate_spans", "log_events_duplicate",
        "forward_dropped", "log_records_forward_dropped", "forward_retried",
        "duplicate_spans", "log_events_duplicate", "held_spans_derived_early", "runs_reopened",
        "runs_taken_over", "claims_lost",
        *(f"refused_{reason.value}" for reason in RetryReason),
    )
    """``forward_dropped`` / ``log_records_forward_dropped``: items whose forward copy was dropped at
    the forward queue's byte bound or left queued when the forwarder stopped (their bundles are not
    affected); ``forward_retried``: forward attempts repeated after a retryable answer."""

    def __init__(self, *, refusal_log: RefusalLog | None = None) -> None:
        self._lock = threading.Lock()
        self._values = dict.fromkeys(self.NAMES, 0)
        self._refused: dict[tuple[Refused, str], int] = {}
        self.refusal_log = refusal_log or RefusalLog()

    def refuse(self, what: Refused, reason: str, count: int = 1) -> None:
        """Count ``count`` items refused for ``reason`` (a fixed word such as ``sealed`` or
        ``overloaded``, never a value of the request) and log it, rate-limited."""
        if count <= 0:
            return
        with self._lock:
            key = (what, reason)
            self._refused[key] = self._refused.get(key, 0) + count
        self.refusal_log.note(what, reason, count)

    def refused_snapshot(self) -> dict[tuple[Refused, str], int]:
        with self._lock:
            return dict(self._refused)

    def add(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self._values[name] += amount

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._values)

    def status_line(self) -> str:
        return " ".join(f"{name}={value}" for name, value in self.snapshot().items())


class RefusalLog:
    """Refusals logged at WARNING, at most one line per (what, reason) each ``interval_s``.

    The first refusal of a kind is logged at once; later ones within the interval are summed and
    logged with their count when the next one comes after the interval, or by :meth:`flush` (the
    collector's status timer calls it), so no count is left unsaid.
    """

    def __init__(self, interval_s: float = REFUSAL_LOG_INTERVAL_S, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last: dict[tuple[Refused, str], float] = {}
        self._pending: dict[tuple[Refused, str], int] = {}

    def note(self, what: Refused, reason: str, count: int) -> None:
        key = (what, reason)
        now = self._clock()
        with self._lock:
            pending = self._pending.get(key, 0) + count
            last = self._last.get(key)
            if last is not None and now - last < self.interval_s:
                self._pending[key] = pending
                return
            self._pending[key] = 0
            self._last[key] = now
        self._write(what, reason, pending, None if last is None else now - last)

    def flush(self, *, force: bool = False) -> None:
        """Log the counts held back for longer than the interval (every count held, with ``force``)."""
        now = self._clock()
        due = []
        with self._lock:
            for key, pending in self._pending.items():
                if pending and (force or now - self._last[key] >= self.interval_s):
                    due.append((key, pending, now - self._last[key]))
                    self._pending[key] = 0
                    self._last[key] = now
        for (what, reason), pending, since in due:
            self._write(what, reason, pending, since)

    def _write(self, what: Refused, reason: str, count: int, since_s: float | None) -> None:
        if since_s is None:
            logger.warning("refused %d %s(s): %s (further refusals for this reason: one line every %d s "
                           "with their count)", count, what.value, reason, round(self.interval_s))
        else:
            logger.warning("refused %d %s(s) in the last %d s: %s", count, what.value, round(since_s), reason)
class Reporter:
    """Count, then log, what was not bundled (whoever sees a count sees its warning too).
    ``sealed_level``: the level of a rejection for a sealed run (debug where repeats are expected)."""

    def __init__(self, counters: Counters, sealed_level: int = logging.WARNING) -> None:
        self.counters = counters
        self.sealed_level = sealed_level

    def reject(
        self,
        result: SubmitResult,
        count: int,
        reason: RejectReason,
        message: str,
        *,
        what: str = "span",
        detail: Exception | None = None,
    ) -> None:
        """Count and report a rejection: ``message`` goes to the client, ``detail`` to the log only,
        as its type and errno name (an exception's text names paths, which hold session ids)."""
        result.reject(count, reason, message)
        self.counters.add("rejected" if what == "span" else "log_records_rejected", count)
        level = self.sealed_level if reason is RejectReason.SEALED else logging.WARNING
        logger.log(level, "rejected %d %s(s) (%s): %s%s", count, what, reason.value, message,
                   f" ({kind_of(detail)})" if detail else "")

    def unmatched(self, count: int, why: str) -> None:
        """GenAI log events that will never be bundled."""
        logger.warning("%d GenAI log event(s) not bundled: %s", count, why)
        self.counters.add("log_events_unmatched", count)


def kind_of(exc: Exception) -> str:
    """An exception for a log line: its type and errno name, never its text."""
    code = getattr(exc, "errno", None)
    return f"{type(exc).__name__} {errno.errorcode.get(code, code)}" if isinstance(code, int) else type(exc).__name__
