"""Property-based fuzzing of OTLP decoding (protobuf and JSON) and of the normalizer.

Whatever arrives, the collector's pipeline (decode → ``SpanData`` → normalize → redact → journal
line) either rejects the payload with an ``OtlpDecodeError`` that says why, or produces journal
records that encode as one JSON object per line. Nothing else may escape. ``make test`` runs a
small sample; ``python -m bench.fuzz`` runs every property with 10,000+ generated cases
(``OTEL_SESSION_FUZZ_EXAMPLES``).
"""

from __future__ import annotations

import base64
import os

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from otel_session.core import semconv as sc
from otel_session.collector.otlp import OtlpDecodeError, Signal, log_events_of, parse_json, parse_protobuf, spans_of
from otel_session.core.journal import decode_line, encode_record
from otel_session.normalize import JournalEvent, SpanData, SpanEventData, normalize_span
from otel_session.redact import RedactionPolicy, Redactor

FUZZ_SETTINGS = settings(
    max_examples=int(os.environ.get("OTEL_SESSION_FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
REDACTOR = Redactor(RedactionPolicy(), key=b"fuzz")

# Keys the normalizer reads (own, GenAI, OpenInference, OpenLLMetry), so values land where they bite.
KNOWN_KEYS = sorted(
    {getattr(sc, name) for name in dir(sc) if name.isupper() and isinstance(getattr(sc, name), str) and "." in getattr(sc, name)}
    | {
        "session.id", "gen_ai.conversation.id", "gen_ai.operation.name", "gen_ai.agent.name", "gen_ai.tool.name",
        "gen_ai.tool.call.id", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "gen_ai.input.messages",
        "gen_ai.output.messages", "gen_ai.system_instructions", "gen_ai.request.model", "gen_ai.prompt",
        "gen_ai.completion", "gen_ai.prompt.0.role", "gen_ai.prompt.0.content", "gen_ai.completion.0.content",
        "gen_ai.usage.input_tokens", "llm.input_messages.0.message.role", "llm.input_messages.0.message.content",
        "llm.output_messages.0.message.contents.0.message_content.text",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments", "input.value", "output.value",
        "openinference.span.kind", "traceloop.span.kind", "traceloop.entity.input", "traceloop.entity.output",
        "traceloop.entity.name", "traceloop.workflow.name", "tool.name", "error.type", "service.name",
    }
)
EVENT_NAMES = [
    "gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message",
    "gen_ai.choice", "gen_ai.client.inference.operation.details", "gen_ai.content.prompt",
    "gen_ai.content.completion", "exception", sc.EVENT_DELTA, "otel_session.slot_write", "otel_session.slot_diff",
    "otel_session.guard", "otel_session.transition_verdict", "otel_session.tool_update",
]
SCOPES = ["otel_session", "", "opentelemetry.instrumentation.openai_v2", "openinference.instrumentation.openai"]

text = st.text(max_size=30)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True), text,
)
json_trees = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(text, children, max_size=4)),
    max_leaves=4,
)
message_like = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "role": st.one_of(st.sampled_from(["user", "assistant", "system", "tool"]), json_trees),
            "parts": st.one_of(
                st.lists(
                    st.fixed_dictionaries(
                        {},
                        optional={
                            "type": st.one_of(st.sampled_from(["text", "tool_call", "tool_call_response", "reasoning"]), json_trees),
                            "content": json_trees, "arguments": json_trees, "name": json_trees, "id": json_trees,
                            "response": json_trees, "result": json_trees,
                        },
                    ),
                    max_size=3,
                ),
                json_trees,
            ),
            "content": json_trees, "finish_reason": json_trees, "tool_calls": json_trees,
        },
    ),
    max_size=3,
)
# What an attribute can hold after OTLP decoding: scalars, homogeneous or mixed arrays, kvlists,
# and strings that look like the JSON the GenAI conventions put in attributes.
attribute_values = st.one_of(
    json_trees,
    json_trees.map(lambda v: orjson.dumps(v, option=orjson.OPT_NON_STR_KEYS).decode()),
    message_like.map(lambda v: orjson.dumps(v).decode()),
    st.lists(text, max_size=4),
)
attributes = st.dictionaries(st.one_of(st.sampled_from(KNOWN_KEYS), text), attribute_values, max_size=5)
times = st.integers(min_value=0, max_value=2**64 - 1)


