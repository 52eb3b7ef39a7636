"""OTLP trace payloads → ``SpanData`` (the collector's decode stage).

Contract::

    request = parse_protobuf(body)          # ExportTraceServiceRequest, or raise OtlpDecodeError
    request = parse_json(body)              # OTLP JSON (hex ids, integer enums, lowerCamelCase)
    spans: list[SpanData] = spans_of(request)
    body = to_json_line(request)            # OTLP JSON, as the Collector's file exporter writes it

OTLP JSON is not protobuf's canonical JSON mapping: trace and span ids are hex strings (not
base64), enums are integers, int64 may be a string or a number, and receivers ignore unknown
fields. ``parse_json`` rewrites the ids to what ``json_format`` expects and parses the rest with
it, so both encodings decode through one path.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator, Mapping
from typing import Any

import orjson
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from otel_session.normalize import SpanData, SpanEventData

__all__ = [
    "OtlpDecodeError",
    "attributes_of",
    "parse_json",
    "parse_protobuf",
    "spans_of",
    "to_json_line",
]

_STATUS_CODES = {0: "unset", 1: "ok", 2: "error"}
_ID_FIELDS = {"traceId": 16, "spanId": 8, "parentSpanId": 8}
_PARSE_ERROR_FIELD = re.compile(r"Failed to parse (\w+) field")


class OtlpDecodeError(ValueError):
    """The payload is not a valid OTLP trace export request; the message says why."""


def parse_protobuf(body: bytes) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise OtlpDecodeError(f"body is not a protobuf ExportTraceServiceRequest: {exc}") from None
    _check_ids(request)
    return request


def parse_json(body: bytes) -> ExportTraceServiceRequest:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise OtlpDecodeError(f"body is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise OtlpDecodeError(f"OTLP JSON must be an object with resourceSpans, got {type(document).__name__}")
    for resource_spans in _list(document, "resourceSpans"):
        _require_object(resource_spans, "resourceSpans item")
        # Pre-1.0 producers wrote instrumentationLibrarySpans; accept both.
        scopes = _list(resource_spans, "scopeSpans") or _list(resource_spans, "instrumentationLibrarySpans")
        if "instrumentationLibrarySpans" in resource_spans and "scopeSpans" not in resource_spans:
            resource_spans["scopeSpans"] = resource_spans.pop("instrumentationLibrarySpans")
        for scope_spans in scopes:
            _require_object(scope_spans, "scopeSpans item")
            for span in _list(scope_spans, "spans"):
                _hex_ids_to_base64(span, "span")
                for link in _list(span, "links"):
                    _hex_ids_to_base64(link, "link")
    request = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise OtlpDecodeError(_parse_error_message(exc)) from None
    _check_ids(request)
    return request


def to_json_line(request: ExportTraceServiceRequest) -> bytes:
    """OTLP JSON of ``request`` on one line (hex ids, integer enums), newline included."""
    document = json_format.MessageToDict(request, use_integers_for_enums=True)
    for resource_spans in document.get("resourceSpans", ()):
        for scope_spans in resource_spans.get("scopeSpans", ()):
            for span in scope_spans.get("spans", ()):
                _base64_ids_to_hex(span)
                for link in span.get("links", ()):
                    _base64_ids_to_hex(link)
    return orjson.dumps(document, option=orjson.OPT_APPEND_NEWLINE)


def spans_of(request: ExportTraceServiceRequest) -> Iterator[SpanData]:
    """Every span of the request as ``SpanData``, with its resource and scope.

    The collector's per-span hot path: every protobuf field read crosses into the upb extension,
    so each field is read once.
    """
    for resource_spans in request.resource_spans:
        resource_attributes = attributes_of(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope_name = scope_spans.scope.name
            for span in scope_spans.spans:
                parent_span_id = span.parent_span_id
                start_time_ns = span.start_time_unix_nano
                status = span.status
                span_events = span.events
                # Positional: fifteen keyword arguments would cost about as much again as the call.
                yield SpanData(
                    int.from_bytes(span.trace_id, "big"),  # trace_id
                    int.from_bytes(span.span_id, "big"),  # span_id
                    int.from_bytes(parent_span_id, "big") if parent_span_id else None,  # parent_span_id
                    span.name,  # name
                    start_time_ns,  # start_time_ns
                    span.end_time_unix_nano or start_time_ns,  # end_time_ns
                    attributes_of(span.attributes),  # attributes
                    _events_of(span_events) if span_events else (),  # events
                    _STATUS_CODES.get(status.code, "unset"),  # status_code
                    status.message or None,  # status_message
                    max(span.kind - 1, 0),  # kind: OTLP SPAN_KIND_INTERNAL=1 is SpanKind.INTERNAL=0
                    resource_attributes,  # resource_attributes
                    scope_name,  # scope_name
                    span.dropped_attributes_count,  # dropped_attributes
                    span.dropped_events_count,  # dropped_events
                )


def _events_of(span_events: Any) -> tuple[SpanEventData, ...]:
    return tuple(
        [SpanEventData(event.name, event.time_unix_nano, attributes_of(event.attributes)) for event in span_events]
    )


def attributes_of(key_values: Any) -> dict[str, Any]:
    attributes = {}
    for key_value in key_values:
        value = key_value.value
        # A non-empty string_value is the oneof's member (the common case): one read, not two.
        text = value.string_value
        attributes[key_value.key] = text if text else _value_of(value)
    return attributes


def _value_of(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "string_value":
        return value.string_value
    if which is None:
        return None
    if which == "array_value":
        return [_value_of(item) for item in value.array_value.values]
    if which == "kvlist_value":
        return attributes_of(value.kvlist_value.values)
    if which == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return getattr(value, which)


def _check_ids(request: ExportTraceServiceRequest) -> None:
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                if len(span.trace_id) != 16 or not any(span.trace_id):
                    raise OtlpDecodeError(f"span {span.name!r} has an invalid trace id (16 non-zero bytes required)")
                if len(span.span_id) != 8 or not any(span.span_id):
                    raise OtlpDecodeError(f"span {span.name!r} has an invalid span id (8 non-zero bytes required)")
                if span.parent_span_id and len(span.parent_span_id) != 8:
                    raise OtlpDecodeError(f"span {span.name!r} has an invalid parent span id (8 bytes required)")


def _list(container: Mapping[str, Any], key: str) -> list[Any]:
    value = container.get(key) if isinstance(container, Mapping) else None
    if value is None:
        return []
    if not isinstance(value, list):
        raise OtlpDecodeError(f"{key} must be a list, got {type(value).__name__}")
    return value


def _require_object(item: Any, what: str) -> None:
    if not isinstance(item, dict):
        raise OtlpDecodeError(f"each {what} must be an object, got {type(item).__name__}")


def _hex_ids_to_base64(item: Any, what: str) -> None:
    _require_object(item, what)
    for key, size in _ID_FIELDS.items():
        value = item.get(key)
        if value is None or value == "":
            item.pop(key, None)
            continue
        if not isinstance(value, str):
            raise OtlpDecodeError(f"{what} {key} must be a hex string, got {type(value).__name__}")
        # Diagnostics name the field, never its value: a hostile producer may put personal data anywhere.
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raise OtlpDecodeError(
                f"{what} {key} is not hex (OTLP JSON ids are hex strings; got {len(value)} characters)"
            ) from None
        if len(raw) != size:
            raise OtlpDecodeError(f"{what} {key} must be {size * 2} hex digits, got {len(value)}")
        item[key] = base64.b64encode(raw).decode("ascii")


def _parse_error_message(error: json_format.ParseError) -> str:
    """Where protobuf's JSON parser failed, without the offending value it quotes (it may be PII)."""
    path = ".".join(_PARSE_ERROR_FIELD.findall(str(error))) or "the request"
    return f"invalid OTLP JSON: {path} has a value of the wrong type or out of range"


def _base64_ids_to_hex(item: dict[str, Any]) -> None:
    for key in _ID_FIELDS:
        if key in item:
            try:
                item[key] = base64.b64decode(item[key]).hex()
            except (binascii.Error, ValueError):
                pass
