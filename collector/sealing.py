"""A run the collector is assembling: journaling its records, and sealing it (the assembly's seal).

Contract::

    run = OpenRun(recorder, clock)               # one per open trace; ``run.lock`` guards the rest
    failure = run.journal(events, redactor)      # redact + append, in the given order; None or why refused
    run.quiet(now, seal_after_s, seal_rootless_after_s) -> bool
    run.seal(interrupted=..., reason=...)        # finish (``run_finished`` if its root never said) and close

A run is sealed once its root span arrived and it was quiet for ``seal_after_s``; one whose root
never arrives (another collector got it, or its service never exported it) once quiet for
``seal_rootless_after_s``, as interrupted (``ROOT_SPAN_MISSING``); every run still open at
shutdown (``COLLECTOR_STOPPED``). A run appended by more than one request may be out of event-time
order on disk: its seal has the writer rewrite the journal in ``ordering.event_order_key`` order
(``seq`` renumbered, ``capture.json`` ``"resequenced": true``; a journal already in that order is
left alone) and marks ``capture.json`` ``"order": "event_time"``.
"""

from __future__ import annotations

import threading
import time
from operator import attrgetter
from typing import Any, Protocol

from otel_session.collector.logjoin import LogJoins
from otel_session.collector.ordering import SpanTree, event_order_key
from otel_session.core.journal import EventType, parse_timestamp
from otel_session.core.log import get_logger, log_id
from otel_session.normalize import JournalEvent
from otel_session.normalize.genai import RunAgent
from otel_session.normalize.genai_repeats import HeldMessages
from otel_session.normalize.toollink import ToolCallLinker
from otel_session.bundle.write import RunRecorder

__all__ = ["COLLECTOR_STOPPED", "ROOT_SPAN_MISSING", "EventRedactor", "OpenRun", "latest_at_ns"]

logger = get_logger(__name__)

# `run_finished` `reason` of a run the collector ends as interrupted (its root span never came):
ROOT_SPAN_MISSING = "root_span_missing"  # quiet for --seal-rootless-after
COLLECTOR_STOPPED = "collector_stopped"  # still open at shutdown
_RUN_FINISHED = EventType.RUN_FINISHED.value
_AT_NS = attrgetter("at_ns")
_TYPE = attrgetter("type")
ORDER = {"order": "event_time"}
"""What a sealed collector run's ``capture.json`` says of its journal's order."""
REOPENABLE = {**ORDER, "reopenable": True}
"""… and of a run it ended ``interrupted`` at its stop: a span of it after a restart reopens it."""


class EventRedactor(Protocol):
    """What the collector needs from ``otel_session.redact.Redactor``."""

    def redact_events(self, events: list[JournalEvent]) -> list[JournalEvent]: ...

    def text(self, value: str) -> str: ...


