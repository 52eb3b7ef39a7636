"""The OTLP receivers with real clients: official exporters, hand-posted OTLP JSON, raw gRPC."""

from __future__ import annotations

import gzip
import http.client
import threading

import grpc
import orjson
import pytest
from google.rpc import code_pb2, status_pb2
from opentelemetry import context
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from otel_session.collector.server import MAX_MESSAGE_BYTES
from otel_session.read import BundleStatus
from otel_session.write import BundleWriter

from .conftest import bundles, sealed_bundles, wait_for

TRACE_HEX = "5b8efff798038103d269b633813fc60c"
RUN_ID = "run-5b8efff7-9803-8103-d269-b633813fc60c"


def record_agent_run(tracer, session_id="call-42"):
    """A root with a chat span and a tool span; children end (and export) before the root."""
    with tracer.start_as_current_span(
        "invoke_agent booking",
        attributes={"session.id": session_id, "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "booking"},
    ):
        with tracer.start_as_current_span("chat mock-gpt", attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"a table for two"}]}]',
            "gen_ai.output.messages": '[{"role":"assistant","parts":[{"type":"text","content":"Which day?"}]}]',
        }):
            pass
        with tracer.start_as_current_span("execute_tool check_availability", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "check_availability",
            "gen_ai.tool.call.arguments": '{"party_size": 2}', "gen_ai.tool.call.result": "free",
        }):
            pass


def assert_agent_run_bundle(bundle, session_id="call-42"):
    assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
    assert bundle.session_id == session_id
    assert bundle.capture["order"] == "event_time"
    types = [event["type"] for event in bundle.events]
    assert types == [
        "run_started", "message_started", "message_finished", "message_started", "message_finished",
        "tool_execution_started", "tool_execution_finished", "run_finished",
    ]
    assert [event["seq"] for event in bundle.events] == list(range(1, 9))
    ats = [event["at"] for event in bundle.events]
    assert ats == sorted(ats)


@pytest.mark.parametrize("transport", ["grpc", "http"])
def test_official_exporters_record_one_bundle_per_trace(collector, bundle_root, make_provider, transport):
    if transport == "grpc":
        exporter = GrpcExporter(endpoint=f"127.0.0.1:{collector.grpc_port}", insecure=True)
    else:
        exporter = HttpExporter(endpoint=f"http://127.0.0.1:{collector.http_port}/v1/traces")
    record_agent_run(make_provider(exporter).get_tracer("test"))
    (bundle,) = sealed_bundles(bundle_root)
    assert_agent_run_bundle(bundle)
    assert bundle.manifest["service"] == "svc" and bundle.manifest["agent"] == "booking"
    assert collector.counters.snapshot()["bundled"] == 3


def test_two_services_one_trace_land_in_one_bundle(collector, bundle_root, make_provider):
    frontend = make_provider(GrpcExporter(endpoint=f"127.0.0.1:{collector.grpc_port}", insecure=True), "frontend")
    backend = make_provider(HttpExporter(endpoint=f"http://127.0.0.1:{collector.http_port}/v1/traces"), "tools")
    carrier: dict[str, str] = {}
    with frontend.get_tracer("fe").start_as_current_span(
        "invoke_agent booking", attributes={"session.id": "call-7", "gen_ai.operation.name": "invoke_agent"}
    ):
        TraceContextTextMapPropagator().inject(carrier)

        def remote_service():  # another service: only the propagated headers cross over
            token = context.attach(TraceContextTextMapPropagator().extract(carrier))
            try:
                with backend.get_tracer("be").start_as_current_span("execute_tool lookup", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}):
                    pass
            finally:
                context.detach(token)

        worker = threading.Thread(target=remote_service)
        worker.start()
        worker.join()
    (bundle,) = sealed_bundles(bundle_root)
    assert bundle.status is BundleStatus.COMPLETE
    assert [event["type"] for event in bundle.events] == [
        "run_started", "tool_execution_started", "tool_execution_finished", "run_finished"]
    assert bundle.manifest["session_id"] == "call-7"


def otlp_json_request(session_id="call-42", trace_hex=TRACE_HEX, root=True, name="invoke_agent booking", span_hex="00000000000000a1"):
    span = {
        "traceId": trace_hex,
        "spanId": span_hex,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": "1764453121000000000",
        "endTimeUnixNano": "1764453122000000000",
        "attributes": [{"key": "session.id", "value": {"stringValue": session_id}}] if session_id else [],
    }
    if not root:
        span["parentSpanId"] = "00000000000000a0"
    return {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "hand"}, "spans": [span]}]}]}


def post(port, body, content_type="application/json", headers=None, path="/v1/traces"):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("POST", path, body=body, headers={"Content-Type": content_type, **(headers or {})})
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response, data


def test_otlp_json_posted_by_hand_gzipped(collector, bundle_root):
    body = gzip.compress(orjson.dumps(otlp_json_request()))
    response, data = post(collector.http_port, body, headers={"Content-Encoding": "gzip"})
    assert response.status == 200 and orjson.loads(data) == {}
    (bundle,) = sealed_bundles(bundle_root)
    assert bundle.run_id == RUN_ID
    assert [event["type"] for event in bundle.events] == ["run_started", "run_finished"]


