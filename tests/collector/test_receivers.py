"""The OTLP receivers with real clients: official exporters, hand-posted OTLP JSON, raw gRPC."""

from __future__ import annotations

import contextlib
import gzip
import os
import http.client
import logging
import socket
import threading

import grpc
import orjson
import pytest
from google.rpc import code_pb2, status_pb2
from opentelemetry import context
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from otel_session.collector.counters import Refused
from otel_session.collector.http_receiver import MAX_MESSAGE_BYTES, HttpReceiver
from otel_session.bundle.read import BundleStatus
from otel_session.bundle.write import BundleWriter

from .conftest import CANARY_CARD, CANARY_EMAIL, bundles, sealed_bundles, wait_for

TRACE_HEX = "5b8efff798038103d269b633813fc60c"
RUN_ID = "run-5b8efff7-9803-8103-d269-b633813fc60c"
_JSON = "application/json"


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


def otlp_json_request(
    session_id="call-42", trace_hex=TRACE_HEX, root=True, name="invoke_agent booking", span_hex="00000000000000a1",
    attributes=None,
):
    span = {
        "traceId": trace_hex,
        "spanId": span_hex,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": "1764453121000000000",
        "endTimeUnixNano": "1764453122000000000",
        "attributes": [{"key": "session.id", "value": {"stringValue": session_id}}] if session_id else [],
    }
    span["attributes"] += [{"key": key, "value": {"stringValue": value}} for key, value in (attributes or {}).items()]
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
        (b"{}", "application/json", {"Content-Encoding": "br"}, 415, "use gzip, deflate or none"),
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
    response, data = post(collector.http_port, b"{}", path="/v1/metrics")
    assert response.status == 404 and "set OTEL_METRICS_EXPORTER=none" in orjson.loads(data)["message"]
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
    assert collector.counters.refused_snapshot() == {(Refused.REQUEST, "malformed"): 1}


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
    assert collector.counters.refused_snapshot() == {(Refused.REQUEST, "too_many_requests"): 2}


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


# -- the HTTP server under load and against broken framing ----------------------------------------

CLIENTS = 100
REQUESTS_PER_CLIENT = 20