@st.composite
def span_data(draw) -> SpanData:
    start = draw(times)
    return SpanData(
        trace_id=draw(st.integers(min_value=1, max_value=2**128 - 1)),
        span_id=draw(st.integers(min_value=1, max_value=2**64 - 1)),
        parent_span_id=draw(st.none() | st.integers(min_value=1, max_value=2**64 - 1)),
        name=draw(st.one_of(st.sampled_from(["chat gpt", "execute_tool lookup", "invoke_agent a", "run", "turn 0", "message assistant"]), text)),
        start_time_ns=start,
        end_time_ns=draw(st.one_of(st.just(start), times)),
        attributes=draw(attributes),
        events=tuple(draw(st.lists(st.builds(SpanEventData, st.one_of(st.sampled_from(EVENT_NAMES), text), times, attributes), max_size=3))),
        status_code=draw(st.sampled_from(["unset", "ok", "error"])),
        status_message=draw(st.none() | text),
        kind=draw(st.integers(min_value=0, max_value=4)),
        resource_attributes=draw(attributes),
        scope_name=draw(st.one_of(st.sampled_from(SCOPES), text)),
        dropped_attributes=draw(st.integers(min_value=0, max_value=2**32 - 1)),
        dropped_events=draw(st.integers(min_value=0, max_value=2**32 - 1)),
    )


def journal_lines(spans) -> list[bytes]:
    """The pipeline after decoding: normalize → redact (a span's events together, as the collector
    does) → one encoded journal line per event."""
    lines = []
    for span in spans:
        events = normalize_span(span)
        for event in events:
            assert isinstance(event, JournalEvent) and isinstance(event.type, str) and isinstance(event.at_ns, int)
        for redacted in REDACTOR.redact_events(events):
            record = {"seq": 1, "at": "2026-11-30T00:00:00.000000Z", "type": redacted.type, "session_id": "s",
                      "run_id": span.run_id, "payload": redacted.payload}
            line = encode_record(record)
            assert line.endswith(b"\n") and line.count(b"\n") == 1
            assert decode_line(line)["type"] == redacted.type
            lines.append(line)
    return lines


@FUZZ_SETTINGS
@given(span=span_data())
def test_normalizer_maps_any_span_to_encodable_records(span):
    journal_lines([span])


# -- protobuf ---------------------------------------------------------------------------------


def _any_value(value) -> AnyValue:
    if value is None:
        return AnyValue()
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, list):
        result = AnyValue()
        result.array_value.values.extend(_any_value(item) for item in value)
        return result
    result = AnyValue()
    result.kvlist_value.values.extend(KeyValue(key=k, value=_any_value(v)) for k, v in value.items())
    return result


# Protobuf strings are UTF-8: no lone surrogates.
utf8 = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)
proto_trees = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**63), max_value=2**63 - 1), st.floats(), utf8, st.binary(max_size=8),
              message_like.map(lambda v: orjson.dumps(v).decode("utf-8", "replace"))),
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(utf8, children, max_size=4)),
    max_leaves=4,
)
proto_attributes = st.dictionaries(st.one_of(st.sampled_from(KNOWN_KEYS), utf8), proto_trees, max_size=3)
ids = st.one_of(st.binary(min_size=16, max_size=16), st.binary(max_size=20))
span_ids = st.one_of(st.binary(min_size=8, max_size=8), st.binary(max_size=10))


