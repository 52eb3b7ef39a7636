"""Tags and metadata the app set (``otel_session.tags``, ``otel_session.metadata.*``, the resource's
``service.version`` and ``deployment.environment``): on the run's ``run_started``, in the catalog's
rows, as list columns and filters (``?tag=``, ``?meta.KEY=``), redacted; in-process and through the
collector."""

from __future__ import annotations

from pathlib import Path

import pytest

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import otel_session
from otel_session.core import semconv as sc
from otel_session.redact import RedactionPolicy, Redactor
from otel_session.testing import bundles, capture_bundle, running_collectors, wait_for
from otel_session.viewer import create_app

CANARY = "zed.canary@example.org"
RESOURCE = {"service.name": "booking-svc", "service.version": "1.4.2", "deployment.environment": "prod",
            sc.RUN_TAGS: ["fleet-a"]}


def _record_in_process(root: Path) -> None:
    provider = TracerProvider(resource=Resource.create(RESOURCE))
    with capture_bundle(root, tracer_provider=provider):
        with otel_session.session("tagged"), otel_session.run(agent="booking", attributes={
                sc.RUN_TAGS: ["vip", "beta", CANARY], "otel_session.metadata.customer": "acme",
                "otel_session.metadata.tier": 3}):
            pass
        with otel_session.session("plain"), otel_session.run(agent="booking"):
            pass


def _runs(client, query: str = "") -> dict[str, dict]:
    answer = client.get(f"/api/runs?{query}")
    assert answer.status_code == 200, answer.get_json()
    return {run["session_id"]: run for run in answer.get_json()["runs"]}


def _check(root: Path, *, tags: list[str], metadata: dict[str, str]) -> None:
    app = create_app({"BUNDLE_DIR": str(root), "TESTING": True})
    client = app.test_client()
    runs = _runs(client)
    assert runs["tagged"]["tags"] == tags
    assert runs["tagged"]["metadata"] == metadata
    assert runs["plain"]["tags"] == ["fleet-a"] and runs["plain"]["metadata"] == {
        "deployment.environment": "prod", "service.version": "1.4.2"}  # the resource labels every run
    assert set(_runs(client, "tag=vip")) == {"tagged"}
    assert set(_runs(client, "tag=vip&tag=beta")) == {"tagged"}
    assert set(_runs(client, "tag=fleet-a")) == {"tagged", "plain"}
    assert _runs(client, "tag=vi") == {} and _runs(client, "tag=vip&tag=gamma") == {}
    assert set(_runs(client, "meta.customer=acme")) == {"tagged"}
    assert set(_runs(client, "meta.deployment.environment=prod&sort=session_id&order=asc&limit=1")) == {"plain"}
    assert _runs(client, "meta.customer=acm") == {} and _runs(client, "meta.tier=4") == {}
    sessions = client.get("/api/sessions?tag=vip").get_json()["sessions"]
    assert [group["session_id"] for group in sessions] == ["tagged"]
    answers = client.get("/api/runs").data + client.get("/api/sessions").data
    app.extensions["otel_session_listing"].close()
    assert CANARY.encode() not in answers
    for path in root.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path  # the bundles and the catalog


def test_tags_and_metadata_set_in_process_are_columns_and_filters(tmp_path):
    _record_in_process(tmp_path / "root")
    _check(tmp_path / "root", tags=["[email]", "beta", "fleet-a", "vip"],
           metadata={"customer": "acme", "deployment.environment": "prod", "service.version": "1.4.2", "tier": "3"})


def test_tags_and_metadata_sent_to_the_collector_are_columns_and_filters(tmp_path):
    root = tmp_path / "root"
    with running_collectors(grpc_address="127.0.0.1:0", http_address="127.0.0.1:0", seal_after_s=0.2,
                            redactor=Redactor(RedactionPolicy(), key=b"labels")) as make:
        collector = make(root)
        provider = TracerProvider(resource=Resource.create(RESOURCE))
        provider.add_span_processor(SimpleSpanProcessor(
            OTLPSpanExporter(endpoint=f"http://127.0.0.1:{collector.http_port}/v1/traces")))
        tracer = provider.get_tracer("app")
        with tracer.start_as_current_span("invoke_agent booking", attributes={
                sc.SESSION_ID: "tagged", sc.AGENT_NAME: "booking", sc.OPERATION_NAME: "invoke_agent",
                sc.RUN_TAGS: ["vip", "beta", CANARY], "otel_session.metadata.customer": "acme"}):
            pass
        with tracer.start_as_current_span("invoke_agent booking", attributes={
                sc.SESSION_ID: "plain", sc.AGENT_NAME: "booking", sc.OPERATION_NAME: "invoke_agent"}):
            pass
        provider.shutdown()
        wait_for(lambda: len([read for read in bundles(root) if read.status.value == "complete"]) == 2)
    _check(root, tags=["[email]", "beta", "fleet-a", "vip"],
           metadata={"customer": "acme", "deployment.environment": "prod", "service.version": "1.4.2"})


@pytest.mark.browser
def test_the_lists_show_labels_and_filter_by_a_clicked_one(page, serve, tmp_path):
    _record_in_process(tmp_path / "root")
    server = serve(tmp_path / "root")
    page.goto(server.url + "/")
    page.wait_for_selector("body[data-ready=true]")
    assert page.locator("#sessions tbody tr").count() == 2
    tagged = page.locator("#sessions tbody tr", has_text="tagged")
    assert tagged.locator("td.labels .chip-tag").all_inner_texts() == ["[email]", "beta", "fleet-a", "vip"]
    assert "customer=acme" in tagged.locator("td.labels .chip-meta").all_inner_texts()
    version = tagged.locator("td.labels .chip-meta", has_text="version=1.4.2")  # a dotted key by its last part
    assert version.inner_text() == "version=1.4.2" and version.get_attribute("title").startswith("service.version=1.4.2")
    tagged.locator("td.labels .chip-tag", has_text="vip").click()
    page.wait_for_function("() => document.querySelectorAll('#sessions tbody tr').length === 1")
    assert "tag=vip" in page.url and page.input_value("input[name=tag]") == "vip"
    page.fill("input[name=tag]", "")
    page.fill("input[name=meta]", "service.version=1.4.2")
    page.wait_for_function("() => document.querySelectorAll('#sessions tbody tr').length === 2")
    assert "meta.service.version=1.4.2" in page.url
    page.fill("input[name=meta]", "customer=acme")
    page.wait_for_function("() => document.querySelectorAll('#sessions tbody tr').length === 1")
    page.goto(server.url + "/sessions/tagged")
    page.wait_for_selector("body[data-ready=true]")
    page.locator("#runs td.labels .chip-meta", has_text="tier=3").click()
    page.wait_for_selector("body[data-ready=true]")
    assert page.locator("#sessions tbody tr").count() == 1 and "meta.tier=3" in page.url
    assert page.errors == []
