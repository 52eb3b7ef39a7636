"""``span`` records in process (``OTEL_SESSION_SPAN_RECORDS``): one per span of a run as it ends,
this project's spans and other instrumentation's alike, the run's root span included; none by default."""

from __future__ import annotations

import json

import orjson
import pytest
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

import otel_session
from otel_session.normalize import SpanData
from otel_session.normalize.span_record import IN_RECORDS, span_record
from otel_session.redact.bounds import (
    MAX_ENTRIES, MAX_ITEMS, MAX_KEY, MAX_NESTING, MAX_RECORD_BYTES, MAX_RECORD_CHARS, MAX_TEXT, NESTING_MARKER, bounded,
)
from otel_session.testing import capture_bundle


def _record(captured) -> None:
    tracer = captured.recorder.tracer_provider.get_tracer("my.http.lib", "2.3.4")
    with otel_session.session("span-records"), otel_session.run(agent="booking"):
        with otel_session.turn(0, state="ask", required_slots=["date"]) as turn:
            with otel_session.message("user") as message:
                message.text("a table for two")
            linked = SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(1))
            with tracer.start_as_current_span("GET /slots", kind=SpanKind.CLIENT, links=[Link(linked, {"why": "retry of"})],
                                              attributes={"http.request.method": "GET", "retries": 2}) as span:
                span.add_event("cache miss", {"cache.key": "slots"})
                span.add_event("otel_session.delta", {"otel_session.delta.text": "journaled elsewhere"})
                with tracer.start_as_current_span("dns") as child:
                    child.set_status(Status(StatusCode.ERROR, "no answer"))
            turn.finish(state="done")


def test_span_records_are_off_by_default(monkeypatch):
    monkeypatch.delenv("OTEL_SESSION_SPAN_RECORDS", raising=False)
    with capture_bundle() as captured:
        _record(captured)
    assert not captured.events("span")


def test_every_span_of_a_run_leaves_one_span_record_after_its_own_records(monkeypatch):
    monkeypatch.setenv("OTEL_SESSION_SPAN_RECORDS", "on")
    with capture_bundle() as captured:
        _record(captured)
    records = captured.bundle.events
    spans = {record["span_id"]: record for record in records if record["type"] == "span"}
    exported = {f"{span.context.span_id:016x}": span for span in captured.spans}
    assert set(spans) == set(exported)  # one each: run, turn, message, GET, dns
    for span_id, span in exported.items():
        record = spans[span_id]
        parent = f"{span.parent.span_id:016x}" if span.parent is not None else None
        assert record["payload"]["parent_span_id"] == parent
        assert record["trace_id"] == f"{span.context.trace_id:032x}"
        assert max(other["seq"] for other in records if other.get("span_id") == span_id) == record["seq"]
    assert records[-1]["type"] == "span" and records[-1]["payload"]["parent_span_id"] is None  # the root, after run_finished
    assert records[-2]["type"] == "run_finished"
    get = next(record["payload"] for record in spans.values() if record["payload"]["name"] == "GET /slots")
    assert get["kind"] == "client"
    assert get["scope"] == {"name": "my.http.lib", "version": "2.3.4"}
    assert get["attributes"]["http.request.method"] == "GET" and get["attributes"]["retries"] == 2
    assert [event["name"] for event in get["events"]] == ["cache miss"]  # the delta is a record of its own
    assert get["events"][0]["attributes"] == {"cache.key": "slots"}
    assert get["links"] == [{"trace_id": f"{0x1234:032x}", "span_id": f"{0x5678:016x}", "attributes": {"why": "retry of"}}]
    assert get["resource"]["telemetry.sdk.language"] == "python"
    assert get["started_at"] <= get["ended_at"]
    dns = next(record for record in spans.values() if record["payload"]["name"] == "dns")
    assert dns["payload"]["status"] == {"code": "error", "description": "no answer"}
    assert dns["turn_index"] == 0  # stamped on the span by the session processor
    assert "cut" not in get


def test_a_span_record_is_bounded_and_says_what_was_cut(monkeypatch):
    monkeypatch.setenv("OTEL_SESSION_SPAN_RECORDS", "on")
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=1000, max_attribute_length=None))
    with capture_bundle(tracer_provider=provider) as captured:
        tracer = provider.get_tracer("big")
        with otel_session.session("bounded"), otel_session.run(agent="a"):
            with tracer.start_as_current_span("big", attributes={
                "long": "x" * (MAX_TEXT + 10), **{f"k{n}": n for n in range(MAX_ENTRIES + 5)},
            }):
                pass
    record = next(record["payload"] for record in captured.events("span") if record["payload"]["name"] == "big")
    attributes = record["attributes"]
    assert len(attributes) == MAX_ENTRIES
    assert attributes["long"] == "x" * MAX_TEXT + "…[cut 10 chars]"
    # the long value, and the entries past the bound (the session processor's stamps among them)
    assert record["cut"]["attributes"] == 1 + len(captured.spans[0].attributes) - MAX_ENTRIES