@st.composite
def export_requests(draw) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(0, 1))):
        resource_spans = request.resource_spans.add()
        resource_spans.resource.attributes.extend(KeyValue(key=k, value=_any_value(v)) for k, v in draw(proto_attributes).items())
        for _ in range(draw(st.integers(0, 2))):
            scope_spans = resource_spans.scope_spans.add()
            scope_spans.scope.name = draw(st.one_of(st.sampled_from(SCOPES), utf8))
            for _ in range(draw(st.integers(0, 3))):
                span = scope_spans.spans.add()
                span.trace_id = draw(ids)
                span.span_id = draw(span_ids)
                span.parent_span_id = draw(st.one_of(st.just(b""), span_ids))
                span.name = draw(utf8)
                span.kind = draw(st.integers(min_value=-(2**31), max_value=2**31 - 1))
                span.start_time_unix_nano = draw(times)
                span.end_time_unix_nano = draw(times)
                span.attributes.extend(KeyValue(key=k, value=_any_value(v)) for k, v in draw(proto_attributes).items())
                span.status.code = draw(st.integers(min_value=-(2**31), max_value=2**31 - 1))
                span.status.message = draw(utf8)
                span.dropped_attributes_count = draw(st.integers(0, 2**32 - 1))
                for _ in range(draw(st.integers(0, 2))):
                    event = span.events.add()
                    event.name = draw(st.one_of(st.sampled_from(EVENT_NAMES), utf8))
                    event.time_unix_nano = draw(times)
                    event.attributes.extend(KeyValue(key=k, value=_any_value(v)) for k, v in draw(proto_attributes).items())
    return request


def decode_and_record(parse, body: bytes) -> None:
    try:
        request = parse(body)
    except OtlpDecodeError as exc:
        assert str(exc)  # a reason, never an empty message
        return
    journal_lines(list(spans_of(request)))


@FUZZ_SETTINGS
@given(request=export_requests())
def test_protobuf_requests_decode_or_fail_clearly(request):
    decode_and_record(parse_protobuf, request.SerializeToString())


@FUZZ_SETTINGS
@given(
    request=export_requests(),
    edits=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), max_size=6),
    cut=st.none() | st.integers(min_value=0),
)
def test_corrupted_protobuf_bodies_decode_or_fail_clearly(request, edits, cut):
    body = bytearray(request.SerializeToString())
    for position, byte in edits:
        if body:
            body[position % len(body)] = byte
    if cut is not None and body:
        del body[cut % len(body):]
    decode_and_record(parse_protobuf, bytes(body))


# -- OTLP JSON ---------------------------------------------------------------------------------

any_json = json_trees


def _json_value(value):
    """An OTLP JSON AnyValue for a decoded tree (int64 as string, as the spec allows)."""
    if value is None:
        return {}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_json_value(v) for v in value]}}
    return {"kvlistValue": {"values": [{"key": k, "value": _json_value(v)} for k, v in value.items()]}}


json_key_values = st.lists(
    st.one_of(
        st.builds(lambda k, v: {"key": k, "value": _json_value(v)}, st.one_of(st.sampled_from(KNOWN_KEYS), text), attribute_values),
        st.builds(lambda k, b: {"key": k, "value": {"bytesValue": base64.b64encode(b).decode()}}, text, st.binary(max_size=8)),
        st.dictionaries(st.sampled_from(["key", "value"]), any_json, max_size=2),
        any_json,
    ),
    max_size=5,
)
hex_ids = st.one_of(st.binary(min_size=16, max_size=16).map(bytes.hex), st.binary(min_size=8, max_size=8).map(bytes.hex), text, any_json)


def _maybe(strategy):
    """The field as a producer would send it, or any JSON value at all."""
    return st.one_of(strategy, any_json)


json_spans = st.fixed_dictionaries(
    {},
    optional={
        "traceId": hex_ids, "spanId": hex_ids, "parentSpanId": hex_ids, "name": _maybe(text),
        "kind": _maybe(st.integers(-3, 9)), "startTimeUnixNano": _maybe(times.map(str)), "endTimeUnixNano": _maybe(times),
        "attributes": _maybe(json_key_values),
        "events": _maybe(st.lists(st.fixed_dictionaries({}, optional={
            "name": _maybe(st.sampled_from(EVENT_NAMES)), "timeUnixNano": _maybe(times.map(str)),
            "attributes": _maybe(json_key_values)}), max_size=3)),
        "links": _maybe(st.lists(st.fixed_dictionaries({}, optional={"traceId": hex_ids, "spanId": hex_ids}), max_size=2)),
        "status": _maybe(st.fixed_dictionaries({}, optional={"code": _maybe(st.integers(-1, 3)), "message": _maybe(text)})),
        "droppedAttributesCount": _maybe(st.integers(-1, 2**33)),
    },
)
json_documents = st.fixed_dictionaries(
    {},
    optional={
        "resourceSpans": _maybe(st.lists(st.fixed_dictionaries({}, optional={
            "resource": _maybe(st.fixed_dictionaries({}, optional={"attributes": _maybe(json_key_values)})),
            "scopeSpans": _maybe(st.lists(st.fixed_dictionaries({}, optional={
                "scope": _maybe(st.fixed_dictionaries({}, optional={"name": _maybe(st.sampled_from(SCOPES))})),
                "spans": _maybe(st.lists(json_spans, max_size=3)),
            }), max_size=2)),
            "instrumentationLibrarySpans": _maybe(st.lists(st.fixed_dictionaries({}, optional={
                "spans": _maybe(st.lists(json_spans, max_size=2))}), max_size=1)),
        }), max_size=2)),
    },
)


