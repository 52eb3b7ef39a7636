"""GenAI message events sent as OTLP *logs* (the older GenAI conventions' way, still the official
openai-v2 instrumentor's default) join the spans they were emitted in: the official OTLP log and
span exporters as clients, over gRPC and HTTP, in either order of arrival."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import pytest
from opentelemetry._logs import LogRecord
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    InMemoryLogRecordExporter,
    LogRecordExportResult,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_session.collector.importer import import_files
from otel_session.collector.otlp import to_json_line
from otel_session.bundle.read import BundleStatus
from otel_session.testing import wait_for

from .conftest import CANARY_EMAIL, all_bytes, sealed_bundles
from .test_receivers import post

SYSTEM = "You book tables at Chez Otel."
TOOL_CALL = {"id": "call_1", "type": "function",
             "function": {"name": "check_availability", "arguments": '{"day": "friday"}'}}
EXPECTED = [
    ("system", [("text", SYSTEM)]),
    ("user", [("text", "a table for two, I am [email]")]),
    ("assistant", [("tool_call", {"id": "call_1", "name": "check_availability", "arguments": {"day": "friday"}})]),
    ("tool", [("text", "19:00 is free")]),
    ("assistant", [("text", "Booked for 19:00.")]),
]
LOG_EVENTS = 8  # three for the first model call, five for the second


def event(name: str, body: dict) -> LogRecord:
    return LogRecord(event_name=name, body=body, attributes={"gen_ai.system": "openai"})


def record_conversation(tracer, logger) -> None:
    """An agent run whose model calls carry no content: their messages are log events, as the
    official openai-v2 instrumentor emits them without the latest-conventions opt-in."""
    chat = {"gen_ai.operation.name": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o-mini"}

    def history() -> list[LogRecord]:  # made in the span: a record takes the span context it is made in
        return [event("gen_ai.system.message", {"content": SYSTEM}),
                event("gen_ai.user.message", {"content": f"a table for two, I am {CANARY_EMAIL}"})]

    with tracer.start_as_current_span("invoke_agent booking", attributes={"session.id": "log-events"}):
        with tracer.start_as_current_span("chat gpt-4o-mini", attributes=chat):
            for record in history():
                logger.emit(record)
            logger.emit(LogRecord(body="an application log line in the span: not a GenAI event"))
            logger.emit(event("gen_ai.choice", {"index": 0, "finish_reason": "tool_calls",
                                                "message": {"role": "assistant", "tool_calls": [TOOL_CALL]}}))
        with tracer.start_as_current_span("execute_tool check_availability", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "check_availability",
            "gen_ai.tool.call.id": "call_1", "gen_ai.tool.call.result": "19:00 is free",
        }):
            pass
        with tracer.start_as_current_span("chat gpt-4o-mini", attributes=chat):
            for record in history():
                logger.emit(record)
            logger.emit(event("gen_ai.assistant.message", {"tool_calls": [TOOL_CALL]}))
            logger.emit(event("gen_ai.tool.message", {"content": "19:00 is free", "id": "call_1"}))
            logger.emit(event("gen_ai.choice", {"index": 0, "finish_reason": "stop",
                                                "message": {"role": "assistant", "content": "Booked for 19:00."}}))


def conversation(bundle) -> list[tuple[str, list]]:
    messages: dict[str, dict] = {}
    for record in bundle.events:
        if record["type"] == "message_started":
            messages[record["message_id"]] = {"role": record["payload"]["role"]}
        elif record["type"] == "message_finished":
            messages[record["message_id"]]["content"] = [
                (block["kind"], json.loads(block["text"]) if block["kind"] == "tool_call" else block["text"])
                for block in record["payload"]["content"]
            ]
    return [(message["role"], message["content"]) for message in messages.values()]


def exporters(collector, transport: str):
    if transport == "grpc":
        endpoint = f"127.0.0.1:{collector.grpc_port}"
        return GrpcSpanExporter(endpoint=endpoint, insecure=True), GrpcLogExporter(endpoint=endpoint, insecure=True)
    base = f"http://127.0.0.1:{collector.http_port}"
    return HttpSpanExporter(endpoint=f"{base}/v1/traces"), HttpLogExporter(endpoint=f"{base}/v1/logs")


@pytest.mark.parametrize("transport", ["grpc", "http"])
@pytest.mark.parametrize("first", ["logs", "spans"])
def test_log_events_join_their_spans_whichever_arrives_first(make_collector, bundle_root, transport, first):
    collector = make_collector(bundle_root, seal_after_s=2.0)
    span_exporter, log_exporter = exporters(collector, transport)
    resource = Resource.create({"service.name": "booking-agent"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter, schedule_delay_millis=600_000))
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(log_exporter, schedule_delay_millis=600_000))
    try:
        record_conversation(tracer_provider.get_tracer("agent"), logger_provider.get_logger("openai-v2"))
        flushes = [logger_provider.force_flush, tracer_provider.force_flush]
        for flush in flushes if first == "logs" else reversed(flushes):
            assert flush()
        (bundle,) = sealed_bundles(bundle_root)
    finally:
        tracer_provider.shutdown()
        logger_provider.shutdown()

    assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
    assert bundle.session_id == "log-events"
    assert conversation(bundle) == EXPECTED
    ats = [record["at"] for record in bundle.events]
    assert ats == sorted(ats)
    tools = [record["type"] for record in bundle.events if record["type"].startswith("tool_execution")]
    assert tools == ["tool_execution_started", "tool_execution_finished"]
    counters = collector.counters.snapshot()
    assert counters["log_events_bundled"] == LOG_EVENTS
    assert counters["log_records_ignored"] == 1
    assert counters["log_records_received"] == LOG_EVENTS + 1
    assert counters["log_events_unmatched"] == counters["log_records_rejected"] == 0
    assert CANARY_EMAIL.encode() not in all_bytes(bundle_root)


def recorded_in_memory() -> tuple[list, list]:
    """The conversation's spans and log records, as the SDK hands them to exporters."""
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracer_provider = TracerProvider(resource=Resource.create({"service.name": "booking-agent"}))
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider = LoggerProvider(resource=Resource.create({"service.name": "booking-agent"}))
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    record_conversation(tracer_provider.get_tracer("agent"), logger_provider.get_logger("openai-v2"))
    return list(spans.get_finished_spans()), list(logs.get_finished_logs())


