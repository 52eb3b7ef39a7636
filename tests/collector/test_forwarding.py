"""Forwarding to another OTLP endpoint: a second real collector, and redaction of forwarded payloads."""

from __future__ import annotations

import socket
import threading
from concurrent import futures

import grpc
import orjson
import pytest
import requests
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue

from otel_session.collector.counters import Counters, Refused
from otel_session.collector.forward import DEFAULT_QUEUE_BYTES, QUEUE_FULL, Forwarder, forward_url, grpc_target
from otel_session.collector.otlp import Signal
from otel_session.bundle.read import BundleStatus
from otel_session.testing import OtlpHttpCapture

from ..hostile.test_fuzz_otlp import _any_value
from .conftest import CANARY_CARD, CANARY_EMAIL, all_bytes, sealed_bundles, wait_for


def record_run_with_pii(tracer):
    with tracer.start_as_current_span("invoke_agent booking", attributes={
        "session.id": "call-pii", "gen_ai.operation.name": "invoke_agent", "enduser.email": CANARY_EMAIL,
    }):
        with tracer.start_as_current_span("chat mock-gpt", attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": f'[{{"role":"user","parts":[{{"type":"text","content":"mail {CANARY_EMAIL}, card {CANARY_CARD}"}}]}}]',
        }) as chat:
            chat.add_event("gen_ai.user.message", {"content": f"reach me at {CANARY_EMAIL}"})
        with tracer.start_as_current_span("execute_tool pay", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "pay",
            "gen_ai.tool.call.arguments": f'{{"card": "{CANARY_CARD}"}}',
        }):
            pass


@pytest.fixture
def next_hop():
    server = OtlpHttpCapture()
    yield server
    server.close()


def test_forwarding_to_a_second_collector(make_collector, make_provider, tmp_path):
    downstream = make_collector(tmp_path / "downstream")
    upstream = make_collector(tmp_path / "upstream", forward=f"http://127.0.0.1:{downstream.http_port}")
    tracer = make_provider(GrpcExporter(endpoint=f"127.0.0.1:{upstream.grpc_port}", insecure=True)).get_tracer("t")
    record_run_with_pii(tracer)
    (up,) = sealed_bundles(tmp_path / "upstream")
    (down,) = sealed_bundles(tmp_path / "downstream")
    assert up.status is down.status is BundleStatus.COMPLETE
    assert up.run_id == down.run_id
    assert [event["type"] for event in up.events] == [event["type"] for event in down.events]
    wait_for(lambda: upstream.counters.snapshot()["forwarded"] == 3)
    for root in (tmp_path / "upstream", tmp_path / "downstream"):
        data = all_bytes(root)
        assert CANARY_EMAIL.encode() not in data and b"4111" not in data


@pytest.mark.parametrize("raw", [False, True], ids=["redacted (default)", "raw (--forward-raw)"])
def test_forwarded_payloads_are_redacted_by_default(make_collector, make_provider, tmp_path, next_hop, raw):
    upstream = make_collector(tmp_path / "upstream", forward=next_hop.url, forward_redacted=not raw)
    tracer = make_provider(GrpcExporter(endpoint=f"127.0.0.1:{upstream.grpc_port}", insecure=True)).get_tracer("t")
    record_run_with_pii(tracer)
    wait_for(lambda: upstream.counters.snapshot()["forwarded"] == 3)
    forwarded = b"".join(next_hop.bodies)
    assert b"gen_ai.input.messages" in forwarded and b"enduser.email" in forwarded
    assert (CANARY_EMAIL.encode() in forwarded) is raw
    assert (CANARY_CARD.encode() in forwarded) is raw
    sealed_bundles(tmp_path / "upstream")
    assert CANARY_EMAIL.encode() not in all_bytes(tmp_path / "upstream")


def test_forward_failures_are_counted(make_collector, make_provider, tmp_path):
    refusing = OtlpHttpCapture(status=400)
    upstream = make_collector(tmp_path / "upstream", forward=refusing.url)
    tracer = make_provider(GrpcExporter(endpoint=f"127.0.0.1:{upstream.grpc_port}", insecure=True)).get_tracer("t")
    record_run_with_pii(tracer)
    wait_for(lambda: upstream.counters.snapshot()["forward_failed"] == 3)
    assert upstream.counters.snapshot()["forwarded"] == 0 and len(refusing.bodies) == 3
    refusing.close()


