"""Spans → a run's journal: the assembly's journaling, each span once (``run.lock`` held).

Contract::

    journal = SpanJournal(writer, redactor, counters, report, clock, span_records=False)
    journal.append(run, spans, log_events, result)   # one trace's spans of one request, retries answered once
    journal.late_logs(run, settled_before=...)       # log events that came after their span, once settled

A span is normalized once, with the log events that waited for it, in end order, then redacted and
appended in event-time order (``OpenRun.journal``); with ``span_records``, its ``span`` record
(``normalize.span_record``) comes with its other records. A span the run journaled already (an exporter's
retry, or one a resumed run reads back whole) is accepted, not journaled again. The agent a later
span names is written into ``run.json`` (``BundleWriter.name_agent``).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter

from otel_session.bundle.write import BundleWriter
from otel_session.collector.counters import Counters, RejectReason, Reporter, SubmitResult
from otel_session.collector.sealing import EventRedactor, OpenRun
from otel_session.core.log import get_logger, log_id
from otel_session.normalize import SpanEventData, SpanView, normalize_span
from otel_session.normalize.span_record import span_record

__all__ = ["SpanJournal"]

logger = get_logger(__name__)


class SpanJournal:
    """Journals spans into their open runs (see the module docstring)."""

    def __init__(
        self, writer: BundleWriter, redactor: EventRedactor, counters: Counters, report: Reporter,
        clock: Callable[[], float], *, span_records: bool = False,
    ) -> None:
        self.writer = writer
        self.span_records = span_records
        self.redactor = redactor
        self.counters = counters
        self._report = report
        self._clock = clock

    def append(
        self, run: OpenRun, spans: list[SpanView], log_events: dict[int, list[SpanEventData]], result: SubmitResult
    ) -> None:
        """Journal ``spans`` (one trace's, of one request), each with the log events that waited for
        it; a span the run has journaled already (an exporter's retry) is accepted, not journaled again."""
        # End order, as the app's SDK exported them: OTLP regroups a request's spans by scope, and a
        # mapping may join a span to the children that ended before it.
        spans.sort(key=attrgetter("end_time_ns"))
        with run.lock:
            journaled = run.journaled_spans
            on_disk = run.resumed_records
            fresh: dict[str, SpanView] = {}
            repeats = 0
            for span in spans:
                span_hex = span.span_id_hex
                if span_hex in journaled or span_hex in fresh:
                    repeats += 1
                elif on_disk and span_hex in on_disk and len(normalize_span(span)) <= on_disk[span_hex]:
                    journaled.add(span_hex)  # whole in the journal a resumed run read back: a retry
                    repeats += 1
                else:
                    fresh[span_hex] = span
            if repeats and log_events:
                self._drop_repeats_log_events(run, spans, fresh, log_events)
            if fresh:
                failure = self._journal_fresh(run, fresh, log_events)
                if failure is not None:  # the request's repeats are answered with their first copies
                    self._report.reject(result, len(spans), RejectReason.CAPTURE_STOPPED, f"run {run.recorder.run_id}: {failure}")
                    if log_events:  # taken with their spans: not bundled either
                        self._report.unmatched(sum(map(len, log_events.values())), f"run {run.recorder.run_id}: {failure}")
                    return
                journaled.update(fresh)
            # Answered once the run's records so far are written (a repeat's first copy may be
            # queued still: the retry of a request whose answer timed out), rejected with them.
            result.appended.append((run.recorder, run.recorder.enqueued_seq, len(fresh), repeats))
        result.accepted += len(fresh) + repeats
        self.counters.add("bundled", len(fresh))
        if repeats:
            self.counters.add("duplicate_spans", repeats)
        if log_events:
            self.counters.add("log_events_bundled", sum(len(events) for events in log_events.values()))

    def _journal_fresh(
        self, run: OpenRun, fresh: dict[str, SpanView], log_events: dict[int, list[SpanEventData]]
    ) -> str | None:
        """Normalize and journal spans new to ``run`` (``run.lock`` held); why its capture refused
        them, if it did."""
        agents = run.agents
        if agents is not None and not agents.settled:
            agent = agents.add(fresh.values())
            if agent is not None and agent != run.agent:
                self._name_agent(run, agent)
        parents = run.tree.parents
        for span_hex, span in fresh.items():
            parent = span.parent_span_id
            parents[span_hex] = f"{parent:016x}" if parent is not None else None
            if parent is None:
                run.root_seen = True
                run.root_status = "error" if span.status_code == "error" else "ok"
        now = self._clock()
        normalize = run.joins.normalize
        normalized = [
            (span_hex, normalize(span, span_hex, log_events.get(span.span_id) if log_events else None, now))
            for span_hex, span in fresh.items()
        ]
        if self.span_records:
            for (_, events), span in zip(normalized, fresh.values()):
                events.append(span_record(span, events))
        failure = run.journal(run.tree.order(normalized), self.redactor)
        if failure is None:
            run.last_activity = now
        return failure

    def _drop_repeats_log_events(
        self, run: OpenRun, spans: list[SpanView], fresh: dict[str, SpanView], log_events: dict[int, list[SpanEventData]]
    ) -> None:
        """Log events that waited for a span ``run`` journaled before have no record to join any
        more: counted unmatched, never dropped silently (a span repeated within the request keeps
        them for its first copy)."""
        waited = sum(len(log_events.pop(span.span_id, ())) for span in spans if span.span_id_hex not in fresh)
        if waited:
            self._report.unmatched(waited, f"their span was journaled already in run {run.recorder.run_id} (a retried export)")

    def _name_agent(self, run: OpenRun, agent: str) -> None:
        """Give ``run``'s ``run.json`` the agent a span that came after its open named (``run.lock``
        held); a failure is logged, and the run records on without it."""
        run.agent = agent
        try:
            self.writer.name_agent(run.recorder, agent)
        except (OSError, ValueError) as exc:
            logger.warning("could not name the agent of run %s in its run.json: %s", log_id(run.recorder.run_id), exc)

    def late_logs(self, run: OpenRun, *, settled_before: float) -> None:
        """Journal the messages of log events that came after their span and were quiet since
        ``settled_before`` (``run.lock`` held)."""
        fresh_by_span, count = run.joins.settled(settled_before)
        if not count:
            return
        events = run.tree.order(fresh_by_span)
        failure = run.journal(events, self.redactor) if events else None
        if failure is not None:
            self._report.unmatched(count, f"run {run.recorder.run_id}: {failure}")
        else:
            self.counters.add("log_events_bundled", count)
