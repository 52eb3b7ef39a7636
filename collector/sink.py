"""Spans → runs → bundles: the collector's assembly (intake, routing, log join, ordering, sealing).

Contract::

    sink = BundleSink(writer, redactor, seal_after_s=10.0)
    result = sink.submit(spans)     # -> SubmitResult(rejected, messages) once journaled; raises Overloaded
    result = sink.submit_log_events(detached)   # GenAI log events, joined to their spans
    sink.seal_quiet_runs()          # called periodically: root seen + quiet for seal_after_s → seal
    sink.seal_all()                 # at shutdown: finished runs seal, the rest as interrupted
    sink.counters.snapshot()

Settings (seal and hold times, bounds) come from ``options.CollectorOptions``. The stages, one
module each: ``routing`` (which run a trace's spans belong to; spans of a trace with no session
yet wait up to ``hold_unrouted_s``, default 30 s, beyond the SDK batch processor's 5 s export
delay, for a span that names it, then become a run of a session of their own: ``session_id`` =
``run_id``, ``"session_derived": true`` in ``run.json``), ``logjoin`` (GenAI log events joined to their spans, up to ``hold_logs_s`` early, a
moment late), ``ordering`` (event-time order), ``sealing`` (the run being assembled, its seal) and
``counters``, ``journaling`` (each span once into its run) and ``restart`` (runs resumed after a
crash, or reopened after a stop sealed them). Every span is normalized once (with the log events
that waited for it) → redacted (``Redactor.redact_events``: a message's deltas as one stream) →
appended in event-time order. What a retry can fix raises ``Overloaded`` before anything of the
request is taken (the writer behind, the queues past their bytes, no descriptor, disk or inode to
open a run); for a sealed run, spans and log events are rejected (``partial_success``); log events
never joined are counted as ``log_events_unmatched``.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
import uuid
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from otel_session.collector.counters import (
    Counters,
    Overloaded,
    RejectReason,
    Reporter,
    RetryReason,
    SubmitResult,
    TooManyRequests,
    kind_of,
)
from otel_session.collector.journaling import SpanJournal
from otel_session.collector.logjoin import LOG_SETTLE_S, LateJoin, TakenGroups, WaitingLogs, group_key
from otel_session.collector.options import CollectorOptions
from otel_session.collector.ordering import event_order_key
from otel_session.collector.restart import continued_run
from otel_session.collector.routing import HeldSpans, run_identity, session_of
from otel_session.collector.sealing import (
    COLLECTOR_STOPPED,
    ROOT_SPAN_MISSING,
    EventRedactor,
    OpenRun,
)
from otel_session.core.journal import CaptureStatus, EventType, format_timestamp, run_id_from_trace_id
from otel_session.core.layout import UnsafePathError
from otel_session.core.log import get_logger, log_id
from otel_session.normalize import DetachedEvent, SpanEventData, SpanView, genai
from otel_session.bundle.read import RunInfo, find_run
from otel_session.bundle.write import (
    BundleWriter,
    RunLockedError,
    RunRecorder,
    RunSealedError,
    WaitStatus,
    WriterClosedError,
)

if TYPE_CHECKING:
    from otel_session.collector.claiming import RunClaims

__all__ = [
    "COLLECTOR_STOPPED",
    "RECORDED_BY",
    "ROOT_SPAN_MISSING",
    "BundleSink",
    "Counters",
    "EventRedactor",
    "Overloaded",
    "RejectReason",
    "SubmitResult",
    "TooManyRequests",
    "event_order_key",
]

logger = get_logger(__name__)

_SEALED_MEMORY = 65_536
_WARN_EVERY_S = 60.0
_ACK_TIMEOUT_S = 30.0
_Planned = tuple[OpenRun, list[SpanView], dict[int, list[SpanEventData]]]
"""A run and the spans (with the log events that waited for them) to journal into it."""
_MAX_RUNS_AWAITING_SEAL = 256
_RUN_FINISHED = EventType.RUN_FINISHED.value
_RETRYABLE_ERRNOS = {
    errno.EMFILE: RetryReason.DESCRIPTORS, errno.ENFILE: RetryReason.DESCRIPTORS,
    errno.ENOSPC: RetryReason.DISK_FULL, errno.EDQUOT: RetryReason.DISK_FULL,
}
"""Errors opening a run that waiting can fix: the request is refused whole, retryably."""
RECORDED_BY = "otel-session collector"  # run.json `recorded_by`: runs this collector may resume


class BundleSink:
    """Routes normalized, redacted span events into one bundle per run (trace)."""

    def __init__(
        self,
        writer: BundleWriter,
        redactor: EventRedactor,
        options: CollectorOptions | None = None,
        *,
        counters: Counters | None = None,
        clock: Callable[[], float] = time.monotonic,
        recorded_by: str = RECORDED_BY,
        ack_after_write: bool = True,
        derive_sessions: bool = True,
        repeats_expected: bool = False,
        claims: RunClaims | None = None,
        admit_run: Callable[[], None] | None = None,
        **settings: Any,
    ) -> None:
        """``options`` (default: ``CollectorOptions()``, from the environment) with ``settings``
        (``seal_after_s=``, ``hold_logs_s=``, … any of its fields) applied. ``ack_after_write``:
        :meth:`submit` returns once its records are in the journal files (off for ``import``,
        which seals everything before it reports). ``derive_sessions``: a trace that named no
        session within ``hold_unrouted_s`` is recorded as a session of its own (off: counted
        ``no_session``, the span exporter's way). ``repeats_expected``: spans of a sealed run are
        an expected repeat (``import`` of a file again), logged at debug, not as warnings. ``claims``:
        the runs this collector holds in a shared catalog (``claiming``), asked at a run's first batch;
        ``admit_run`` raises ``Overloaded`` when no new run may open now (the store's backlog)."""
        options = (options or CollectorOptions()).with_values(**settings)
        self.writer = writer
        self.redactor = redactor
        self.seal_after_s = options.seal_after_s
        self.seal_rootless_after_s = max(options.seal_after_s, options.seal_rootless_after_s)
        self.hold_unrouted_s = options.hold_unrouted_s
        self.hold_logs_s = options.hold_logs_s
        self.counters = counters or Counters()
        self.recorded_by = recorded_by
        self.ack_after_write = ack_after_write
        self.derive_sessions = derive_sessions
        self.claims = claims
        self.admit_run = admit_run
        self._report = Reporter(self.counters, logging.DEBUG if repeats_expected else logging.WARNING)
        self._clock = clock
        self._journal = SpanJournal(writer, redactor, self.counters, self._report, clock,
                                    span_records=options.span_records)
        self._lock = threading.Lock()
        self._runs: dict[int, OpenRun] = {}
        self._sealed: OrderedDict[int, None] = OrderedDict()
        self._held = HeldSpans(options.max_held_spans, options.max_held_bytes)
        self._derived_early = 0
        self._derived_early_logged_at = float("-inf")
        """Spans recorded early since the last warning about it, and when that was (one a minute at most)."""
        self.max_queued_bytes = options.max_queued_bytes
        self._waiting_logs = WaitingLogs(options.max_held_log_events)
        self._taken_log_groups = TakenGroups()
        self._sealing: list[RunRecorder] = []
        self._queue_high_water = writer.limits.max_queue_records // 2
        self._queue_bytes_high_water = writer.limits.max_queue_bytes // 2

    # -- intake ----------------------------------------------------------------------------

    def submit(self, spans: Iterable[SpanView]) -> SubmitResult:
        """Bundle ``spans`` (one export request). Raises ``Overloaded`` before appending anything."""
        by_trace: dict[int, list[SpanView]] = defaultdict(list)
        for span in spans:
            by_trace[span.trace_id].append(span)
        result = SubmitResult()
        planned: list[_Planned] = []
        # A run's first batch here claims it in a shared catalog (a round trip: outside the lock).
        elsewhere = self.claims.check(by_trace) if self.claims is not None else ()  # raises Overloaded
        with self._lock:
            for trace_id in elsewhere:  # sealed by the collector that held it: rejected
                self._remember_sealed(trace_id)
            try:
                self._check_capacity_locked(by_trace)
                now = self._clock()
                # Every trace routed (a run opened may refuse the whole request, retryably) before
                # any held span or waiting log event is taken.
                routed = [(trace_id, run, trace_spans) for trace_id, trace_spans in by_trace.items()
                          if (run := self._run_for(trace_id, trace_spans, result, now)) is not None]
            except Overloaded as exc:
                self.counters.add(f"refused_{exc.reason.value}")
                raise
            for trace_id, run, trace_spans in routed:
                trace_spans = self._held.take(trace_id) + trace_spans
                joined = self._waiting_logs.take(trace_id, trace_spans) if self._waiting_logs else {}
                planned.append((run, trace_spans, joined))
        for run, trace_spans, log_events in planned:
            self._journal.append(run, trace_spans, log_events, result)
        if self.ack_after_write and result.appended:
            self._wait_journaled(result)
        return result

    def _wait_journaled(self, result: SubmitResult) -> None:
        """Return once ``result``'s records are in their journal files (written to the OS: a kill -9
        keeps them; fsync is the seal's). Spans of a capture that stopped first are rejected; a
        writer too slow raises ``Overloaded`` (the client's retry is then answered once they are
        written, not journaled again: ``_append``)."""
        waited = self.writer.wait_written([(recorder, seq) for recorder, seq, _, _ in result.appended], _ACK_TIMEOUT_S)
        if waited.status is WaitStatus.TIMED_OUT:
            self.counters.add(f"refused_{RetryReason.WRITER_BEHIND.value}")
            raise Overloaded(f"the bundle writer did not write the request within {_ACK_TIMEOUT_S:.0f} s; retry later")
        for recorder in waited.lost:
            bundled = sum(spans for appended, _, spans, _ in result.appended if appended is recorder)
            repeats = sum(repeats for appended, _, _, repeats in result.appended if appended is recorder)
            failure = recorder.failure
            why = f"{failure.code.value}: {failure.message}" if failure is not None else "the capture is closed"
            result.accepted -= bundled + repeats
            self.counters.add("bundled", -bundled)
            self.counters.add("duplicate_spans", -repeats)
            self._report.reject(result, bundled + repeats, RejectReason.CAPTURE_STOPPED, f"run {recorder.run_id}: {why}")

    def submit_log_events(self, detached: Iterable[DetachedEvent]) -> SubmitResult:
        """Join GenAI log events to their spans (one export request); ``accepted`` counts events
        taken (joined, or waiting for their span), ``rejected`` those of sealed runs."""
        by_span: dict[tuple[int, int], list[SpanEventData]] = defaultdict(list)
        for item in detached:
            by_span[(item.trace_id, item.span_id)].append(item.event)
        result = SubmitResult()
        now = self._clock()
        late: list[tuple[OpenRun, int, int, str, list[SpanEventData], bytes | None]] = []
        with self._lock:
            for (trace_id, span_id), events in by_span.items():
                key = group_key(trace_id, span_id, events)
                if key in self._taken_log_groups:  # the exporter's retry of a request taken: nothing new
                    result.accepted += len(events)
                    self.counters.add("log_events_duplicate", len(events))
                    continue
                run = self._runs.get(trace_id)
                span_hex = f"{span_id:016x}"
                if run is not None and span_hex in run.tree:  # its span came first
                    joins = run.joins.accepts_late(span_hex)
                    if joins is LateJoin.JOINS:
                        late.append((run, trace_id, span_id, span_hex, events, key))
                        continue
                    if joins is LateJoin.HAS_OWN:  # SPAN_AND_EVENT: the span has them
                        self.counters.add("log_events_bundled", len(events))
                        self._taken_log_groups.add(key)
                    else:
                        self._report.unmatched(len(events), f"they came after their span in run {run.recorder.run_id}, "
                                                     "which is not a model call")
                    result.accepted += len(events)
                elif self._hold_log_events(result, trace_id, span_id, events, now):
                    self._taken_log_groups.add(key)
        for run, trace_id, span_id, span_hex, events, key in late:
            with run.lock:
                joined = not run.closed and run.joins.add_late(span_hex, events, now)
                if joined:
                    run.last_activity = now
                    result.accepted += len(events)
            with self._lock:  # not joined: sealed, or the join expired, in between
                if joined or self._hold_log_events(result, trace_id, span_id, events, now):
                    self._taken_log_groups.add(key)
        return result

    def check_capacity(self) -> None:
        """Raise ``Overloaded`` now if a request would be refused for the sealing backlog or the
        queued bytes anyway.

        Receivers call it before decoding a request, so a refused request costs no decode.
        """
        with self._lock:
            try:
                self._check_capacity_locked({})
            except Overloaded as exc:
                self.counters.add(f"refused_{exc.reason.value}")
                raise

    def _check_capacity_locked(self, by_trace: dict[int, list[SpanView]]) -> None:
        """Refuse the request (retryably) while the writer is behind: on its seals, on the run of
        one of ``by_trace``'s traces (half its queue's records or bytes), or on all runs' queues
        together (``max_queued_bytes``)."""
        self._check_sealing_backlog()
        for run in (self._runs.get(trace_id) for trace_id in by_trace):
            if run is not None and (run.recorder.queued_records > self._queue_high_water
                                    or run.recorder.queued_bytes > self._queue_bytes_high_water):
                raise Overloaded(f"the bundle writer is behind on {run.recorder.run_id}; retry later")
        queued = self.writer.queued_bytes
        if queued > self.max_queued_bytes:
            raise Overloaded(f"the runs' queues hold {queued} bytes (the bound is {self.max_queued_bytes}); retry later",
                             RetryReason.QUEUE_BYTES)

    def _check_sealing_backlog(self) -> None:
        """Refuse (retryably) while too many closed runs wait for the writer to seal them.

        Every run's queue has its own bound, but many short runs each below it can together hold
        everything received (and two file descriptors each) while the writer falls behind:
        memory would grow with the load instead of being bounded. Called with ``_lock`` held.
        """
        if len(self._sealing) <= _MAX_RUNS_AWAITING_SEAL:
            return  # within the bound even if none sealed yet: not walked per request
        self._sealing = [recorder for recorder in self._sealing if not recorder.sealed]
        if len(self._sealing) > _MAX_RUNS_AWAITING_SEAL:
            raise Overloaded(f"the bundle writer is behind ({len(self._sealing)} runs awaiting their seal); retry later")

    # -- routing (``_lock`` held) -----------------------------------------------------------

    def _run_for(self, trace_id: int, spans: list[SpanView], result: SubmitResult, now: float) -> OpenRun | None:
        run = self._runs.get(trace_id)
        if run is not None:
            if run.session_derived and (named := session_of(spans)) is not None:
                run.session_derived = False  # told once
                logger.warning(
                    "run %s is recorded as a session of its own: its trace named no session within the hold "
                    "(%.0f s), and a span that came later names session %s; raise --hold-unrouted for runs "
                    "that name their session only on late spans (their root, say)",
                    log_id(run.recorder.run_id), self.hold_unrouted_s, log_id(named),
                )
            return run
        if trace_id in self._sealed:
            self._report.reject(result, len(spans), RejectReason.SEALED, f"run {spans[0].run_id} is already sealed")
            self._reject_waiting(trace_id)
            return None
        session_id = session_of(spans)
        if session_id is not None:
            return self._open(trace_id, session_id, spans, result, now)
        if self._held.hold(trace_id, spans, now):
            return None
        if not self.derive_sessions:  # over the bound
            self.counters.add("no_session", len(spans))
            return None
        run = self._derive(trace_id, spans, result, now)
        if run is not None:  # the held spans reached a bound: recorded now, not dropped
            early = len(spans) + self._held.count_of(trace_id)
            self.counters.add("held_spans_derived_early", early)
            self._derived_early += early
            if now - self._derived_early_logged_at >= _WARN_EVERY_S:
                logger.warning("%d span(s) recorded as sessions of their own before their hold ended: the held spans "
                               "reached their bound (%d spans, %.1f MiB held; --max-held-bytes)", self._derived_early,
                               self._held.count, self._held.bytes / 2**20)
                self._derived_early, self._derived_early_logged_at = 0, now
        return run

    def _derive(self, trace_id: int, spans: list[SpanView], result: SubmitResult, now: float) -> OpenRun | None:
        """Open the run of a trace that named no session as a session of its own (its run id),
        unless the run exists already under another session (a process before this one, or an
        earlier import, bound the trace while its other spans named one): then they are rejected."""
        run_id = spans[0].run_id
        existing = find_run(self.writer.root, run_id, include_evals=True)
        if (existing is not None and existing.capture_status == CaptureStatus.COMPLETE.value
                and (run := self._reopen(trace_id, existing.path, now)) is not None):
            return run  # sealed at a collector's stop: these spans continue it, under its session
        if existing is not None and existing.session_id != run_id:
            if existing.capture_status != CaptureStatus.RECORDING.value:
                self._remember_sealed(trace_id)
            self._report.reject(result, len(spans), RejectReason.SEALED,
                         f"run {run_id} is already recorded under the session another span of it named; "
                         "these spans of it named none", detail=RuntimeError(f"in {existing.path}"))
            return None
        return self._open(trace_id, run_id, spans, result, now, session_derived=True)

    def _open(
        self, trace_id: int, session_id: str, spans: list[SpanView], result: SubmitResult, now: float, *,
        session_derived: bool = False,
    ) -> OpenRun | None:
        if self.admit_run is not None:
            self.admit_run()  # raises Overloaded: nothing of the request is taken
        agents = genai.RunAgent()
        identity = run_identity(session_id, spans, agents)
        run_id = identity.run_id
        # What the client is told names the run and the reason, never a server path or an input
        # value (the session id may be personal data): the exception goes to the log only.
        try:
            recorder = self.writer.open_run(
                session_id=session_id,
                run_id=identity.run_id,
                kind=identity.kind,
                eval_id=identity.eval_id,
                agent=identity.agent,
                service=identity.service,
                created_at_ns=identity.created_at_ns,
                recorded_by=self.recorded_by,
                session_derived=session_derived,
            )
        except RunSealedError as exc:
            if exc.path is not None and (run := self._reopen(trace_id, exc.path, now)) is not None:
                return run
            self._remember_sealed(trace_id)
            message = f"run {run_id} is already sealed; a sealed bundle never changes"
            self._report.reject(result, len(spans), RejectReason.SEALED, message, detail=exc)
            self._reject_waiting(trace_id)
            return None
        except RunLockedError as exc:
            message = f"run {run_id} is held by another writer (one writer per run); route each trace to one collector"
            self._report.reject(result, len(spans), RejectReason.LOCKED, message, detail=exc)
            return None
        except UnsafePathError as exc:
            message = f"run {run_id}: its bundle directory is not a plain directory under the bundle root"
            self._report.reject(result, len(spans), RejectReason.INVALID_ID, message, detail=exc)
            return None
        except WriterClosedError as exc:
            raise Overloaded(str(exc), RetryReason.CLOSING) from None
        except OSError as exc:
            retry = _RETRYABLE_ERRNOS.get(exc.errno)
            if retry is not None:  # nothing of the request is taken: the client's retry lands it
                raise Overloaded(f"cannot open the bundle of run {run_id} now ({os.strerror(exc.errno)}); retry later",
                                 retry) from None
            reason = os.strerror(exc.errno) if exc.errno else type(exc).__name__
            message = f"cannot open the bundle of run {run_id}: {reason}"
            self._report.reject(result, len(spans), RejectReason.IO_ERROR, message, detail=exc)
            return None
        run = self._runs[trace_id] = OpenRun(recorder, now, agents=agents, agent=identity.agent)
        run.session_derived = session_derived
        return run

    # -- rejecting and counting ------------------------------------------------------------

    def _hold_log_events(
        self, result: SubmitResult, trace_id: int, span_id: int, events: list[SpanEventData], now: float
    ) -> bool:
        """Keep log events until their span comes (True), or reject them with their sealed run, or
        count them unmatched over the bound (``_lock`` held)."""
        if trace_id in self._sealed:
            message = f"run {run_id_from_trace_id(trace_id)} is already sealed"
            self._report.reject(result, len(events), RejectReason.SEALED, message, what="log record")
            return False
        result.accepted += len(events)
        if self._waiting_logs.hold(trace_id, span_id, events, now):
            return True
        self._report.unmatched(len(events), f"{self._waiting_logs.count} already wait for their spans")
        return False

    def _reject_waiting(self, trace_id: int) -> None:
        """Spans and log events that waited for a run found sealed (after a restart, or a file
        imported again) are rejected too: counted, never reported as unmatched or derived."""
        spans = len(self._held.take(trace_id))
        if spans:
            self.counters.add("rejected", spans)
            logger.log(self._report.sealed_level, "rejected %d held span(s) (sealed): run %s is already sealed", spans,
                       log_id(run_id_from_trace_id(trace_id)))
        count = self._waiting_logs.drop(trace_id)
        if count:
            self.counters.add("log_records_rejected", count)
            logger.log(self._report.sealed_level, "rejected %d log record(s) (sealed): run %s is already sealed", count,
                       log_id(run_id_from_trace_id(trace_id)))

    def _expire_waiting(
        self, is_expired: Callable[[float], bool], logs_expired: Callable[[float], bool], now: float
    ) -> list[_Planned]:
        """End the wait of held spans and waiting log events whose time is up (``_lock`` held).

        A trace that named no session becomes a run of a session of its own (its run id, and
        ``session_derived`` in ``run.json``; or, with ``derive_sessions`` off, is counted
        ``no_session``): returned to be journaled outside the lock. Log events that never met
        their span are counted unmatched.
        """
        planned: list[_Planned] = []
        for trace_id, first_seen, spans in self._held.expire(is_expired):
            run = None
            if self.derive_sessions:
                try:
                    run = self._derive(trace_id, spans, SubmitResult(), now)
                except Overloaded as exc:  # out of disk or descriptors: they wait for the next tick
                    self._held.restore(trace_id, first_seen, spans)
                    logger.warning("trace %s still waits (held): %s", log_id(run_id_from_trace_id(trace_id)), exc)
                    continue
            else:
                self.counters.add("no_session", len(spans))
            if run is not None:
                joined = self._waiting_logs.take(trace_id, spans) if self._waiting_logs else {}
                planned.append((run, spans, joined))
        count = self._waiting_logs.expire(logs_expired)
        if count:
            self._report.unmatched(count, "they never met their span (not exported, or sent to another collector: "
                                   "route a trace's logs with its spans)")
        return planned

    def _journal_derived(self, planned: list[_Planned]) -> None:
        for run, spans, joined in planned:
            result = SubmitResult()
            self._journal.append(run, spans, joined, result)
            self.counters.add("runs_session_derived")
            logger.info("trace %s named no session within the hold: recorded as session %s",
                        log_id(run.recorder.run_id), log_id(run.recorder.session_id))

    def _reopen(self, trace_id: int, path: Any, now: float) -> OpenRun | None:
        """Reopen the run at ``path`` if a collector on this root sealed it at its stop (``restart``);
        None when it is sealed for good (``_lock`` held)."""
        try:
            run = continued_run(self.writer, path, recorded_by=self.recorded_by, now=now)
        except RunSealedError:
            return None
        except (RunLockedError, UnsafePathError, ValueError, OSError) as exc:
            logger.warning("could not reopen %s (%s): its spans are rejected", log_id(run_id_from_trace_id(trace_id)),
                           kind_of(exc))
            return None
        self._runs[trace_id] = run
        self.counters.add("runs_reopened")
        logger.warning("reopened run %s, sealed interrupted at a collector's stop: a span of it came after the restart",
                       log_id(run.recorder.run_id))
        return run

    def _remember_sealed(self, trace_id: int) -> None:
        self._sealed[trace_id] = None
        while len(self._sealed) > _SEALED_MEMORY:
            self._sealed.popitem(last=False)

    # -- resuming and sealing --------------------------------------------------------------

    def resume_orphans(self, runs: Iterable[RunInfo]) -> int:
        """Reopen runs a previous collector left ``recording`` (crashed; their lock is free).

        Each continues when spans of its trace arrive, and is sealed by the rules of a run that saw
        no restart, its quiet time counted from now: ``seal_after_s`` once its root came, else
        ``seal_rootless_after_s`` (as interrupted) — never left ``recording`` for good. A run another live writer
        holds is left to it. Returns how many runs were resumed.
        """
        resumed = 0
        for info in runs:
            if info.capture_status != CaptureStatus.RECORDING.value or info.recorded_by != self.recorded_by:
                continue  # sealed, or another recorder's (an in-process journal keeps its own seq order)
            try:
                run = continued_run(self.writer, info.path, recorded_by=self.recorded_by, now=self._clock())
            except (RunLockedError, RunSealedError, UnsafePathError, ValueError, OSError) as exc:
                logger.info("left %s as it is: %s", info.path, exc)
                continue
            with self._lock:
                self._runs[uuid.UUID(info.run_id.removeprefix("run-")).int] = run
            resumed += 1
            logger.warning("resumed %s, left recording by a previous process (%d bytes of a torn line cut)",
                           info.path, run.recorder.recovered_torn_bytes)
        return resumed

    def seal_quiet_runs(self) -> int:
        """Seal runs whose root span arrived and that were quiet for ``seal_after_s``; expire held spans.

        A run whose root never arrives (it went to another collector, or its service never
        exported it) is sealed as interrupted once quiet for ``seal_rootless_after_s`` (default an
        hour: a root span ends last, after a run's slowest steps), so it cannot hold its file and
        memory for good.
        """
        now = self._clock()
        with self._lock:
            quiet = [
                trace_id for trace_id, run in self._runs.items()
                if run.quiet(now, self.seal_after_s, self.seal_rootless_after_s)
            ]
            runs = [self._take_for_seal(trace_id) for trace_id in quiet]
            derived = self._expire_waiting(lambda first_seen: now - first_seen >= self.hold_unrouted_s,
                                           lambda first_seen: now - first_seen >= self.hold_logs_s, now)
            joining = [run for run in self._runs.values() if run.joins.has_late]
        self._journal_derived(derived)
        settled_before = now - min(LOG_SETTLE_S, self.seal_after_s / 2)
        for run in joining:
            with run.lock:
                if not run.closed:
                    self._journal.late_logs(run, settled_before=settled_before)
        for run in runs:
            self._seal(run, reason=ROOT_SPAN_MISSING)
        if self.claims is not None:
            self.claims.release(quiet)
        return len(runs)

    def seal_all(self) -> list[RunRecorder]:
        """Seal every open run now: runs whose root arrived as finished, the others as interrupted."""
        with self._lock:
            derived = self._expire_waiting(lambda first_seen: True, lambda first_seen: True, self._clock())
        self._journal_derived(derived)
        with self._lock:
            trace_ids = list(self._runs)
            runs = [self._take_for_seal(trace_id) for trace_id in trace_ids]
        for run in runs:
            self._seal(run, reason=COLLECTOR_STOPPED)
        if self.claims is not None:
            self.claims.release(trace_ids)
        return [run.recorder for run in runs]

    def _take_for_seal(self, trace_id: int) -> OpenRun:
        """Unbind ``trace_id``'s run for its seal (``_lock`` held): later spans of it are rejected."""
        run = self._runs.pop(trace_id)
        self._sealing.append(run.recorder)
        self._remember_sealed(trace_id)
        return run

    def _seal(self, run: OpenRun, *, reason: str) -> None:
        with run.lock:
            run.closed = True
            if run.joins.has_late:
                self._journal.late_logs(run, settled_before=float("inf"))
            status = run.seal(interrupted=not run.root_seen, reason=reason)
        self.counters.add("runs_sealed")
        if logger.isEnabledFor(logging.INFO):  # its arguments cost a bundle more than the check
            logger.info("sealed %s (%s) at %s", log_id(run.recorder.run_id), status, format_timestamp(time.time_ns()))

    @property
    def open_run_count(self) -> int:
        with self._lock:
            return len(self._runs)