@FUZZ_SETTINGS
@given(document=st.one_of(json_documents, any_json))
def test_otlp_json_decodes_or_fails_clearly(document):
    decode_and_record(parse_json, orjson.dumps(document, option=orjson.OPT_NON_STR_KEYS))


@FUZZ_SETTINGS
@given(body=st.binary(max_size=200))
def test_arbitrary_bytes_as_otlp_json_or_protobuf_fail_clearly(body):
    decode_and_record(parse_json, body)
    decode_and_record(parse_protobuf, body)


# -- OTLP logs (GenAI message events as log records) -------------------------------------------


@st.composite
def log_requests(draw) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    for _ in range(draw(st.integers(0, 1))):
        resource_logs = request.resource_logs.add()
        for _ in range(draw(st.integers(0, 2))):
            scope_logs = resource_logs.scope_logs.add()
            for _ in range(draw(st.integers(0, 3))):
                record = scope_logs.log_records.add()
                record.trace_id = draw(st.one_of(st.just(b""), ids))
                record.span_id = draw(st.one_of(st.just(b""), span_ids))
                record.event_name = draw(st.one_of(st.sampled_from(EVENT_NAMES), utf8))
                record.time_unix_nano = draw(times)
                record.observed_time_unix_nano = draw(times)
                if draw(st.booleans()):
                    record.body.CopyFrom(_any_value(draw(st.one_of(proto_trees, message_like))))
                record.attributes.extend(KeyValue(key=k, value=_any_value(v)) for k, v in draw(proto_attributes).items())
    return request


def decode_join_and_record(parse, body: bytes) -> None:
    """Logs through the collector's path: decode → detached events → joined to a model call each
    (as the sink joins them) → normalize → redact → journal lines."""
    try:
        request = parse(body, Signal.LOGS)
    except OtlpDecodeError as exc:
        assert str(exc)
        return
    events, ignored = log_events_of(request)
    records = sum(len(scope.log_records) for resource in request.resource_logs for scope in resource.scope_logs)
    assert len(events) + ignored == records  # each record is an event or counted as ignored
    for detached in events:
        span = SpanData(detached.trace_id, detached.span_id, 1, "chat m", 0, 1, {"gen_ai.operation.name": "chat"})
        journal_lines([span.with_events([detached.event])])


@FUZZ_SETTINGS
@given(request=log_requests())
def test_log_requests_decode_and_join_or_fail_clearly(request):
    decode_join_and_record(parse_protobuf, request.SerializeToString())


json_log_records = st.fixed_dictionaries(
    {},
    optional={
        "traceId": hex_ids, "spanId": hex_ids, "eventName": _maybe(st.sampled_from(EVENT_NAMES)),
        "timeUnixNano": _maybe(times.map(str)), "observedTimeUnixNano": _maybe(times),
        "body": _maybe(st.one_of(any_json, message_like).map(_json_value)), "attributes": _maybe(json_key_values),
    },
)
json_log_documents = st.fixed_dictionaries(
    {},
    optional={
        "resourceLogs": _maybe(st.lists(st.fixed_dictionaries({}, optional={
            "scopeLogs": _maybe(st.lists(st.fixed_dictionaries({}, optional={
                "logRecords": _maybe(st.lists(json_log_records, max_size=3))}), max_size=2)),
        }), max_size=2)),
    },
)


@FUZZ_SETTINGS
@given(document=st.one_of(json_log_documents, any_json))
def test_otlp_json_logs_decode_and_join_or_fail_clearly(document):
    decode_join_and_record(parse_json, orjson.dumps(document, option=orjson.OPT_NON_STR_KEYS))