@pytest.mark.parametrize(
    ("url", "expected"),
    [("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
     ("https://tempo:4318/", "https://tempo:4318/v1/traces"),
     ("http://phoenix:6006/v1/traces", "http://phoenix:6006/v1/traces")],
)
def test_forward_url(url, expected):
    assert forward_url(url) == expected


def test_forward_url_rejects_non_http():
    with pytest.raises(ValueError, match="http"):
        forward_url("grpc://127.0.0.1:4317")


class CapturingGrpcServer:
    """A plain OTLP/gRPC endpoint that keeps every request it receives, answering ``code`` the first
    ``failures`` times (the next hop)."""

    def __init__(self, failures: int = 0, code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE, *, logs: bool = False):
        bodies = self.bodies = []
        self.calls = 0

        def export(body, context):
            self.calls += 1
            if self.calls <= failures:
                context.abort(code, "not now")
            bodies.append(body)
            return b""

        services = ["opentelemetry.proto.collector.trace.v1.TraceService"]
        if logs:
            services.append("opentelemetry.proto.collector.logs.v1.LogsService")
        handlers = [grpc.method_handlers_generic_handler(service, {"Export": grpc.unary_unary_rpc_method_handler(export)})
                    for service in services]
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=handlers)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.url = f"http://127.0.0.1:{port}"

    def close(self):
        self.server.stop(None)


@pytest.mark.parametrize("raw", [False, True], ids=["redacted (default)", "raw (--forward-raw)"])
def test_forwarding_over_grpc_retries_and_redacts(make_collector, make_provider, tmp_path, raw):
    """``--forward-protocol grpc``: the official wire format to an OTLP/gRPC next hop (Jaeger, Tempo),
    retried on UNAVAILABLE, redacted unless asked otherwise."""
    next_hop = CapturingGrpcServer(failures=1)
    upstream = make_collector(tmp_path / "upstream", forward=next_hop.url, forward_protocol="grpc",
                              forward_redacted=not raw)
    tracer = make_provider(GrpcExporter(endpoint=f"127.0.0.1:{upstream.grpc_port}", insecure=True)).get_tracer("t")
    record_run_with_pii(tracer)
    wait_for(lambda: upstream.counters.snapshot()["forwarded"] == 3)
    forwarded = [ExportTraceServiceRequest.FromString(body) for body in next_hop.bodies]
    assert sum(len(scope.spans) for request in forwarded for rs in request.resource_spans for scope in rs.scope_spans) == 3
    everything = b"".join(next_hop.bodies)
    assert (CANARY_EMAIL.encode() in everything) is raw and (CANARY_CARD.encode() in everything) is raw
    assert next_hop.calls == len(next_hop.bodies) + 1  # the first attempt was refused, then retried
    next_hop.close()


def test_grpc_forward_refusals_are_counted(make_collector, make_provider, tmp_path):
    refusing = CapturingGrpcServer(failures=100, code=grpc.StatusCode.INVALID_ARGUMENT)
    upstream = make_collector(tmp_path / "upstream", forward=refusing.url, forward_protocol="grpc")
    tracer = make_provider(GrpcExporter(endpoint=f"127.0.0.1:{upstream.grpc_port}", insecure=True)).get_tracer("t")
    record_run_with_pii(tracer)
    wait_for(lambda: upstream.counters.snapshot()["forward_failed"] == 3)
    assert upstream.counters.snapshot()["forwarded"] == 0
    assert refusing.calls <= 3  # one attempt per request (at most 3 for 3 spans): INVALID_ARGUMENT is not retried
    refusing.close()


def test_grpc_target():
    assert grpc_target("http://tempo:4317") == ("tempo:4317", False)
    assert grpc_target("https://tempo.example") == ("tempo.example:4317", True)
    with pytest.raises(ValueError, match="grpc"):
        grpc_target("tempo:4317")