def test_a_hundred_concurrent_clients_lose_no_connection_and_no_span(collector, bundle_root, caplog):
    """Each client posts its run's 19 tool spans and then its root, each on a new connection, all at once."""
    caplog.set_level(logging.WARNING)
    start = threading.Barrier(CLIENTS)
    failures: list[str] = []
    statuses: list[int] = []

    def client(number: int) -> None:
        trace_hex = f"{number + 1:032x}"
        start.wait()
        for request in range(REQUESTS_PER_CLIENT):
            root = request == REQUESTS_PER_CLIENT - 1
            body = otlp_json_request(
                session_id=f"load-{number}" if root else None, trace_hex=trace_hex, root=root,
                name="invoke_agent load" if root else "execute_tool step", span_hex=f"{0xa0 + request + 1:016x}"
                if not root else "00000000000000a0",
                attributes=None if root else {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "step"},
            )
            try:
                statuses.append(post(collector.http_port, orjson.dumps(body))[0].status)
            except OSError as exc:  # ConnectionResetError, BrokenPipeError, RemoteDisconnected, timeouts
                failures.append(f"client {number} request {request}: {exc!r}")

    threads = [threading.Thread(target=client, args=(number,)) for number in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert failures == []
    assert statuses == [200] * CLIENTS * REQUESTS_PER_CLIENT
    found = sealed_bundles(bundle_root, count=CLIENTS, timeout=120)
    assert len(found) == CLIENTS
    tools = [sum(event["type"] == "tool_execution_started" for event in bundle.events) for bundle in found]
    assert tools == [REQUESTS_PER_CLIENT - 1] * CLIENTS
    assert collector.counters.snapshot()["bundled"] == CLIENTS * REQUESTS_PER_CLIENT
    assert [record.getMessage() for record in caplog.records if record.name.startswith("waitress")] == []


def raw_exchange(port, request: bytes, timeout=10, keep_alive=False):
    """Send ``request`` bytes as they are; return the parsed answer and whether the server then closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        response = http.client.HTTPResponse(sock)
        response.begin()
        body = response.read()
        if keep_alive:
            return response, body, False
        try:
            closed = sock.recv(1) == b""
        except ConnectionResetError:
            closed = True
        return response, body, closed


def head(content_type="application/x-protobuf", **headers):
    lines = ["POST /v1/traces HTTP/1.1", "Host: 127.0.0.1", f"Content-Type: {content_type}"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunked(body: bytes, size=7) -> bytes:
    parts = [body[i:i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in parts) + b"0\r\n\r\n"


@pytest.mark.parametrize(
    ("request_bytes", "status", "code", "message"),
    [
        (head(Content_Length="-1") + b"x", 400, code_pb2.INVALID_ARGUMENT, "Content-Length is invalid"),
        (head(Content_Length="12abc"), 400, code_pb2.INVALID_ARGUMENT, "Content-Length is invalid"),
        (head(Content_Length=str(MAX_MESSAGE_BYTES + 1)), 413, code_pb2.RESOURCE_EXHAUSTED, "exceeds the limit"),
        (head() + b"\x0a\x00", 411, code_pb2.INVALID_ARGUMENT, "Content-Length (or a chunked body) is required"),
        (head(Transfer_Encoding="chunked") + b"zz\r\nnot hex\r\n", 400, code_pb2.INVALID_ARGUMENT, "Bad Request"),
        (head(Transfer_Encoding="gzip"), 501, code_pb2.UNIMPLEMENTED, "Transfer-Encoding"),
    ],
    ids=["negative-length", "garbage-length", "oversized-length", "missing-length", "broken-chunks", "unknown-te"],
)
def test_malformed_framing_gets_an_otlp_error_and_a_closed_connection(collector, caplog, request_bytes, status, code, message):
    with caplog.at_level(logging.DEBUG):
        response, body, closed = raw_exchange(collector.http_port, request_bytes)
    assert response.status == status and response.getheader("Content-Type") == "application/x-protobuf"
    error = status_pb2.Status.FromString(body)
    assert error.code == code and message in error.message
    assert closed  # never a connection left hanging on a body it cannot frame
    assert [record for record in caplog.records if record.exc_info or record.levelno >= logging.ERROR] == []


def test_a_chunked_body_is_taken_and_an_oversized_one_refused(collector, bundle_root):
    body = orjson.dumps(otlp_json_request())
    response, data, _ = raw_exchange(
        collector.http_port, head(_JSON, Transfer_Encoding="chunked") + chunked(body), keep_alive=True
    )
    assert response.status == 200 and orjson.loads(data) == {}
    (bundle,) = sealed_bundles(bundle_root)
    assert bundle.run_id == RUN_ID
    huge = head(_JSON, Transfer_Encoding="chunked") + chunked(b" " * (MAX_MESSAGE_BYTES + 1), size=1 << 20)
    response, data, closed = raw_exchange(collector.http_port, huge)
    assert response.status == 413 and "exceeds the limit" in orjson.loads(data)["message"] and closed


def test_a_stalled_client_holds_no_worker_and_hears_408(collector, bundle_root):
    server = HttpReceiver(collector.receiver, "127.0.0.1:0", threads=1, client_timeout_s=1)
    server.start()
    try:
        stalled = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(3)]
        for sock in stalled:  # headers promise 100 bytes; 10 come, then nothing
            sock.sendall(head(_JSON, Content_Length="100") + b"{" * 10)
        for number in range(5):  # the one worker is free for everyone else
            body = orjson.dumps(otlp_json_request(trace_hex=f"{number + 1:032x}", session_id=f"s-{number}"))
            assert post(server.port, body)[0].status == 200
        for sock in stalled:  # within client_timeout_s plus one cleanup interval: 408, then closed
            response = http.client.HTTPResponse(sock)
            response.begin()
            error = orjson.loads(response.read())
            assert response.status == 408 and error["code"] == code_pb2.DEADLINE_EXCEEDED
            assert "no complete request within 1 s" in error["message"]
            assert sock.recv(1) == b""
            sock.close()
    finally:
        server.stop()
    assert len(sealed_bundles(bundle_root, count=5)) == 5


# -- answers never echo input values or server paths (issue 15 §7) -------------------------------

PII_NAME = f"call {CANARY_EMAIL} card {CANARY_CARD}"


def protobuf_span_request(name=PII_NAME, trace_id=b"\0" * 16, session_id=CANARY_EMAIL):
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.name, span.trace_id, span.span_id = name, trace_id, b"\0\0\0\0\0\0\0\xa1"
    span.start_time_unix_nano = span.end_time_unix_nano = 1764453121000000000
    attribute = span.attributes.add()
    attribute.key, attribute.value.string_value = "session.id", session_id
    return request.SerializeToString()


def grpc_export(port, body: bytes) -> str:
    """The details of a refused export, or the partial_success message of an accepted one."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        export = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            response_deserializer=ExportTraceServiceResponse.FromString,
        )
        try:
            return export(body, timeout=5).partial_success.error_message
        except grpc.RpcError as error:
            return error.details()


