"""OTLP decoding: protobuf and OTLP JSON give the same ``SpanData``; malformed input says why."""

from __future__ import annotations

import orjson
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_session.collector.otlp import OtlpDecodeError, parse_json, parse_protobuf, spans_of, to_json_line

TRACE_ID = "5b8efff798038103d269b633813fc60c"
SPAN_ID = "eee19b7ec3c1b174"
PARENT_ID = "eee19b7ec3c1b173"


def otlp_json(**span_overrides) -> dict:
    span = {
        "traceId": TRACE_ID,
        "spanId": SPAN_ID,
        "parentSpanId": PARENT_ID,
        "name": "chat gpt-4o",
        "kind": 3,
        "startTimeUnixNano": "1764453121000000000",
        "endTimeUnixNano": 1764453122000000000,
        "attributes": [
            {"key": "session.id", "value": {"stringValue": "call-42"}},
            {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "12"}},
            {"key": "tags", "value": {"arrayValue": {"values": [{"stringValue": "a"}, {"intValue": 3}]}}},
            {"key": "meta", "value": {"kvlistValue": {"values": [{"key": "k", "value": {"boolValue": True}}]}}},
        ],
        "events": [{"timeUnixNano": "1764453121500000000", "name": "gen_ai.choice", "attributes": []}],
        "status": {"code": 2, "message": "boom"},
        "droppedEventsCount": 3,
        "unknownFutureField": {"ignored": True},
    }
    span.update(span_overrides)
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
                "scopeSpans": [{"scope": {"name": "opentelemetry.instrumentation.openai_v2"}, "spans": [span]}],
            }
        ]
    }


def test_otlp_json_decodes_hex_ids_integer_enums_and_int64_strings():
    (span,) = spans_of(parse_json(orjson.dumps(otlp_json())))
    assert span.trace_id_hex == TRACE_ID and span.span_id_hex == SPAN_ID
    assert span.parent_span_id == int(PARENT_ID, 16)
    assert span.start_time_ns == 1764453121000000000 and span.end_time_ns == 1764453122000000000
    assert span.attributes == {"session.id": "call-42", "gen_ai.usage.input_tokens": 12, "tags": ["a", 3], "meta": {"k": True}}
    assert span.status_code == "error" and span.status_message == "boom"
    assert span.kind == 2  # SPAN_KIND_CLIENT → SpanKind.CLIENT
    assert span.dropped_events == 3
    assert span.resource_attributes == {"service.name": "svc"}
    assert span.scope_name == "opentelemetry.instrumentation.openai_v2"
    assert span.events[0].name == "gen_ai.choice" and span.events[0].time_ns == 1764453121500000000


def test_protobuf_and_json_decode_to_the_same_spans_and_json_lines_round_trip():
    request = parse_json(orjson.dumps(otlp_json()))
    from_protobuf = values(parse_protobuf(request.SerializeToString()))
    line = to_json_line(request)
    assert line.endswith(b"\n") and b"\n" not in line[:-1]
    assert TRACE_ID.encode() in line
    assert values(parse_json(line)) == from_protobuf == values(request)


def values(request) -> list:
    """The request's span views as plain values (every field decoded), to compare."""
    return [span.replaced() for span in spans_of(request)]


def test_pre_1_0_instrumentation_library_spans_are_accepted():
    document = otlp_json()
    resource = document["resourceSpans"][0]
    resource["instrumentationLibrarySpans"] = resource.pop("scopeSpans")
    assert len(list(spans_of(parse_json(orjson.dumps(document))))) == 1


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "must be an object"),
        (orjson.dumps({"resourceSpans": {"a": 1}}), "resourceSpans must be a list"),
        (orjson.dumps(otlp_json(traceId="zz" * 16)), "is not hex"),
        (orjson.dumps(otlp_json(traceId="ab" * 8)), "must be 32 hex digits"),
        (orjson.dumps(otlp_json(spanId="")), "invalid span id"),
        (orjson.dumps(otlp_json(traceId="00" * 16)), "invalid trace id"),
        (orjson.dumps(otlp_json(name=["not", "a", "string"])), "invalid OTLP JSON"),
        (orjson.dumps(otlp_json(startTimeUnixNano="soon")), "invalid OTLP JSON"),
    ],
)
def test_malformed_otlp_json_is_rejected_with_a_clear_message(body, message):
    with pytest.raises(OtlpDecodeError, match=message):
        parse_json(body)


def test_malformed_protobuf_is_rejected_with_a_clear_message():
    with pytest.raises(OtlpDecodeError, match="not a protobuf ExportTraceServiceRequest"):
        parse_protobuf(b"\x0a\xff\xff\xff\xff\x0f garbage")
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.add(trace_id=b"\x01" * 16, span_id=b"\x01" * 3, name="x")
    with pytest.raises(OtlpDecodeError, match="invalid span id"):
        parse_protobuf(request.SerializeToString())