def test_spans_for_a_sealed_run_are_rejected_through_partial_success(make_collector, bundle_root):
    collector = make_collector(bundle_root)
    assert post(collector.http_port, orjson.dumps(otlp_json_request()))[0].status == 200
    sealed_bundles(bundle_root)
    wait_for(lambda: collector.sink.open_run_count == 0)
    late = otlp_json_request(root=False, name="late child", span_hex="00000000000000a2")
    response, data = post(collector.http_port, orjson.dumps(late))
    assert response.status == 200
    partial = orjson.loads(data)["partialSuccess"]
    assert partial["rejectedSpans"] == "1" and "already sealed" in partial["errorMessage"]
    assert collector.counters.snapshot()["rejected"] == 1
    restarted = make_collector(bundle_root)  # knows the sealed run only from disk
    partial = orjson.loads(post(restarted.http_port, orjson.dumps(late))[1])["partialSuccess"]
    assert partial["rejectedSpans"] == "1" and "a sealed bundle never changes" in partial["errorMessage"]


def test_a_run_locked_by_another_collector_is_rejected_explicitly(collector, bundle_root):
    other = BundleWriter(bundle_root)
    held = other.open_run(session_id="call-42", run_id=RUN_ID)
    try:
        response, data = post(collector.http_port, orjson.dumps(otlp_json_request()))
        partial = orjson.loads(data)["partialSuccess"]
        assert response.status == 200 and partial["rejectedSpans"] == "1"
        assert "one writer per run" in partial["errorMessage"]
    finally:
        held.close()
        other.shutdown()


def test_spans_without_a_session_become_a_run_of_a_session_of_their_own(make_collector, bundle_root):
    collector = make_collector(bundle_root, seal_after_s=0.1, hold_unrouted_s=0.1)
    response, _ = post(collector.http_port, orjson.dumps(otlp_json_request(session_id=None)))
    assert response.status == 200
    (bundle,) = sealed_bundles(bundle_root)
    assert bundle.manifest["session_id"] == bundle.manifest["run_id"] and bundle.manifest["session_derived"] is True
    assert collector.counters.snapshot()["no_session"] == 0


def test_a_child_without_session_joins_when_its_root_names_one(collector, bundle_root):
    child = otlp_json_request(session_id=None, root=False, name="GET /slots", span_hex="00000000000000a2")
    post(collector.http_port, orjson.dumps(child))
    post(collector.http_port, orjson.dumps(otlp_json_request()))
    (bundle,) = sealed_bundles(bundle_root)
    assert collector.counters.snapshot()["bundled"] == 2 and collector.counters.snapshot()["no_session"] == 0


@pytest.mark.parametrize(
    ("body", "content_type", "headers", "status", "message"),
    [
        (b"\x0a\xff\xff\xff\xff\x0f", "application/x-protobuf", {}, 400, "not a protobuf"),
        (b"{oops", "application/json", {}, 400, "not JSON"),
        (b"not gzip", "application/json", {"Content-Encoding": "gzip"}, 400, "not valid gzip"),
        (b"{}", "text/plain", {}, 415, "use application/x-protobuf or application/json"),
        (b"{}", "application/json", {"Content-Encoding": "br"}, 415, "use gzip or none"),
    ],
)
def test_malformed_http_requests_get_clear_errors(collector, body, content_type, headers, status, message):
    response, data = post(collector.http_port, body, content_type, headers)
    assert response.status == status
    if response.getheader("Content-Type") == "application/x-protobuf":  # errors answer in the request's encoding
        error = status_pb2.Status.FromString(data)
        assert error.code == code_pb2.INVALID_ARGUMENT and message in error.message
    else:
        assert message in orjson.loads(data)["message"]


def test_oversized_and_misrouted_http_requests(collector):
    connection = http.client.HTTPConnection("127.0.0.1", collector.http_port, timeout=10)
    connection.putrequest("POST", "/v1/traces")
    connection.putheader("Content-Type", "application/json")
    connection.putheader("Content-Length", str(MAX_MESSAGE_BYTES + 1))
    connection.endheaders()
    response = connection.getresponse()
    assert response.status == 413 and b"limit" in response.read()
    connection.close()
    assert post(collector.http_port, b"{}", path="/v1/metrics")[0].status == 404
    bomb = gzip.compress(b" " * (MAX_MESSAGE_BYTES + 10))
    assert post(collector.http_port, bomb, headers={"Content-Encoding": "gzip"})[0].status == 413


def test_malformed_grpc_payload_is_invalid_argument(collector):
    with grpc.insecure_channel(f"127.0.0.1:{collector.grpc_port}") as channel:
        export = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            response_deserializer=ExportTraceServiceResponse.FromString,
        )
        with pytest.raises(grpc.RpcError) as error:
            export(b"\x0a\xff\xff\xff\xff\x0f", timeout=5)
    assert error.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "not a protobuf ExportTraceServiceRequest" in error.value.details()


def test_overload_answers_retryable_status_codes(collector):
    slots = collector.receiver._slots
    taken = 0
    while slots.acquire(blocking=False):
        taken += 1
    try:
        response, data = post(collector.http_port, orjson.dumps(otlp_json_request()))
        assert response.status == 429 and response.getheader("Retry-After") == "1"
        with grpc.insecure_channel(f"127.0.0.1:{collector.grpc_port}") as channel:
            export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
            with pytest.raises(grpc.RpcError) as error:
                export(b"", timeout=5)
        assert error.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        for _ in range(taken):
            slots.release()
    assert post(collector.http_port, orjson.dumps(otlp_json_request()))[0].status == 200


def test_shutdown_seals_runs_without_a_root_as_interrupted(make_collector, bundle_root):
    collector = make_collector(bundle_root, seal_after_s=60)
    child = otlp_json_request(root=False, name="execute_tool x", span_hex="00000000000000a2")
    child["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"].append(
        {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}})
    post(collector.http_port, orjson.dumps(child))
    collector.stop()
    (bundle,) = bundles(bundle_root)
    assert bundle.status is BundleStatus.COMPLETE
    assert bundle.events[-1]["type"] == "run_finished" and bundle.events[-1]["payload"] == {
        "status": "interrupted", "reason": "collector_stopped"}