def test_no_answer_echoes_an_input_value_or_a_server_path(make_collector, tmp_path):
    answers: list[str] = []

    def answer_of(port, body, content_type=_JSON, headers=None, path="/v1/traces", expect=None):
        response, data = post(port, body, content_type, headers, path)
        assert expect is None or response.status == expect, (response.status, data)
        answers.append(data.decode("latin-1"))

    collector = make_collector(tmp_path / "bundles")
    port = collector.http_port
    invalid = otlp_json_request(session_id=CANARY_EMAIL, name=PII_NAME, trace_hex="0" * 32)
    answer_of(port, orjson.dumps(invalid), expect=400)
    answer_of(port, protobuf_span_request(), "application/x-protobuf", expect=400)
    answers.append(grpc_export(collector.grpc_port, protobuf_span_request()))
    answer_of(port, b"{}", path=f"/v1/{CANARY_EMAIL}", expect=404)
    answer_of(port, b"{}", f"text/{CANARY_EMAIL}", expect=415)
    answer_of(port, b"{}", headers={"Content-Encoding": CANARY_EMAIL}, expect=415)
    answer_of(port, b"{}", headers={"Content-Length": CANARY_CARD.replace(" ", "")[:-1] + "x"}, expect=400)
    answers.append(raw_exchange(port, head(_JSON, Transfer_Encoding=CANARY_EMAIL))[1].decode("latin-1"))
    get = f"GET /v1/traces?{CANARY_EMAIL} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    answers.append(raw_exchange(port, get, keep_alive=True)[1].decode())
    folded = f"POST /v1/traces HTTP/1.1\r\n {CANARY_EMAIL}\r\nHost: x\r\n\r\n".encode()  # waitress quotes the line
    answers.append(raw_exchange(port, folded)[1].decode("latin-1"))
    lowercase = f"{CANARY_EMAIL.split('@')[0]} /v1/traces HTTP/1.1\r\nHost: x\r\n\r\n".encode()  # and the method
    answers.append(raw_exchange(port, lowercase)[1].decode("latin-1"))

    # partial_success: a sealed run (known in memory, then only from disk), a locked one, an unwritable one
    sealed = otlp_json_request(session_id=CANARY_EMAIL, name=PII_NAME)
    answer_of(port, orjson.dumps(sealed), expect=200)
    sealed_bundles(tmp_path / "bundles")
    wait_for(lambda: collector.sink.open_run_count == 0)
    late = otlp_json_request(session_id=CANARY_EMAIL, root=False, name=PII_NAME, span_hex="00000000000000a2")
    answer_of(port, orjson.dumps(late), expect=200)
    restarted = make_collector(tmp_path / "bundles")
    answer_of(restarted.http_port, orjson.dumps(late), expect=200)
    answer_of(restarted.http_port, protobuf_span_request(trace_id=bytes.fromhex(TRACE_HEX)), "application/x-protobuf")
    answers.append(grpc_export(restarted.grpc_port, protobuf_span_request(trace_id=bytes.fromhex(TRACE_HEX))))
    other = BundleWriter(tmp_path / "bundles", identifier=collector.redactor.identifier)  # the same stored id
    held = other.open_run(session_id=CANARY_EMAIL, run_id="run-00000000-0000-0000-0000-0000000000b1")
    try:
        locked = otlp_json_request(session_id=CANARY_EMAIL, name=PII_NAME, trace_hex="000000000000000000000000000000b1")
        answer_of(port, orjson.dumps(locked), expect=200)
    finally:
        held.close()
        other.shutdown()
    blocked_root = tmp_path / "blocked"
    blocked_root.mkdir()
    (blocked_root / "sessions").write_text("a file where the sessions directory goes")
    answer_of(make_collector(blocked_root).http_port, orjson.dumps(sealed), expect=200)

    rejections = [answer for answer in answers if "rejectedSpans" in answer or "run-" in answer]
    assert len(rejections) >= 6, answers  # the partial_success answers above all say why
    for answer in answers:
        for canary in (CANARY_EMAIL.split("@")[0], CANARY_CARD, CANARY_CARD.replace(" ", "")[:-1], str(tmp_path), "/tmp/"):
            assert canary not in answer, (canary, answer)


