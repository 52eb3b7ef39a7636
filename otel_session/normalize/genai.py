"""Mapping of GenAI spans: OTel GenAI conventions, OpenInference, OpenLLMetry (issue 4 fills this in)."""

from __future__ import annotations

from otel_session.normalize import JournalEvent, SpanData


def map_span(span: SpanData) -> list[JournalEvent]:
    return []