def test_bounds_cut_nesting_lists_and_the_record_s_text_visibly():
    nested: list = []
    inner = nested
    for _ in range(MAX_NESTING + 3):
        inner.append([])
        inner = inner[0]
    payload = bounded({
        "name": "n", "attributes": {"nested": nested, "list": list(range(MAX_ITEMS + 2))},
        "events": [{"name": f"e{n}", "at": "t", "attributes": {"text": "y" * MAX_TEXT}} for n in range(MAX_ITEMS + 4)],
    })
    assert NESTING_MARKER in str(payload["attributes"]["nested"])
    assert len(payload["attributes"]["list"]) == MAX_ITEMS
    assert payload["cut"]["attributes"] == 1 + 2
    kept = len(payload["events"])
    assert kept < MAX_ITEMS  # the record's text budget ran out first
    assert all(set(event) == {"name", "at", "attributes"} for event in payload["events"])  # whole, or left out
    assert sum(len(event["attributes"].get("text", "")) for event in payload["events"]) <= MAX_RECORD_CHARS
    assert payload["cut"]["events"] >= MAX_ITEMS + 4 - kept


@pytest.mark.parametrize("character", ["\x1b", "\N{GRINNING FACE}", '"'])
def test_a_span_whose_text_is_large_as_json_never_fails_the_run(monkeypatch, character):
    """70 values of 4,096 characters that JSON writes as 6 bytes (an escape), 4 (UTF-8) or 2 each:
    the record's character budget holds, its JSON did not (1.57 MB: the writer refused it and the
    run's capture failed, every later record lost). The record stays under MAX_RECORD_BYTES, says
    what it cut, and the run is complete."""
    monkeypatch.setenv("OTEL_SESSION_SPAN_RECORDS", "on")
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=1000, max_attribute_length=None))
    with capture_bundle(tracer_provider=provider) as captured:
        with otel_session.session("large"), otel_session.run(agent="a"):
            with otel_session.turn(0, state="s") as turn:
                with provider.get_tracer("app").start_as_current_span(
                        "big", attributes={f"out.{n}": character * MAX_TEXT for n in range(70)}):
                    pass
                turn.finish(state="t")
    assert captured.bundle.capture["status"] == "complete"
    assert {"turn_finished", "run_finished"} <= {record["type"] for record in captured.bundle.events}
    record = next(record["payload"] for record in captured.events("span") if record["payload"]["name"] == "big")
    assert len(orjson.dumps(record)) <= MAX_RECORD_BYTES and record["cut"]["attributes"] > 0


def test_keys_cut_alike_are_kept_apart():
    payload = bounded({"name": "n", "attributes": {"k" * 300 + "A": "first", "k" * 300 + "B": "second"}})
    assert sorted(payload["attributes"].values()) == ["first", "second"]
    assert all(len(key) <= MAX_KEY + 40 for key in payload["attributes"])


@pytest.mark.parametrize("value", ["off", "", "no"])
def test_anything_but_on_leaves_them_off(monkeypatch, value):
    monkeypatch.setenv("OTEL_SESSION_SPAN_RECORDS", value)
    with capture_bundle() as captured:
        _record(captured)
    assert not captured.events("span")


def test_attributes_whose_content_the_span_s_records_hold_are_named_not_copied(monkeypatch):
    monkeypatch.setenv("OTEL_SESSION_SPAN_RECORDS", "on")
    inputs = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "a table for two"}]}])
    outputs = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "booked"}]}])
    with capture_bundle() as captured:
        tracer = captured.recorder.tracer_provider.get_tracer("genai.lib")
        with otel_session.session("content"), otel_session.run(agent="a"):
            with tracer.start_as_current_span("chat gpt", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt", "gen_ai.input.messages": inputs,
                "gen_ai.output.messages": outputs,
            }):
                pass
    records = captured.bundle.events
    chat = next(record for record in records if record["type"] == "span" and record["payload"]["name"] == "chat gpt")
    attributes = chat["payload"]["attributes"]
    assert attributes["gen_ai.input.messages"] == IN_RECORDS and attributes["gen_ai.output.messages"] == IN_RECORDS
    assert attributes["gen_ai.request.model"] == "gpt"
    texts = [block["text"] for record in records if record["type"] == "message_finished"
             and record["span_id"] == chat["span_id"] for block in record["payload"]["content"]]
    assert texts == ["a table for two", "booked"]  # where the content is
    assert span_record(SpanData(1, 2, None, "x", 0, 1, attributes={"gen_ai.input.messages": inputs})).payload[
        "attributes"] == {"gen_ai.input.messages": inputs}  # no records of its messages: kept (and redacted) whole
