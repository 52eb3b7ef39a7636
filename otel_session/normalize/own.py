"""Mapping of this project's own ``otel_session.*`` spans and span events (issue 3 fills this in)."""

from __future__ import annotations

from otel_session.normalize import JournalEvent, SpanData

SCOPE_NAME = "otel_session"


def is_own_span(span: SpanData) -> bool:
    return span.scope_name == SCOPE_NAME


def map_span(span: SpanData) -> list[JournalEvent]:
    return []