@pytest.mark.parametrize(("url", "expected"), [
    ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/logs"),
    ("https://otlp.example:443/v1/traces", "https://otlp.example:443/v1/logs"),
    ("http://gw:4318/otlp/v1/traces", "http://gw:4318/otlp/v1/logs"),
    ("http://gw:4318/custom/traces", None),  # no /v1/traces to swap: logs are not forwarded
])
def test_forward_url_of_logs(url, expected):
    assert forward_url(url, Signal.LOGS) == expected


# -- every field, every value type: never less redacted than the bundle ---------------------------

PHONE = "+44 20 7946 0958"
CARD_INT = 4111111111111111
PHONE_DOUBLE = 442079460958.0
IBAN = "GB82 WEST 1234 5698 7654 32"
IP = "203.0.113.77"
SLOT_NAME = "Zelda Canaryfield"  # no detector finds a name: only the slot policy (hash) hides it
TEXT_CANARIES = [CANARY_EMAIL, "canary.jane.doe", PHONE, "7946 0958", CANARY_CARD, str(CARD_INT), IBAN, "WEST 1234",
                 IP, SLOT_NAME, "Canaryfield", "jane\\u0040example"]


def _attributes(mapping):
    return [KeyValue(key=key, value=_any_value(value)) for key, value in mapping.items()]


def _pii_attributes(prefix: str) -> dict:
    """One canary in each value type and as a key."""
    return {
        f"{prefix}.string": f"mail {CANARY_EMAIL}, call {PHONE}, iban {IBAN}, ip {IP}",
        f"{prefix}.int": CARD_INT,
        f"{prefix}.double": PHONE_DOUBLE,
        f"{prefix}.bool": True,
        f"{prefix}.bytes": f"card {CANARY_CARD}".encode(),
        f"{prefix}.array": [CANARY_EMAIL, CARD_INT, [PHONE]],
        f"{prefix}.kvlist": {CANARY_EMAIL: {"phone": PHONE, "card": CARD_INT}},
        f"{prefix}.json": '{"jane\\u0040example.com": {"card": %d, "iban": "%s"}}' % (CARD_INT, IBAN),
        f"{prefix}.{CANARY_EMAIL}": "a key holding an address",
    }


def _resource_and_scope():
    from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource as ResourceProto

    resource = ResourceProto(attributes=_attributes({
        "service.name": f"svc-{CANARY_EMAIL}", "user.id": PHONE, "host.ip": IP, **_pii_attributes("resource"),
    }))
    scope = InstrumentationScope(name=f"scope {CANARY_EMAIL}", version=PHONE,
                                 attributes=_attributes(_pii_attributes("scope")))
    return resource, scope


def _pii_trace_request() -> ExportTraceServiceRequest:
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

    resource, scope = _resource_and_scope()
    span = Span(
        trace_id=bytes.fromhex("5b8efff798038103d269b633813fc60c"), span_id=bytes.fromhex("eee19b7ec3c1b174"),
        trace_state=f"vendor={CANARY_EMAIL}", name=f"execute_tool {CANARY_EMAIL}", kind=Span.SPAN_KIND_INTERNAL,
        start_time_unix_nano=1_700_000_000_000_000_000, end_time_unix_nano=1_700_000_001_000_000_000,
        attributes=_attributes({
            "session.id": f"call-{PHONE}", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
            "gen_ai.tool.call.arguments": '{"%s": {"card": %d}}' % (CANARY_EMAIL, CARD_INT),
            "gen_ai.tool.call.result": '{"iban": "%s"}' % IBAN,
            **_pii_attributes("span"),
        }),
        events=[
            Span.Event(time_unix_nano=1_700_000_000_500_000_000, name=f"note {CANARY_EMAIL}",
                       attributes=_attributes(_pii_attributes("event"))),
            Span.Event(time_unix_nano=1_700_000_000_600_000_000, name="otel_session.slot_write",
                       attributes=_attributes({"otel_session.slot.name": "guest",
                                               "otel_session.slot.value": orjson.dumps(SLOT_NAME).decode(),
                                               "otel_session.slot.previous": SLOT_NAME})),
        ],
        links=[Span.Link(trace_id=f"{CANARY_EMAIL}"[:16].encode(), span_id=b"4111111111111111"[:8],
                         trace_state=f"k={PHONE}", attributes=_attributes(_pii_attributes("link")))],
        status=Status(code=Status.STATUS_CODE_ERROR, message=f"failed for {CANARY_EMAIL} / {CANARY_CARD}"),
    )
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=resource, schema_url=f"https://schemas.example/{CANARY_EMAIL}",
        scope_spans=[ScopeSpans(scope=scope, spans=[span], schema_url=f"https://x.example/{PHONE}")],
    )])


