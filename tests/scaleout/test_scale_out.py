"""The scale-out topology as local processes (issue 32): 3 collectors and 2 viewers against one
SeaweedFS (S3) and one PostgreSQL, the trace-id router in front, an app exporting many sessions
with the official OTLP/HTTP exporter.

Every run is sealed by one collector, uploaded (the collectors keep no local copy) and listed
once in the shared catalog; both viewers, on hosts with no bundles, list every run through their
HTTP API and replay a run fetched from the store; ``verify`` holds on it. The same topology as
docker-compose.yml (the gateway there, this router here).
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import orjson
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import set_span_in_context

from otel_session.catalog import RunQuery, SqlCatalog
from otel_session.testing import wait_for

from .conftest import CollectorProcess
from .router import TraceIdRouter

pytestmark = pytest.mark.slow

_SESSIONS = 24


def _app_exports_sessions(endpoint: str) -> None:
    """The app: each session one run (an agent span and a tool span), exported in batches."""
    provider = TracerProvider(resource=Resource.create({"service.name": "scaleout-app"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, timeout=60),
                                                   schedule_delay_millis=50, max_export_batch_size=16))
    tracer = provider.get_tracer("scaleout")
    for n in range(_SESSIONS):
        session = {"session.id": f"scale-{n:03d}"}
        with tracer.start_as_current_span("invoke_agent booking", attributes=session) as root:
            tool = {**session, "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}
            tracer.start_span("execute_tool lookup", context=set_span_in_context(root), attributes=tool).end()
    provider.shutdown()  # flushes: the exporter retried whatever was refused


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=60) as response:
        return orjson.loads(response.read())


def test_three_collectors_two_viewers_one_store_one_catalog(tmp_path: Path, catalog_url, s3, bucket, collectors):
    store_url = f"s3://{bucket}/scaleout-{os.getpid()}-{tmp_path.name}"
    env = {"OTEL_SESSION_CATALOG": catalog_url, "OTEL_SESSION_STORE": store_url, "OTEL_SESSION_REDACTION_KEY": "scaleout"}
    for n in range(3):
        collectors.append(CollectorProcess(tmp_path / f"collector-{n + 1}", env, "--seal-after", "0.2"))
    with TraceIdRouter([collector.url for collector in collectors]) as router:
        _app_exports_sessions(router.endpoint)
    assert {target for target, answers in router.answers.items() if 200 in answers} == {c.url for c in collectors}

    catalog = SqlCatalog(catalog_url)
    try:
        def stored() -> list:
            rows = catalog.page(RunQuery(limit=100, search="scale-")).rows
            return rows if len(rows) == _SESSIONS and all(row.location for row in rows) else []

        wait_for(stored, timeout=180)
        rows = stored()
    finally:
        catalog.close()
    assert len({row.run_id for row in rows}) == _SESSIONS, "a run was listed twice"
    assert len({row.origin for row in rows}) == 3
    for collector in collectors:
        assert not list((collector.root / "sessions").glob("*/run-*")), "a collector kept a local copy"

    viewers = []
    try:
        for n in range(2):
            viewers.append(subprocess.Popen(  # port 0: the viewer binds a free one and says which
                [sys.executable, "-m", "otel_session.cli", "view", "--dir", str(tmp_path / f"viewer-{n + 1}"),
                 "--port", "0"], env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for process in viewers:
            said = process.stdout.readline()  # "otel-session viewer on http://127.0.0.1:PORT/ …", once listening
            assert "otel-session viewer on" in said, process.stderr.read()
            port = int(said.split("http://127.0.0.1:")[1].split("/")[0])
            base = f"http://127.0.0.1:{port}"
            wait_for(lambda: _listening(base) or process.poll() is not None, timeout=120)
            assert process.poll() is None, process.stderr.read()
            listed = _get(f"{base}/api/runs?limit=100")["runs"]
            assert sorted(run["run_id"] for run in listed if run["session_id"].startswith("scale-")) == sorted(
                row.run_id for row in rows)
            row = rows[port % len(rows)]
            events = _get(f"{base}/api/sessions/{row.session_id}/runs/{row.run_id}/events")["events"]
            assert [event["type"] for event in events][-1] == "run_finished"
        fetched = list((tmp_path / "viewer-1" / ".store-cache").rglob("events.ndjson"))
        assert fetched
        verified = subprocess.run([sys.executable, "-m", "otel_session.cli", "verify", str(fetched[0].parent)],
                                  capture_output=True, text=True, timeout=300)
        assert verified.returncode == 0, verified.stdout + verified.stderr
    finally:
        for process in viewers:
            process.terminate()
            process.wait(60)


def _listening(base: str) -> bool:
    try:
        _get(f"{base}/api/runs?limit=1")
    except OSError:
        return False
    return True