def test_a_busy_http_port_is_named_with_its_flag(make_collector, bundle_root):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(OSError) as error:
            make_collector(bundle_root, grpc_address=None, http_address=address)
    assert str(error.value) == f"cannot listen for OTLP/HTTP on {address} (--http): Address already in use"


# -- hostile connections: slowloris (issue 31 §5) ------------------------------------------------


class SlowSockets:
    """``count`` connections that send a request's headers one byte per ``every_s`` and never
    finish them (slowloris); the bytes keep coming, so no idle timeout ever fires."""

    def __init__(self, port: int, count: int, every_s: float = 0.5):
        self.sockets = []
        for _ in range(count):
            sock = socket.socket()
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", int(port)))
            self.sockets.append(sock)
        self._every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._trickle, daemon=True)
        self._thread.start()

    def _trickle(self):
        header = b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 100_000
        position = 0
        while not self._stop.wait(self._every_s):
            for sock in self.sockets:
                try:
                    sock.send(header[position:position + 1])
                except OSError:
                    pass  # closed by the collector, or not connected yet
            position += 1

    def connected(self) -> bool:
        """Every one is connected (accepted, or waiting in the listener's backlog)."""
        for sock in self.sockets:
            try:
                sock.getpeername()
            except OSError:
                return False
        return True

    def close(self):
        self._stop.set()
        self._thread.join(5)
        for sock in self.sockets:
            sock.close()