def _pii_logs_request():
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs

    resource, scope = _resource_and_scope()
    records = [
        LogRecord(time_unix_nano=1_700_000_000_700_000_000, severity_text=f"INFO {PHONE}", event_name=CANARY_EMAIL,
                  body=_any_value(f"reach me at {CANARY_EMAIL} or {PHONE}"), attributes=_attributes(_pii_attributes("log"))),
        LogRecord(time_unix_nano=1_700_000_000_800_000_000, body=_any_value({CANARY_EMAIL: {"card": CARD_INT, "ip": IP}}),
                  trace_id=bytes.fromhex("5b8efff798038103d269b633813fc60c"), span_id=bytes.fromhex("eee19b7ec3c1b174")),
    ]
    return ExportLogsServiceRequest(resource_logs=[ResourceLogs(
        resource=resource, scope_logs=[ScopeLogs(scope=scope, log_records=records)])])


def _numbers(message) -> list:
    """Every int and double value anywhere in ``message``."""
    found = []
    for field, value in message.ListFields():
        if field.type != field.TYPE_MESSAGE:
            continue
        for item in (value if field.is_repeated else [value]):
            if field.message_type.full_name == "opentelemetry.proto.common.v1.AnyValue":
                which = item.WhichOneof("value")
                if which in ("int_value", "double_value"):
                    found.append(getattr(item, which))
            found += _numbers(item)
    return found


def _post(url: str, body: bytes) -> None:
    import urllib.request

    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/x-protobuf"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_forwarded_spans_and_logs_hold_no_canary_in_any_field_or_value_type(make_collector, tmp_path, protocol):
    """Canaries in every field (resource, scope, names, attributes, events, links, status, trace
    state, schema URLs, log bodies, event names, slot values) and every value type (string, int,
    double, bytes, array, kvlist key and value, JSON in a string, escaped): the next hop (a real
    loopback OTLP endpoint) gets none of them, and neither does the bundle."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    hop = OtlpHttpCapture() if protocol == "http/protobuf" else CapturingGrpcServer(logs=True)
    upstream = make_collector(tmp_path / "upstream", forward=hop.url, forward_protocol=protocol)
    traces, logs = _pii_trace_request(), _pii_logs_request()
    assert CANARY_EMAIL.encode() in traces.SerializeToString()  # the canaries are there to begin with
    _post(f"http://127.0.0.1:{upstream.http_port}/v1/traces", traces.SerializeToString())
    _post(f"http://127.0.0.1:{upstream.http_port}/v1/logs", logs.SerializeToString())
    wait_for(lambda: upstream.counters.snapshot()["forwarded"] == 1
             and upstream.counters.snapshot()["log_records_forwarded"] == 2)
    hop.close()
    assert len(hop.bodies) == 2
    forwarded = b"".join(hop.bodies)
    for canary in TEXT_CANARIES:
        assert canary.encode() not in forwarded, f"{canary!r} forwarded"
    decoded = [ExportTraceServiceRequest.FromString(body) for body in hop.bodies if b"execute_tool" in body]
    decoded += [ExportLogsServiceRequest.FromString(body) for body in hop.bodies if b"execute_tool" not in body]
    assert len(decoded) == 2
    numbers = [number for request in decoded for number in _numbers(request)]
    assert CARD_INT not in numbers and PHONE_DOUBLE not in numbers
    (span,) = decoded[0].resource_spans[0].scope_spans[0].spans
    assert span.name.startswith("execute_tool hmac-sha256:")  # a name's PII: a stable keyed hash
    assert span.trace_id == traces.resource_spans[0].scope_spans[0].spans[0].trace_id  # random ids kept
    slot_event = span.events[1]
    values = {kv.key: kv.value.string_value for kv in slot_event.attributes}
    assert orjson.loads(values["otel_session.slot.value"]).startswith("hmac-sha256:")
    sealed_bundles(tmp_path / "upstream")
    bundle = all_bytes(tmp_path / "upstream")
    for canary in TEXT_CANARIES:
        assert canary.encode() not in bundle, f"{canary!r} in the bundle"


def test_ids_holding_pii_are_hashed_in_the_bundle(make_collector, tmp_path):
    upstream = make_collector(tmp_path / "upstream")
    _post(f"http://127.0.0.1:{upstream.http_port}/v1/traces", _pii_trace_request().SerializeToString())
    sealed_bundles(tmp_path / "upstream")
    data = all_bytes(tmp_path / "upstream")
    assert PHONE.encode() not in data and CANARY_EMAIL.encode() not in data


class StuckNextHop:
    """A next hop that accepts connections and never answers (a hung backend)."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.connections = []
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                self.connections.append(self.listener.accept()[0])
            except OSError:
                return

    def close(self):
        self.listener.close()
        for connection in self.connections:
            connection.close()


