"""PII canaries in every part of a span with span records on: names, every attribute value type,
keys, JSON text, event and link attributes, the status, the resource. None reaches a bundle, in
process or through the collector, nor the viewer's answers about it (events, page, exported HTML)."""

from __future__ import annotations

import base64
import io
import json
import tarfile
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Link, SpanContext, Status, StatusCode, TraceFlags

import otel_session
from otel_session.bundle.read import find_bundles, read_bundle
from otel_session.testing import capture_bundle, running_collectors, wait_for
from otel_session.viewer import create_app
from otel_session.viewer.export import export_html

EMAIL = "zq.span.canary@canary-mail.example"
PHONE = "+44 20 7946 0177"
CARD = "4532 0151 1283 0366"  # Luhn-valid test number
CARD_NUMBER = 4532015112830366
PHONE_NUMBER = 442079460177.0
CANARIES = [EMAIL, PHONE, CARD, CARD.replace(" ", ""), "7946 0177", "442079460177", "zq.span.canary", "1283 0366"]
SESSION = "span-canaries"


def _pii(label: str) -> str:
    return f"{label}: mail {EMAIL}, call {PHONE}, card {CARD}"


def _provider() -> TracerProvider:
    return TracerProvider(resource=Resource.create({
        "service.name": "span-canary-svc", "user.email": EMAIL, "host.owner": _pii("resource"),
        "deployment.phone": PHONE_NUMBER, "card.numbers": [CARD_NUMBER],
    }))


def _hostile_spans(provider: TracerProvider) -> None:
    tracer = provider.get_tracer(f"lib {EMAIL}", f"1.0 {PHONE}")
    with otel_session.session(SESSION), otel_session.run(agent="canary"):
        with otel_session.turn(0, state="collect", required_slots=["contact"]) as turn:
            linked = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(1))
            with tracer.start_as_current_span(f"lookup {EMAIL}", links=[Link(linked, {"link.note": _pii("link")})],
                                              attributes={
                "text": _pii("str"), "card": CARD_NUMBER, "phone": PHONE_NUMBER, "flag": True,
                "emails": [EMAIL, _pii("array")], "cards": [CARD_NUMBER, 1], "phones": [PHONE_NUMBER],
                "json": json.dumps({"contact": {"email": EMAIL, "cards": [CARD], "nested": [{"phone": PHONE}]}}),
                f"by.{EMAIL}": "key holds it", "user.id": EMAIL, "gen_ai.tool.call.arguments": json.dumps({"to": EMAIL}),
            }) as span:
                span.add_event(f"called {PHONE}", {"who": _pii("event"), "n": CARD_NUMBER, "list": [EMAIL]})
                try:
                    raise ValueError(_pii("exception"))
                except ValueError as error:
                    span.record_exception(error)
                span.set_status(Status(StatusCode.ERROR, _pii("status")))
            turn.finish(state="collect")


def _assert_clean(blob: bytes | str, where: str) -> None:
    data = blob.encode() if isinstance(blob, str) else blob
    for canary in CANARIES:
        assert canary.encode() not in data, f"{canary!r} found in {where}"


def _assert_root_clean(root: Path) -> None:
    files = [path for path in root.rglob("*") if path.is_file()]
    assert files
    for path in files:
        _assert_clean(path.read_bytes(), str(path))


def _assert_viewer_clean(root: Path) -> None:
    (path,) = find_bundles([root])
    bundle = read_bundle(path)
    spans = [record for record in bundle.events if record["type"] == "span"]
    assert len(spans) == 3, [record["payload"]["name"] for record in spans]
    lookup = next(record["payload"] for record in spans if record["payload"]["name"].startswith("lookup"))
    assert lookup["attributes"]["flag"] is True and lookup["attributes"]["cards"][1] == 1  # kept where nothing is personal
    assert {event["name"].split(" ")[0] for event in lookup["events"]} == {"called", "exception"}
    assert lookup["links"][0]["attributes"] and lookup["resource"]["service.name"] == "span-canary-svc"
    client = create_app({"BUNDLE_DIR": str(root), "TESTING": True}).test_client()
    run_id = bundle.manifest["run_id"]
    for url in (f"/api/sessions/{SESSION}/runs/{run_id}/events?limit=1000", f"/api/sessions/{SESSION}/runs",
                f"/api/sessions/{SESSION}/facts", f"/sessions/{SESSION}/runs/{run_id}"):
        answer = client.get(url)
        assert answer.status_code == 200, url
        _assert_clean(answer.data, url)
    exported = export_html(root, SESSION, run_id)
    _assert_clean(exported, "the exported page")
    embedded = exported.split('id="embedded-bundle"', 1)[1].split(">", 1)[1].split("<", 1)[0].strip()
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(embedded))) as archive:
        for member in archive.getmembers():
            if member.isfile():
                _assert_clean(archive.extractfile(member).read(), f"the exported bundle's {member.name}")


@pytest.fixture
def span_records_on(monkeypatch):
    monkeypatch.setenv("OTEL_SESSION_SPAN_RECORDS", "on")


def test_no_canary_of_a_span_reaches_an_in_process_bundle_or_the_viewer(span_records_on, tmp_path):
    root = tmp_path / "root"
    provider = _provider()
    with capture_bundle(root, tracer_provider=provider):
        _hostile_spans(provider)
    _assert_root_clean(root)
    _assert_viewer_clean(root)


def test_no_canary_of_a_span_reaches_a_collected_bundle_or_the_viewer(span_records_on, tmp_path):
    root = tmp_path / "collected"
    with running_collectors(grpc_address=None, http_address="127.0.0.1:0", seal_after_s=0.2, span_records=True) as make:
        collector = make(root)
        provider = _provider()
        provider.add_span_processor(SimpleSpanProcessor(
            OTLPSpanExporter(endpoint=f"http://127.0.0.1:{collector.http_port}/v1/traces")))
        with capture_bundle(tmp_path / "in-process", tracer_provider=provider):
            _hostile_spans(provider)
        wait_for(lambda: [path for path in find_bundles([root]) if read_bundle(path).capture.get("status") == "complete"],
                 60)
    _assert_root_clean(root)
    _assert_viewer_clean(root)