@pytest.mark.parametrize("order", [("logs", "logs", "spans"), ("spans", "logs", "logs"), ("logs", "spans", "logs")])
def test_log_events_exported_again_add_no_message(make_collector, bundle_root, order):
    """The official exporters' retry of a log request whose answer they did not get sends the same
    records again: before their span came, after it, or on both sides of it."""
    collector = make_collector(bundle_root, seal_after_s=2.0)
    span_exporter, log_exporter = exporters(collector, "http")
    spans, logs = recorded_in_memory()
    for what in order:
        if what == "logs":
            assert log_exporter.export(logs) is LogRecordExportResult.SUCCESS
        else:
            assert span_exporter.export(spans) is SpanExportResult.SUCCESS
    (bundle,) = sealed_bundles(bundle_root)
    assert conversation(bundle) == EXPECTED
    counters = collector.counters.snapshot()
    assert (counters["log_events_bundled"], counters["log_events_duplicate"]) == (LOG_EVENTS, LOG_EVENTS)
    assert counters["log_events_unmatched"] == 0


def test_log_events_of_a_sealed_run_are_rejected_through_partial_success(make_collector, bundle_root):
    collector = make_collector(bundle_root)
    spans, logs = recorded_in_memory()
    response, _ = post(collector.http_port, encode_spans(spans).SerializeToString(),
                       content_type="application/x-protobuf")
    assert response.status == 200
    (bundle,) = sealed_bundles(bundle_root)
    assert conversation(bundle) == []  # model calls with no content of their own

    response, body = post(collector.http_port, to_json_line(encode_logs(logs)), path="/v1/logs")
    assert response.status == 200
    partial = orjson.loads(body)["partialSuccess"]
    assert partial["rejectedLogRecords"] == str(LOG_EVENTS)
    assert f"run {bundle.run_id} is already sealed" in partial["errorMessage"]
    assert collector.counters.snapshot()["log_records_rejected"] == LOG_EVENTS


def test_log_events_whose_span_never_comes_are_counted_unmatched(make_collector, bundle_root, caplog):
    collector = make_collector(bundle_root, hold_logs_s=0.3)
    _, logs = recorded_in_memory()
    response, body = post(collector.http_port, encode_logs(logs).SerializeToString(), path="/v1/logs",
                          content_type="application/x-protobuf")
    assert response.status == 200
    wait_for(lambda: collector.counters.snapshot()["log_events_unmatched"] == LOG_EVENTS)
    assert "never met their span" in caplog.text
    assert not list(bundle_root.rglob("events.ndjson"))


