"""One writer per run across collectors: run claims in a shared PostgreSQL catalog, with leases.

Two real collector processes share one catalog, behind the trace-id router; spans come from the
official OTLP/HTTP exporter, whose own retry is what lands a refused request. A run's spans that
reach the collector not holding it are refused retryably (503 + Retry-After) and land at its
holder once the ring moves back; after a kill -9 of the holder, the other collector takes the run
over once the lease (short here: ``--claim-lease``) ran out. Exactly one bundle of the run is in
the catalog, also after the killed collector came back.
"""

from __future__ import annotations

import threading
from pathlib import Path

import orjson
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from opentelemetry.trace import NonRecordingSpan, set_span_in_context

from otel_session.bundle.read import iter_runs, read_bundle
from otel_session.catalog import RunQuery, SqlCatalog
from otel_session.core.journal import run_id_from_trace_id
from otel_session.testing import wait_for

from .conftest import CollectorProcess
from .router import TraceIdRouter

pytestmark = pytest.mark.slow


def _journaled_span_ids(root: Path, run_id: str) -> set[str]:
    return {record.get("span_id") for run in iter_runs(root) if run.run_id == run_id
            for record in read_bundle(run.path).events}


def _export_until_taken(exporter: OTLPSpanExporter, spans: list) -> None:
    """The app's side: the exporter retries a refused request itself; an app that gave up would
    lose the spans, so the test sends them again until one export succeeds."""
    wait_for(lambda: exporter.export(spans) is SpanExportResult.SUCCESS, timeout=120)


def test_spans_of_a_run_held_elsewhere_are_refused_retryably_and_taken_over_after_a_kill(tmp_path: Path, catalog_url, collectors):
    env = {"OTEL_SESSION_CATALOG": catalog_url, "OTEL_SESSION_REDACTION_KEY": "claims-test"}
    args = ("--seal-after", "0.2", "--claim-lease", "2")
    a = CollectorProcess(tmp_path / "a", env, *args)
    collectors.append(a)
    b = CollectorProcess(tmp_path / "b", env, *args)
    collectors.append(b)
    finished = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(finished))
    tracer = provider.get_tracer("claims-test")
    session = {"session.id": "claimed-call"}
    with TraceIdRouter([a.url]) as router:
        exporter = OTLPSpanExporter(endpoint=router.endpoint, timeout=60)
        root = tracer.start_span("invoke_agent booking", attributes=session)
        run_id = run_id_from_trace_id(root.get_span_context().trace_id)
        context = set_span_in_context(NonRecordingSpan(root.get_span_context()))

        def child(name: str):
            tool = {**session, "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
            tracer.start_span(f"execute_tool {name}", context=context, attributes=tool).end()
            return finished.get_finished_spans()[-1]

        assert exporter.export([child("step one")]) is SpanExportResult.SUCCESS
        wait_for(lambda: any(run.run_id == run_id for run in iter_runs(a.root)), timeout=60)

        router.ring = [b.url]  # the ring moves: B is asked, and A holds the run
        second = child("step two")
        outcome: list[SpanExportResult] = []
        exporting = threading.Thread(target=lambda: outcome.append(exporter.export([second])))
        exporting.start()
        wait_for(lambda: router.refused_by(b.url) >= 1, timeout=60)
        router.ring = [a.url]  # and moves back: the exporter's retry lands at A
        exporting.join(120)
        assert outcome == [SpanExportResult.SUCCESS]
        assert b.counter("refused_claimed") >= 1
        assert f"{second.context.span_id:016x}" in _journaled_span_ids(a.root, run_id)
        assert not list(iter_runs(b.root)), "B wrote a second bundle of A's run"

        a.kill()  # kill -9: A's lease runs out, nobody renews it
        router.ring = [b.url]
        third = child("step three")
        root.end()
        _export_until_taken(exporter, [third, finished.get_finished_spans()[-1]])
        wait_for(lambda: [run.capture_status for run in iter_runs(b.root) if run.run_id == run_id] == ["complete"],
                 timeout=60)
    assert b.counter("runs_taken_over") == 1
    assert f"{third.context.span_id:016x}" in _journaled_span_ids(b.root, run_id)
    catalog = SqlCatalog(catalog_url)
    try:
        wait_for(lambda: [row.capture_status for row in catalog.page(RunQuery(limit=50)).rows if row.run_id == run_id]
                 == ["complete"], timeout=60)
        rows = [row for row in catalog.page(RunQuery(limit=50)).rows if row.run_id == run_id]
        assert len(rows) == 1, orjson.dumps([row.origin for row in rows]).decode()
        assert rows[0].origin.endswith(str((tmp_path / "b").resolve()))
        # A comes back on its root: its part of the run, left recording at the kill, is the new
        # owner's run now: set aside, never resumed, listed or uploaded.
        restarted = CollectorProcess(a.root, env, *args)
        collectors.append(restarted)
        assert not [run for run in iter_runs(a.root) if run.run_id == run_id]
        assert list((a.root / ".taken-over").rglob(f"{run_id}/events.ndjson"))
        restarted.stop()
        assert [row.origin for row in catalog.page(RunQuery(limit=50)).rows if row.run_id == run_id] == [rows[0].origin]
    finally:
        catalog.close()
