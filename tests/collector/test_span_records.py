"""``span`` records through the collector (``--span-records``): the same spans make the same records
as in process; off by default."""

from __future__ import annotations

from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

import otel_session
from otel_session.collector.cli import collect
from otel_session.collector.options import CollectorOptions
from otel_session.testing import capture_bundle

from .conftest import sealed_bundles


def _app(tracer) -> None:
    with otel_session.session("span-records"), otel_session.run(agent="booking"):
        with otel_session.turn(0, state="ask", required_slots=["date"]) as turn:
            with otel_session.message("user") as message:
                message.text("a table for two")
            otel_session.guard("has_date", passed=False)
            linked = SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(1))
            with tracer.start_as_current_span("GET /slots", kind=SpanKind.CLIENT, links=[Link(linked, {"why": "retry"})],
                                              attributes={"http.request.method": "GET", "retries": 2, "ok": True,
                                                          "ratio": 0.5, "tags": ["a", "b"]}) as span:
                span.add_event("cache miss", {"cache.key": "slots"})
                with tracer.start_as_current_span("dns") as child:
                    child.set_status(Status(StatusCode.ERROR, "no answer"))
            turn.finish(state="done")


def _spans_by_id(bundle) -> dict[str, dict]:
    return {record["span_id"]: record for record in bundle.events if record["type"] == "span"}


def test_the_collector_writes_the_span_records_the_app_writes_in_process(monkeypatch, make_collector, tmp_path):
    monkeypatch.setenv("OTEL_SESSION_SPAN_RECORDS", "on")
    collector = make_collector(tmp_path / "collected", span_records=True)
    with capture_bundle(tmp_path / "in-process") as captured:
        provider = captured.recorder.tracer_provider
        provider.add_span_processor(SimpleSpanProcessor(
            OTLPSpanExporter(endpoint=f"http://127.0.0.1:{collector.http_port}/v1/traces")))
        _app(provider.get_tracer("my.http.lib", "2.3.4"))
    (collected,) = sealed_bundles(tmp_path / "collected")
    in_process, through_collector = _spans_by_id(captured.bundle), _spans_by_id(collected)
    assert len(in_process) == 5 and set(in_process) == set(through_collector)
    for span_id, record in in_process.items():
        other = through_collector[span_id]
        assert other["payload"] == record["payload"], record["payload"]["name"]
        assert (other["at"], other.get("turn_index"), other["trace_id"]) == (record["at"], record.get("turn_index"), record["trace_id"])
    get = next(record["payload"] for record in in_process.values() if record["payload"]["name"] == "GET /slots")
    assert get["attributes"] == {"http.request.method": "GET", "retries": 2, "ok": True, "ratio": 0.5, "tags": ["a", "b"],
                                 **{key: value for key, value in get["attributes"].items()
                                    if key.startswith(("session.", "gen_ai.", "otel_session."))}}
    for bundle in (captured.bundle, collected):  # each span's record follows its other records
        for span_id in in_process:
            seqs = [record["seq"] for record in bundle.events if record.get("span_id") == span_id]
            assert bundle.events[max(seqs) - 1]["type"] == "span"


def test_the_collector_writes_none_by_default(monkeypatch, make_collector, tmp_path):
    monkeypatch.delenv("OTEL_SESSION_SPAN_RECORDS", raising=False)
    assert CollectorOptions().span_records is False
    collector = make_collector(tmp_path / "collected")
    with capture_bundle(tmp_path / "in-process") as captured:
        provider = captured.recorder.tracer_provider
        provider.add_span_processor(SimpleSpanProcessor(
            OTLPSpanExporter(endpoint=f"http://127.0.0.1:{collector.http_port}/v1/traces")))
        _app(provider.get_tracer("lib"))
    (collected,) = sealed_bundles(tmp_path / "collected")
    assert not [record for record in collected.events if record["type"] == "span"]
    assert not captured.events("span")


def test_the_flag_and_the_variable_turn_them_on(monkeypatch):
    monkeypatch.setenv("OTEL_SESSION_SPAN_RECORDS", "on")
    assert CollectorOptions().span_records is True
    monkeypatch.setenv("OTEL_SESSION_SPAN_RECORDS", "off")
    assert CollectorOptions().span_records is False
    help_text = CliRunner().invoke(collect, ["--help"]).output
    assert "--span-records / --no-span-records" in help_text and "OTEL_SESSION_SPAN_RECORDS" in help_text