def test_malformed_log_payloads_get_clear_errors(collector):
    response, body = post(collector.http_port, b'{"resourceLogs": [{"scopeLogs": [{"logRecords": '
                                               b'[{"traceId": "zz", "spanId": "00"}]}]}]}', path="/v1/logs")
    assert response.status == 400
    assert "logRecord traceId is not hex" in orjson.loads(body)["message"]
    response, body = post(collector.http_port, b"\x0a\xff\xff\xff\xff\x0f garbage", path="/v1/logs",
                          content_type="application/x-protobuf")
    assert response.status == 400
    assert b"ExportLogsServiceRequest" in body


def test_import_joins_log_lines_to_span_lines(tmp_path, redactor):
    spans, logs = recorded_in_memory()
    path = tmp_path / "otlp.jsonl"
    path.write_bytes(to_json_line(encode_logs(logs)) + to_json_line(encode_spans(spans)))
    root = tmp_path / "bundles"
    report = import_files([path], root, redactor=redactor)
    assert report.ok, report.errors + report.rejected
    assert (report.spans, report.log_events, report.log_events_unmatched) == (4, LOG_EVENTS, 0)
    (bundle,) = sealed_bundles(root)
    assert conversation(bundle) == EXPECTED
    again = import_files([path], root, redactor=redactor)  # the logs line first: they wait, then meet a sealed run
    assert again.ok and again.runs_already_imported == {bundle.run_id}
    assert (again.log_events, again.log_events_unmatched) == (LOG_EVENTS, 0)
    assert CANARY_EMAIL.encode() not in all_bytes(root)


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_forwarded_logs_reach_the_next_collector_redacted(make_collector, tmp_path: Path, protocol):
    downstream = make_collector(tmp_path / "downstream")
    if protocol == "grpc":
        forward = f"http://127.0.0.1:{downstream.grpc_port}"
    else:  # the traces URL given: logs go to its /v1/logs
        forward = f"http://127.0.0.1:{downstream.http_port}/v1/traces"
    upstream = make_collector(tmp_path / "upstream", forward=forward, forward_protocol=protocol)
    span_exporter, log_exporter = exporters(upstream, "grpc")
    spans, logs = recorded_in_memory()
    assert log_exporter.export(logs) is LogRecordExportResult.SUCCESS
    assert span_exporter.export(spans) is SpanExportResult.SUCCESS
    (up,) = sealed_bundles(tmp_path / "upstream")
    (down,) = sealed_bundles(tmp_path / "downstream")
    assert conversation(up) == conversation(down) == EXPECTED
    wait_for(lambda: upstream.counters.snapshot()["log_records_forwarded"] == LOG_EVENTS + 1)
    assert downstream.counters.snapshot()["log_events_bundled"] == LOG_EVENTS
    for root in (tmp_path / "upstream", tmp_path / "downstream"):
        assert CANARY_EMAIL.encode() not in all_bytes(root)


@pytest.mark.parametrize("first", ["logs", "spans"])
def test_a_span_carrying_its_messages_keeps_them_and_log_events_add_nothing(make_collector, bundle_root, first):
    """``SPAN_AND_EVENT`` content capture: the same messages on the span and in a log event are
    journaled once, from the span, whichever arrives first; nothing is left unmatched."""
    collector = make_collector(bundle_root, seal_after_s=2.0)
    span_exporter, log_exporter = exporters(collector, "grpc")
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracer_provider = TracerProvider(resource=Resource.create({"service.name": "booking-agent"}))
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    inputs = '[{"role":"user","parts":[{"type":"text","content":"a table for two"}]}]'
    outputs = '[{"role":"assistant","parts":[{"type":"text","content":"For when?"}],"finish_reason":"stop"}]'
    with tracer_provider.get_tracer("agent").start_as_current_span("invoke_agent", attributes={"session.id": "both"}):
        with tracer_provider.get_tracer("agent").start_as_current_span("chat m", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.input.messages": inputs, "gen_ai.output.messages": outputs,
        }):
            logger_provider.get_logger("openai-v2").emit(LogRecord(
                event_name="gen_ai.client.inference.operation.details",
                attributes={"gen_ai.input.messages": json.loads(inputs), "gen_ai.output.messages": json.loads(outputs)},
            ))
    sends = [lambda: log_exporter.export(logs.get_finished_logs()) is LogRecordExportResult.SUCCESS,
             lambda: span_exporter.export(spans.get_finished_spans()) is SpanExportResult.SUCCESS]
    for send in sends if first == "logs" else reversed(sends):
        assert send()
    (bundle,) = sealed_bundles(bundle_root)
    assert conversation(bundle) == [("user", [("text", "a table for two")]), ("assistant", [("text", "For when?")])]
    counters = collector.counters.snapshot()
    assert (counters["log_events_bundled"], counters["log_events_unmatched"]) == (1, 0)


