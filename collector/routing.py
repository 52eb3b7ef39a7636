"""Which run a trace's spans belong to, and the spans that wait to be routed (the assembly's routing).

Contract::

    session_of(spans) -> str | None             # the session a trace's spans name, if any
    identity = run_identity(session_id, spans)  # -> RunIdentity: what ``BundleWriter.open_run`` takes
    held = HeldSpans(max_spans, max_bytes)      # spans of traces that named no session yet
    held.hold(trace_id, spans, now) -> bool     # False: over a bound (nothing kept)
    held.take(trace_id) -> spans; held.expire(is_expired) -> [(trace_id, first_seen, spans)]
    held.restore(trace_id, first_seen, spans)   # expired spans that could not be recorded yet
    span_bytes(span) -> int                     # what a held span is counted as

One run is one trace (``run_id`` from the trace id). The session comes from ``session.id``, else
``gen_ai.conversation.id``, else the OpenInference / OpenLLMetry equivalents, on the span or its
resource (``normalize.session_id_of``). A span of a trace already bound to a run joins it even
without a session attribute (one run, many services); the sink keeps that binding.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import NamedTuple

from otel_session.core import semconv as sc
from otel_session.core.journal import RunKind
from otel_session.normalize import SpanView, genai, session_id_of

__all__ = ["HeldSpans", "RunIdentity", "run_identity", "session_of"]


def session_of(spans: list[SpanView]) -> str | None:
    """The first session id any of ``spans`` (or its resource) names."""
    for span in spans:
        session_id = session_id_of(span.attributes, span.resource_attributes)
        if session_id:
            return session_id
    return None


class RunIdentity(NamedTuple):
    """The manifest fields of a run, from the first of its spans to arrive."""

    session_id: str
    run_id: str
    kind: RunKind
    eval_id: str | None
    agent: str | None
    service: str | None
    created_at_ns: int


def run_identity(session_id: str, spans: list[SpanView], agents: genai.RunAgent | None = None) -> RunIdentity:
    """The run of ``spans`` (one trace's): kind and eval from its root span when among them, the
    agent as ``genai.RunAgent`` finds it (``agents``: the run's, which goes on with later spans)."""
    first = min(spans, key=_START_TIME)
    attributes = first.attributes
    for span in spans:
        if span.parent_span_id is None:
            attributes = span.attributes
            break
    eval_id = attributes.get(sc.EVAL_ID)
    is_eval = attributes.get(sc.RUN_KIND) == RunKind.EVAL.value and bool(eval_id)
    return RunIdentity(
        session_id,
        first.run_id,
        RunKind.EVAL if is_eval else RunKind.LIVE,
        str(eval_id) if is_eval else None,
        (agents or genai.RunAgent()).add(spans),
        first.service_name,
        first.start_time_ns,
    )


_START_TIME = attrgetter("start_time_ns")


def span_bytes(span: SpanView) -> int:
    """A span's size as held: its encoded size when it came as OTLP protobuf (``encoded_size``),
    else the text of its attributes and events (what dominates a large span)."""
    encoded = getattr(span, "encoded_size", None)
    if encoded is not None:
        return encoded()
    size = 64 + len(span.name)
    for attributes in (span.attributes, *(event.attributes for event in span.events)):
        size += sum(len(key) + len(value) if isinstance(value, str) else len(key) + 16
                    for key, value in attributes.items())
    return size


class HeldSpans:
    """Spans of traces that named no session yet: trace id → (first seen, spans, bytes); bounded
    by count and by bytes (``span_bytes``)."""

    def __init__(self, max_spans: int, max_bytes: int) -> None:
        self.max_spans = max_spans
        self.max_bytes = max_bytes
        self.count = 0
        self.bytes = 0
        self._by_trace: dict[int, tuple[float, list[SpanView], list[int]]] = {}

    def hold(self, trace_id: int, spans: list[SpanView], now: float) -> bool:
        """Keep ``spans`` until their trace names a session; False (nothing kept) over a bound."""
        if self.count + len(spans) > self.max_spans:
            return False
        size = sum(map(span_bytes, spans))
        if self.bytes + size > self.max_bytes:
            return False
        entry = self._by_trace.setdefault(trace_id, (now, [], [0]))
        entry[1].extend(spans)
        entry[2][0] += size
        self.count += len(spans)
        self.bytes += size
        return True

    def count_of(self, trace_id: int) -> int:
        entry = self._by_trace.get(trace_id)
        return len(entry[1]) if entry is not None else 0

    def take(self, trace_id: int) -> list[SpanView]:
        entry = self._by_trace.pop(trace_id, None)
        if entry is None:
            return []
        self.count -= len(entry[1])
        self.bytes -= entry[2][0]
        return entry[1]

    def restore(self, trace_id: int, first_seen: float, spans: list[SpanView]) -> None:
        """Hold again spans ``expire`` gave that could not be recorded yet (bounds not checked:
        they were within them)."""
        size = sum(map(span_bytes, spans))
        self._by_trace[trace_id] = (first_seen, spans, [size])
        self.count += len(spans)
        self.bytes += size

    def expire(self, is_expired: Callable[[float], bool]) -> list[tuple[int, float, list[SpanView]]]:
        """Take the traces first held at a time ``is_expired``."""
        gone = [(trace_id, first_seen) for trace_id, (first_seen, _, _) in self._by_trace.items() if is_expired(first_seen)]
        return [(trace_id, first_seen, self.take(trace_id)) for trace_id, first_seen in gone]