def _request_of_bytes(size: int) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add(trace_id=b"\1" * 16, span_id=b"\2" * 8, name="big")
    span.attributes.add(key="pad").value.string_value = "p" * size
    return request


def test_a_stuck_next_hop_holds_at_most_the_queue_bytes_and_the_rest_is_dropped_and_counted(caplog):
    """Issue 31: the queue was bounded by 512 requests (8 GiB at 16 MiB each); 400 requests of
    1 MiB to a stuck next hop took the collector from 56 to 503 MiB. Now: bounded by bytes
    (default 64 MiB); a forward copy over the bound is dropped, counted and logged rate-limited."""
    hop = StuckNextHop()
    counters = Counters()
    forwarder = Forwarder(hop.url, counters=counters)
    request = _request_of_bytes(1024 * 1024)
    size = len(request.SerializeToString())
    sent = 100
    try:
        for _ in range(sent):
            forwarder.submit(request, 1)
        assert forwarder.queued_bytes <= DEFAULT_QUEUE_BYTES
        dropped = counters.snapshot()["forward_dropped"]
        assert sent - DEFAULT_QUEUE_BYTES // size - 1 <= dropped <= sent - DEFAULT_QUEUE_BYTES // size
        assert counters.refused_snapshot() == {(Refused.SPAN, QUEUE_FULL): dropped}
        lines = [r for r in caplog.records if QUEUE_FULL in r.getMessage()]
        assert len(lines) == 1 and lines[0].levelname == "WARNING", "one line per reason per 10 s, not one per drop"
        forwarder.shutdown(timeout_s=0.5)  # bounded although the next hop never answers
        assert forwarder.queued_bytes == 0
        wait_for(lambda: sum(counters.snapshot()[name] for name in ("forward_failed", "forward_dropped")) == sent, 30)
        assert counters.snapshot()["forwarded"] == 0
    finally:
        hop.close()


def test_bundles_never_wait_on_a_stuck_next_hop(make_collector, tmp_path):
    """The forward copy waits in its bounded queue; the bundle is written and sealed meanwhile."""
    hop = StuckNextHop()
    try:
        collector = make_collector(tmp_path / "bundles", forward=hop.url, forward_queue_bytes=3 * 1024 * 1024)
        url = f"http://127.0.0.1:{collector.http_port}/v1/traces"
        for number in range(6):
            request = _request_of_bytes(1024 * 1024)
            span = request.resource_spans[0].scope_spans[0].spans[0]
            span.trace_id = bytes([number + 1]) * 16
            span.attributes.add(key="session.id").value.string_value = f"big-{number}"
            response = requests.post(url, data=request.SerializeToString(),
                                     headers={"Content-Type": "application/x-protobuf"}, timeout=30)
            assert response.status_code == 200
        found = sealed_bundles(tmp_path / "bundles", count=6, timeout=30)
        assert all(bundle.status is BundleStatus.COMPLETE for bundle in found)
        assert collector.forwarder.queued_bytes <= 3 * 1024 * 1024
        assert collector.counters.snapshot()["forward_dropped"] >= 2
    finally:
        hop.close()