@pytest.fixture
def many_descriptors():
    """The slow sockets and the collector's ends of them share this process's descriptors."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 10_000:
        pytest.skip(f"needs 10,000 open files (hard limit {hard})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def export_one_span(port: int) -> SpanExportResult:
    """A well-behaved client: the official OTLP/HTTP exporter, one span."""
    exporter = HttpExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout=30)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    results = []
    real_export = exporter.export
    exporter.export = lambda spans: results.append(real_export(spans)) or results[-1]
    with provider.get_tracer("t").start_as_current_span("invoke_agent polite", attributes={"session.id": "polite"}):
        pass
    provider.shutdown()
    return results[0]


def test_two_thousand_slow_sockets_leave_room_for_a_well_behaved_client(make_collector, bundle_root, many_descriptors):
    """1,100 sockets trickling header bytes held every OTLP/HTTP slot (limit 1,000) and normal
    clients got no answer. The limit (4,096) is above what an open-files limit of 20,000 allows."""
    collector = make_collector(bundle_root)
    slow = SlowSockets(collector.http_port, 2000)
    try:
        wait_for(slow.connected, 60)
        assert export_one_span(collector.http_port) is SpanExportResult.SUCCESS
    finally:
        slow.close()


def test_past_the_connection_limit_a_newcomer_replaces_the_slowest_header_sender(make_collector, bundle_root):
    """At the limit, accepting goes on: the connection waiting longest for its headers is closed
    (counted), never one being served; a well-behaved client gets in."""
    collector = make_collector(bundle_root, http_connection_limit=50)
    slow = SlowSockets(collector.http_port, 200)
    try:
        assert export_one_span(collector.http_port) is SpanExportResult.SUCCESS
        refused = collector.counters.refused_snapshot()
        assert refused[(Refused.CONNECTION, "connection_evicted")] >= 150
    finally:
        slow.close()
    (bundle,) = sealed_bundles(bundle_root)
    assert bundle.session_id == "polite"


def test_headers_that_trickle_past_the_header_deadline_hear_408(make_collector, bundle_root):
    """The idle timeout only fired for silent clients; a byte a second kept a connection forever."""
    collector = make_collector(bundle_root, http_header_timeout_s=1)
    with socket.create_connection(("127.0.0.1", collector.http_port), timeout=30) as sock:
        stop = threading.Event()

        def trickle():
            for byte in head(_JSON, Content_Length="100")[:-4]:
                if stop.wait(0.2):
                    return
                try:
                    sock.send(bytes([byte]))
                except OSError:
                    return

        sender = threading.Thread(target=trickle, daemon=True)
        sender.start()
        response = http.client.HTTPResponse(sock)
        response.begin()  # within the deadline plus a maintenance pass; the test's timeout is 30 s
        error = status_pb2.Status.FromString(response.read())  # no Content-Type read yet: protobuf
        stop.set()
        sender.join(5)
    assert response.status == 408 and error.code == code_pb2.DEADLINE_EXCEEDED
    assert "headers not complete within 1 s" in error.message
    assert collector.counters.refused_snapshot()[(Refused.CONNECTION, "header_timeout")] == 1


def test_out_of_descriptors_the_listener_pauses_instead_of_spinning(collector, bundle_root, caplog):
    """An accept that fails for want of a descriptor left the connection queued and the listener
    readable: waitress retried and logged a traceback on every pass of its loop."""
    import resource

    clients = [socket.socket() for _ in range(3)]  # their descriptors exist before the limit drops
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    highest = max(int(name) for name in os.listdir("/proc/self/fd"))
    fillers = []
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 1, hard))
        with contextlib.suppress(OSError):
            while True:  # the free numbers below the limit, taken: no descriptor left to accept with
                fillers.append(os.open(os.devnull, os.O_RDONLY))
        for client in clients:
            client.settimeout(30)
            client.connect(("127.0.0.1", int(collector.http_port)))  # into the backlog: connect needs no new descriptor
        wait_for(lambda: collector.counters.refused_snapshot().get((Refused.CONNECTION, "out_of_descriptors")), 30)
    finally:
        for filler in fillers:
            os.close(filler)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    body = orjson.dumps(otlp_json_request())
    clients[0].sendall(head(_JSON, Content_Length=str(len(body))) + body)  # accepted once descriptors return
    response = http.client.HTTPResponse(clients[0])
    response.begin()
    assert response.status == 200
    for client in clients:
        client.close()
    assert [r for r in caplog.records if r.name.startswith("waitress") and r.levelno >= logging.WARNING] == []
    assert sum("out_of_descriptors" in r.getMessage() for r in caplog.records) <= 2, "rate-limited"


class SlowBodies(SlowSockets):
    """Connections whose headers are sent whole at once and whose body then trickles, one byte per
    ``every_s`` (the headers are done, so no header deadline applies)."""

    def __init__(self, port: int, count: int, every_s: float = 0.5):
        self.sockets = []
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
            sock.sendall(head(_JSON, Content_Length="100000"))
            sock.setblocking(False)
            self.sockets.append(sock)
        self._every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._trickle, daemon=True)
        self._thread.start()

    def _trickle(self):
        while not self._stop.wait(self._every_s):
            for sock in self.sockets:
                try:
                    sock.send(b" ")
                except OSError:
                    pass


def test_past_the_limit_a_body_trickling_past_the_header_deadline_makes_room(make_collector, bundle_root):
    """A client whose headers are done but whose body trickles was never evictable: enough of them
    held every slot. Past the limit, one whose request began over the header deadline ago is."""
    collector = make_collector(bundle_root, http_connection_limit=50, http_header_timeout_s=1)
    slow = SlowBodies(collector.http_port, 48)  # with the listener and its wake-up pipe: the limit
    server = collector._http_server._server
    try:
        wait_for(lambda: len(server.active_channels) == 48 and all(
            channel.request is not None and channel.request.headers_finished for channel in list(server.active_channels.values())
        ), 30)
        assert export_one_span(collector.http_port) is SpanExportResult.SUCCESS
        assert collector.counters.refused_snapshot()[(Refused.CONNECTION, "connection_evicted")] >= 1
    finally:
        slow.close()
