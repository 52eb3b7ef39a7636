"""Fixtures: an in-memory span exporter on a fresh provider, and a configured recorder per test."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_session
from otel_session.instrument._log import forget_warnings


@pytest.fixture(autouse=True)
def _reset_recording():
    """No recorder or once-only warning leaks from one test into the next."""
    forget_warnings()
    yield
    recorder = otel_session.current_recorder()
    if recorder is not None:
        recorder.shutdown()


@pytest.fixture
def exporter():
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter):
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    return tracer_provider


@pytest.fixture
def recorder(tmp_path, provider):
    recorder = otel_session.configure(tmp_path, otel_session.RedactionPolicy(keep_slots={"party_size"}), provider)
    yield recorder
    recorder.shutdown()


def spans_by_name(exporter):
    return {span.name: span for span in exporter.get_finished_spans()}
