"""OTLP trace and log payloads → span views and detached span events (the collector's decode stage).

Contract::

    request = parse_protobuf(body)          # ExportTraceServiceRequest, or raise OtlpDecodeError
    request = parse_json(body)              # OTLP JSON (hex ids, integer enums, lowerCamelCase)
    spans: list[OtlpSpan] = spans_of(request)   # SpanViews over the protobuf spans, decoded lazily
    body = to_json_line(request)            # OTLP JSON, as the Collector's file exporter writes it

    logs = parse_protobuf(body, Signal.LOGS)   # ExportLogsServiceRequest (parse_json likewise)
    events, ignored = log_events_of(logs)      # GenAI log events → DetachedEvent; the rest ignored

Some GenAI instrumentations send a model call's messages as *log records* emitted in its span
instead of span attributes or events: on the current conventions with ``EVENT_ONLY`` or
``SPAN_AND_EVENT`` content capture (the official openai-v2 instrumentor among them), one
``gen_ai.client.inference.operation.details`` record per call; on the older conventions, one
``gen_ai.{system,user,assistant,tool}.message`` / ``gen_ai.choice`` record per message, the message
in its body. ``log_events_of`` turns each into the span event it stands for (the body's fields
merged into its attributes), with the trace and span ids that join it to its span.

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
from enum import Enum
from typing import Any

import orjson
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from otel_session.normalize import DetachedEvent, LazySpan, SpanEventData, SpanLinkData, detached_event

__all__ = [
    "OtlpDecodeError",
    "OtlpSpan",
    "Signal",
    "attributes_of",
    "log_events_of",
    "parse_json",
    "parse_protobuf",
    "spans_of",
    "to_json_line",
]

_STATUS_CODES = {0: "unset", 1: "ok", 2: "error"}
_ZERO_TRACE_ID = bytes(16)
_ZERO_SPAN_ID = bytes(8)
_ID_FIELDS = {"traceId": 16, "spanId": 8, "parentSpanId": 8}
_PARSE_ERROR_FIELD = re.compile(r"Failed to parse (\w+) field")

ExportRequest = ExportTraceServiceRequest | ExportLogsServiceRequest


class Signal(str, Enum):
    """An OTLP signal the collector takes, with where its requests keep their items."""

    TRACES = "traces"
    LOGS = "logs"

    @property
    def request_type(self) -> type[ExportRequest]:
        return ExportTraceServiceRequest if self is Signal.TRACES else ExportLogsServiceRequest

    @property
    def json_keys(self) -> tuple[str, str, str, str]:
        """``(resource list, scope list, pre-1.0 scope list, item list)`` in OTLP JSON."""
        if self is Signal.TRACES:
            return "resourceSpans", "scopeSpans", "instrumentationLibrarySpans", "spans"
        return "resourceLogs", "scopeLogs", "instrumentationLibraryLogs", "logRecords"

    @property
    def path(self) -> str:
        """The OTLP/HTTP path."""
        return f"/v1/{self.value}"

    @staticmethod
    def of(request: ExportRequest) -> Signal:
        """The signal ``request`` carries."""
        return Signal.LOGS if isinstance(request, ExportLogsServiceRequest) else Signal.TRACES


class OtlpDecodeError(ValueError):
    """The payload is not a valid OTLP export request; the message says why."""


def parse_protobuf(body: bytes, signal: Signal = Signal.TRACES) -> ExportRequest:
    request = signal.request_type()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise OtlpDecodeError(f"body is not a protobuf {request.DESCRIPTOR.name}: {exc}") from None
    _check_ids(request)
    return request


def parse_json(body: bytes, signal: Signal | None = Signal.TRACES) -> ExportRequest:
    """OTLP JSON of ``signal``; ``None``: whichever the document holds (a file exporter's line)."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise OtlpDecodeError(f"body is not JSON: {exc}") from None
    if signal is None:
        signal = Signal.LOGS if isinstance(document, dict) and "resourceLogs" in document else Signal.TRACES
    resources_key, scopes_key, legacy_scopes_key, items_key = signal.json_keys
    if not isinstance(document, dict):
        raise OtlpDecodeError(f"OTLP JSON must be an object with {resources_key}, got {type(document).__name__}")
    item_name = "span" if signal is Signal.TRACES else "logRecord"
    for resource_items in _list(document, resources_key):
        _require_object(resource_items, f"{resources_key} item")
        # Pre-1.0 producers wrote instrumentationLibrarySpans / …Logs; accept both.
        scopes = _list(resource_items, scopes_key) or _list(resource_items, legacy_scopes_key)
        if legacy_scopes_key in resource_items and scopes_key not in resource_items:
            resource_items[scopes_key] = resource_items.pop(legacy_scopes_key)
        for scope_items in scopes:
            _require_object(scope_items, f"{scopes_key} item")
            for item in _list(scope_items, items_key):
                _hex_ids_to_base64(item, item_name)
                for link in _list(item, "links"):
                    _hex_ids_to_base64(link, "link")
    request = signal.request_type()
    try:
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise OtlpDecodeError(_parse_error_message(exc)) from None
    _check_ids(request)
    return request


def to_json_line(request: ExportRequest) -> bytes:
    """OTLP JSON of ``request`` on one line (hex ids, integer enums), newline included."""
    document = json_format.MessageToDict(request, use_integers_for_enums=True)
    resources_key, scopes_key, _, items_key = Signal.of(request).json_keys
    for resource_items in document.get(resources_key, ()):
        for scope_items in resource_items.get(scopes_key, ()):
            for item in scope_items.get(items_key, ()):
                _base64_ids_to_hex(item)
                for link in item.get("links", ()):
                    _base64_ids_to_hex(link)
    return orjson.dumps(document, option=orjson.OPT_APPEND_NEWLINE)


class OtlpSpan(LazySpan):
    """A ``SpanView`` over a protobuf ``Span``: ids, times, status, attributes, events and drops
    are read when the view is made (every mapping reads them: a field loaded on first use costs
    more than decoding it at once), kind and the status message on first use. Every protobuf
    field read crosses into the upb extension, so each is read once."""

    __slots__ = ("_span", "span_id_hex")  # the span id's hex, read by the sink and every mapping: kept

    def __init__(self, span: Any, resource_attributes: dict[str, Any], scope_name: str, scope_version: str = "") -> None:
        self._span = span
        parent_span_id = span.parent_span_id
        start_time_ns = span.start_time_unix_nano
        span_id = span.span_id
        self.trace_id = int.from_bytes(span.trace_id, "big")
        self.span_id = int.from_bytes(span_id, "big")
        self.span_id_hex = span_id.hex()  # 8 bytes (parse_protobuf checks): 16 digits
        self.parent_span_id = int.from_bytes(parent_span_id, "big") if parent_span_id else None
        self.name = span.name
        self.start_time_ns = start_time_ns
        self.end_time_ns = span.end_time_unix_nano or start_time_ns
        self.status_code = _STATUS_CODES.get(span.status.code, "unset")
        self.resource_attributes = resource_attributes
        self.scope_name = scope_name
        self.scope_version = scope_version
        self.dropped_attributes = span.dropped_attributes_count
        self.dropped_events = span.dropped_events_count
        self.attributes = attributes_of(span.attributes)
        span_events = span.events
        self.events = _events_of(span_events) if span_events else ()

    def _load_status_message(self) -> str | None:
        return self._span.status.message or None

    def _load_kind(self) -> int:
        return max(self._span.kind - 1, 0)  # OTLP SPAN_KIND_INTERNAL=1 is SpanKind.INTERNAL=0

    def _load_links(self) -> tuple[SpanLinkData, ...]:
        return tuple(SpanLinkData(int.from_bytes(link.trace_id, "big"), int.from_bytes(link.span_id, "big"),
                                  attributes_of(link.attributes)) for link in self._span.links)

    def encoded_size(self) -> int:
        """The span's size encoded (protobuf bytes): what holding it costs, at least."""
        return self._span.ByteSize()


def spans_of(request: ExportTraceServiceRequest) -> Iterator[OtlpSpan]:
    """Every span of the request as a view (``OtlpSpan``), with its resource and scope."""
    for resource_spans in request.resource_spans:
        resource_attributes = attributes_of(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope
            scope_name, scope_version = scope.name, scope.version
            for span in scope_spans.spans:
                yield OtlpSpan(span, resource_attributes, scope_name, scope_version)


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
    if which == "bytes_value":  # text sent as bytes is text (redacted as such); other bytes: base64
        try:
            return value.bytes_value.decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(value.bytes_value).decode("ascii")
    return getattr(value, which)


def log_events_of(request: ExportLogsServiceRequest) -> tuple[list[DetachedEvent], int]:
    """The GenAI message events among the request's log records (``normalize.detached_event``
    says which count), and how many records were not."""
    events: list[DetachedEvent] = []
    ignored = 0
    for resource_logs in request.resource_logs:
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                event = detached_event(
                    int.from_bytes(record.trace_id, "big"),
                    int.from_bytes(record.span_id, "big"),
                    record.event_name,
                    record.time_unix_nano or record.observed_time_unix_nano,
                    attributes_of(record.attributes),
                    _value_of(record.body) if record.HasField("body") else None,
                )
                if event is None:
                    ignored += 1
                else:
                    events.append(event)
    return events, ignored


def _check_ids(request: ExportRequest) -> None:
    """Ids of the right size. A failure names the item by its position, never by a value it
    carries (a span name may hold personal data)."""
    if isinstance(request, ExportLogsServiceRequest):
        _check_log_ids(request)
        return
    for r, resource_spans in enumerate(request.resource_spans):
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            for i, span in enumerate(scope_spans.spans):  # each id read once, the message made on failure
                trace_id, span_id, parent_span_id = span.trace_id, span.span_id, span.parent_span_id
                if len(trace_id) != 16 or trace_id == _ZERO_TRACE_ID:
                    problem = "an invalid trace id (16 non-zero bytes required)"
                elif len(span_id) != 8 or span_id == _ZERO_SPAN_ID:
                    problem = "an invalid span id (8 non-zero bytes required)"
                elif parent_span_id and len(parent_span_id) != 8:
                    problem = "an invalid parent span id (8 bytes required)"
                else:
                    continue
                raise OtlpDecodeError(f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}] has {problem}")


def _check_log_ids(request: ExportLogsServiceRequest) -> None:
    """A log record's ids are optional (a record outside any span has none), but well-formed."""
    for r, resource_logs in enumerate(request.resource_logs):
        for s, scope_logs in enumerate(resource_logs.scope_logs):
            for i, record in enumerate(scope_logs.log_records):
                where = f"resourceLogs[{r}].scopeLogs[{s}].logRecords[{i}]"
                if record.trace_id and len(record.trace_id) != 16:
                    raise OtlpDecodeError(f"{where} has an invalid trace id (16 bytes required)")
                if record.span_id and len(record.span_id) != 8:
                    raise OtlpDecodeError(f"{where} has an invalid span id (8 bytes required)")


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