class OpenRun:
    """The state of one run between its first span and its seal."""

    __slots__ = (
        "agent", "agents", "batches", "closed", "finished", "joins", "journaled_spans", "last_activity", "latest_ns",
        "lock", "recorder", "resumed", "resumed_records", "root_seen", "root_status", "session_derived", "tool_links",
        "tree",
    )

    def __init__(
        self, recorder: RunRecorder, now: float, *, resumed: bool = False, latest_ns: int = 0,
        agents: RunAgent | None = None, agent: str | None = None,
    ) -> None:
        self.recorder = recorder
        self.lock = threading.Lock()
        self.closed = False
        """Sealed (under ``lock``): nothing more joins it."""
        self.joins = LogJoins()
        self.tree = SpanTree()
        self.root_seen = False
        self.root_status = "ok"
        self.finished = False
        self.batches = 0
        """Requests appended; a run written by one request is already in event-time order."""
        self.last_activity = now
        self.latest_ns = latest_ns
        """The latest event time journaled: a run finished here is never stamped before it."""
        self.resumed = resumed
        """Left ``recording`` by a previous process (its journal is read back, not in event-time order)."""
        self.tool_links = ToolCallLinker()
        self.agents = agents
        """The run's agent as its spans tell it (``genai.RunAgent``); None: not learnt here (a run
        resumed with its agent named)."""
        self.agent = agent
        """The agent its ``run.json`` was given (as the spans name it, before the id mapping)."""
        self.session_derived = False
        """Opened as a session of its own (its trace named none in time), until a later span names one."""
        self.journaled_spans: set[str] = set()
        """The ids (hex) of the spans journaled (under ``lock``): a retried export's are not journaled again."""
        self.resumed_records: dict[str, int] = {}
        """Resumed: how many records the journal read back holds of each span. A retried span is
        whole there when its records are all there (a kill may have cut some with the torn tail:
        then it is journaled whole again, at least once)."""

    def quiet(self, now: float, seal_after_s: float, seal_rootless_after_s: float) -> bool:
        """Whether the run is due its seal at ``now``: by the same rules whether or not it was resumed
        after a restart (its quiet time counts from the resume)."""
        limit = seal_after_s if self.root_seen else seal_rootless_after_s
        return now - self.last_activity >= limit

    def journal(self, events: list[JournalEvent], redactor: EventRedactor) -> str | None:
        """Link tool executions to the calls they answer, redact and append ``events`` in their order
        (``lock`` held); why the capture refused them, if it did."""
        self.tool_links.link(events)  # tool spans without a call id answer the model's call
        redacted = redactor.redact_events(events)  # fresh events: in place
        redacted = HeldMessages.of(self.recorder).without_repeats(redacted)  # inputs the API's records hold
        recorder = self.recorder
        accepted = recorder.append_events(redacted)
        if accepted:
            journaled = redacted if accepted == len(redacted) else redacted[:accepted]
            latest = max(map(_AT_NS, journaled))  # in C: a generator cost a Python frame step an event
            if latest > self.latest_ns:
                self.latest_ns = latest
            if not self.finished:
                self.finished = _RUN_FINISHED in map(_TYPE, journaled)
        if accepted < len(redacted):
            failure = recorder.failure
            return f"{failure.code.value}: {failure.message}" if failure is not None else "the capture is closed"
        self.batches += 1
        return None

    def seal(self, *, interrupted: bool, reason: str) -> str:
        """Close the run (``lock`` held, ``closed`` set): one its root span did not finish gets a
        ``run_finished`` here, with ``reason`` when ``interrupted``. Returns the status it ended with."""
        if self.finished:
            status = "finished"
        else:
            status = "interrupted" if interrupted else self.root_status
            payload = {"status": status, "reason": reason} if interrupted else {"status": status}
            # Stamped after the run's last event (journal times are µs), so the event-time order
            # keeps it last even when the services' clocks run ahead of this one.
            at_ns = max(time.time_ns(), self.latest_ns + 1000)
            self.recorder.append(EventType.RUN_FINISHED, payload, at_ns=at_ns)
            if interrupted and reason == ROOT_SPAN_MISSING:
                logger.warning(
                    "run %s sealed without its root span: its service never exported it, or it went to "
                    "another collector (route every span of a trace to one collector)", log_id(self.recorder.run_id),
                )
        # Appended by one request, root included, in the same key's order (and not resumed from an
        # earlier process): already in event-time order, nothing to read back.
        in_order = self.finished and self.batches == 1 and not self.resumed
        # Ended here because the collector stops: a later collector may reopen it (``restart``).
        extras = REOPENABLE if interrupted and reason == COLLECTOR_STOPPED and not self.finished else ORDER
        self.recorder.close(reorder=None if in_order else event_order_key(self.tree.depth_of), capture_extras=extras)
        return status


def latest_at_ns(records: list[dict[str, Any]]) -> int:
    """The latest ``at`` of decoded journal records, in nanoseconds since the epoch (0 if none)."""
    return max((parse_timestamp(record.get("at")) or 0 for record in records), default=0)