def test_concurrent_services_lose_no_log_event(make_collector, bundle_root):
    """Eight services at once, each exporting its runs' spans and log events in a different order
    (logs first, spans first, interleaved batches): every message reaches its bundle."""
    collector = make_collector(bundle_root, seal_after_s=3.0)
    runs_per_service, services = 5, 8

    def service(number: int) -> None:
        span_exporter, log_exporter = exporters(collector, "grpc" if number % 2 else "http")
        for _ in range(runs_per_service):
            spans, logs = recorded_in_memory()
            sends = [lambda: log_exporter.export(logs) is LogRecordExportResult.SUCCESS,
                     lambda: span_exporter.export(spans) is SpanExportResult.SUCCESS]
            for send in sends if number % 3 else reversed(sends):
                assert send()
        span_exporter.shutdown()
        log_exporter.shutdown()

    with ThreadPoolExecutor(services) as pool:
        list(pool.map(service, range(services)))
    found = sealed_bundles(bundle_root, services * runs_per_service, timeout=120)
    assert len(found) == services * runs_per_service
    for bundle in found:
        assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
        assert conversation(bundle) == EXPECTED
    counters = collector.counters.snapshot()
    assert counters["log_events_bundled"] == LOG_EVENTS * services * runs_per_service
    assert counters["log_events_unmatched"] == counters["log_records_rejected"] == 0


@pytest.mark.parametrize("split", [None, 2], ids=["one request", "split between two"])
def test_equal_log_events_are_two_messages_and_a_retry_none(tmp_path, redactor, split):
    """The same words twice in a history, stamped within one tick of a coarse clock, are two events,
    in one request or split between two (the batch processor's cut), not a retry: both are
    messages; each request sent again adds none."""
    from otel_session.collector.sink import BundleSink
    from otel_session.normalize import DetachedEvent, SpanData, SpanEventData
    from otel_session.bundle.read import iter_runs, read_bundle
    from otel_session.bundle.write import BundleWriter

    t0 = 1_764_453_121_000_000_000
    system = {"gen_ai.system": "openai"}
    history = [  # the caller said "yes" twice before the model's answer
        SpanEventData("gen_ai.assistant.message", t0 + 10, {**system, "content": "Friday?"}),
        SpanEventData("gen_ai.user.message", t0 + 10, {**system, "content": "yes"}),
        SpanEventData("gen_ai.user.message", t0 + 10, {**system, "content": "yes"}),
        SpanEventData("gen_ai.choice", t0 + 10, {**system, "index": 0, "finish_reason": "stop",
                                                  "message": {"role": "assistant", "content": "Booked."}}),
    ]
    writer = BundleWriter(tmp_path)
    sink = BundleSink(writer, redactor, seal_after_s=5)
    requests = [history] * 2 if split is None else [history[:split], history[split:]] * 2  # each sent twice
    for request in requests:
        assert sink.submit_log_events([DetachedEvent(0xABC, 2, event) for event in request]).accepted == len(request)
    chat = {"gen_ai.operation.name": "chat", "gen_ai.system": "openai", "session.id": "s1"}
    sink.submit([SpanData(0xABC, 2, 1, "chat", t0 + 5, t0 + 100, chat),
                 SpanData(0xABC, 1, None, "invoke_agent", t0, t0 + 200, {"session.id": "s1"})])
    sink.seal_all()
    writer.shutdown()
    (info,) = iter_runs(tmp_path)
    roles = [e["payload"]["role"] for e in read_bundle(info.path).events if e["type"] == "message_started"]
    assert roles == ["user", "user", "assistant"]  # the new inputs (after the last answer) and the reply
    assert sink.counters.snapshot()["log_events_duplicate"] == 4
