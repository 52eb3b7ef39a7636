"""Values nested deeper than JSON codecs go (issue 14 §2): recorded cut at ``journal.MAX_DEPTH``
with an explicit marker and a reader diagnostic, on every path (API, collector over gRPC and HTTP,
import); a journal written by hand with such values reads, replays and is served by the viewer."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_session
from otel_session.cli import main
from otel_session.collector.otlp import to_json_line
from otel_session.replay.facts import build_session_facts
from otel_session.core.journal import DEPTH_MARKER, MAX_DEPTH, decode_line, encode_json, encode_record
from otel_session.bundle.read import BundleStatus, JournalTail, read_bundle
from otel_session.redact import RedactionPolicy, Redactor
from otel_session.replay.reduce import Replayer, canonical_json
from otel_session.testing import bundles, capture_bundle, running_collectors, wait_for
from otel_session.viewer import create_app

DEPTHS = [300, 1000, 5000]


def nested(depth: int, leaf: object = "leaf") -> object:
    """A value ``depth`` levels deep, objects and arrays alternating."""
    value = leaf
    for level in range(depth):
        value = {"k": value} if level % 2 else [value]
    return value


def depth_of(value: object) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            deepest = max(deepest, level)
            stack += [(child, level + 1) for child in item.values()]
        elif isinstance(item, list):
            deepest = max(deepest, level)
            stack += [(child, level + 1) for child in item]
    return deepest


def record(seq: int, event_type: str, payload: dict, **ids) -> dict:
    return {"seq": seq, "at": f"2026-11-29T22:52:{seq:02d}.000000Z", "type": event_type, "session_id": "deep",
            "run_id": RUN_ID, **ids, "payload": payload}


RUN_ID = f"run-{uuid.UUID(int=0xDEE9)}"


# -- the codec ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("depth", "container"), [(300, list), (1000, list), (5000, list), (100_000, list),
                                                  (300, tuple), (1000, tuple)])
# orjson 3.13 puts no limit on tuples: a few thousand nested tuples overflow its C stack (a crash)
def test_encode_record_cuts_values_past_the_depth_and_says_so(depth, container):
    value: object = "leaf"
    for _ in range(depth):
        value = container([value])
    line = encode_record(record(1, "tool_execution_started", {"name": "t", "arguments": value}))
    decoded = decode_line(line)
    assert decoded["truncated"] == "depth" and depth_of(decoded) == MAX_DEPTH
    assert DEPTH_MARKER.encode() in line
    assert decode_line(encode_record(decoded)) == decoded  # what a reader returns encodes again, unchanged


def test_values_within_the_depth_are_untouched():
    fits = nested(MAX_DEPTH - 2)  # the record and its payload take two levels
    line = encode_record(record(1, "tool_execution_started", {"name": "t", "arguments": fits}))
    decoded = decode_line(line)
    assert "truncated" not in decoded and decoded["payload"]["arguments"] == fits
    cut = decode_line(encode_record(record(1, "tool_execution_started", {"name": "t", "arguments": nested(MAX_DEPTH - 1)})))
    assert cut["truncated"] == "depth" and depth_of(cut) == MAX_DEPTH


@pytest.mark.parametrize("depth", DEPTHS)
def test_encode_json_of_one_value_never_raises(depth):
    text = encode_json({"q": nested(depth)})
    assert depth_of(orjson.loads(text)) == MAX_DEPTH and DEPTH_MARKER.encode() in text


@pytest.mark.parametrize("depth", DEPTHS)
def test_decode_line_cuts_a_hand_written_deep_line(depth):
    raw = orjson.dumps(record(1, "slot_write", {"slot": "s", "value": "]}[{\\\"", "previous": None})).replace(
        b'"previous":null', b'"previous":' + b'[{"a":' * depth + b'"x]"' + b"}]" * depth)
    decoded = decode_line(raw)
    assert decoded["truncated"] == "depth" and depth_of(decoded) <= MAX_DEPTH
    assert decoded["payload"]["value"] == "]}[{\\\""  # brackets inside strings are text, not structure
    orjson.dumps(decoded)


# -- a journal written by hand: reader, reducer, facts, viewer -----------------------------------


@pytest.fixture
def deep_bundle(tmp_path: Path) -> Path:
    """A complete bundle written by hand whose tool arguments, result, slot and content nest 300,
    1,000 and 5,000 levels deep (no encoder of this project wrote it)."""
    run_dir = tmp_path / "bundles" / "sessions" / "deep" / RUN_ID
    run_dir.mkdir(parents=True)
    lines = [orjson.dumps(record(1, "run_started", {"kind": "live", "agent": "a"}))]
    seq = 1
    for depth in DEPTHS:
        deep = orjson.dumps("@@") .replace(b'"@@"', b"[" * depth + b'"x"' + b"]" * depth)
        call = f"c{depth}"
        for event_type, payload, ids in [
            ("tool_execution_started", {"name": "t", "arguments": "@@"}, {"tool_call_id": call}),
            ("tool_execution_finished", {"status": "ok", "result": "@@"}, {"tool_call_id": call}),
            ("slot_write", {"slot": f"s{depth}", "value": "@@", "previous": None, "source": "x"}, {}),
        ]:
            seq += 1
            lines.append(orjson.dumps(record(seq, event_type, payload, turn_index=0, **ids)).replace(b'"@@"', deep))
    seq += 1
    lines.append(orjson.dumps(record(seq, "run_finished", {"status": "ok"})))
    (run_dir / "events.ndjson").write_bytes(b"".join(line + b"\n" for line in lines))
    (run_dir / "run.json").write_text(json.dumps({"schema": "otel-session.run.v1", "session_id": "deep", "run_id": RUN_ID,
                                                  "kind": "live", "created_at": "2026-11-29T22:52:00.000000Z", "service": "t"}))
    (run_dir / "capture.json").write_text(json.dumps({"schema": "otel-session.capture.v1", "status": "complete",
                                                      "event_count": len(lines)}))
    return run_dir


def test_the_reader_reducer_and_facts_take_a_hand_written_deep_bundle(deep_bundle):
    bundle = read_bundle(deep_bundle)
    assert bundle.status is BundleStatus.COMPLETE and len(bundle.events) == 11
    assert [d.code.value for d in bundle.diagnostics] == ["value_truncated"] * 9
    replayer = Replayer(bundle.events)
    for seq in range(12):
        canonical_json(replayer.state_at(seq))
    assert [tool["status"] for tool in replayer.state_at(None)["tools"]] == ["ok"] * 3
    orjson.dumps(build_session_facts(bundle))
    tail = JournalTail(deep_bundle / "events.ndjson")
    assert len(tail.poll()) == 11 and not tail.diagnostics


def test_the_viewer_serves_a_hand_written_deep_bundle(deep_bundle):
    root = deep_bundle.parents[2]
    client = create_app({"BUNDLE_DIR": str(root), "TESTING": True, "STREAM_POLL_SECONDS": 0.01}).test_client()
    base = f"/api/sessions/deep/runs/{RUN_ID}"
    events = client.get(f"{base}/events")
    assert events.status_code == 200 and len(events.get_json()["events"]) == 11
    state = client.get(f"{base}/state")
    assert state.status_code == 200 and len(state.get_json()["tools"]) == 3
    assert client.get(f"{base}/state?seq=4").status_code == 200
    stream = client.get(f"{base}/stream")
    body = stream.get_data()
    assert stream.status_code == 200 and body.count(b"\nid: ") + body.startswith(b"id: ") == 11
    assert b"event: end" in body
    assert client.get("/api/sessions/deep/facts").status_code == 200
    assert client.get(f"{base}/integrity").get_json()["status"] == "complete"


# -- every recording path ---------------------------------------------------------------------------


def _assert_recorded(bundle, depth: int) -> None:
    """Every record of the run is there and encodes again. A value the redactor could walk is cut
    at the journal's depth and the reader says so; past Python's recursion the redactor replaces
    the whole value (redact.py), and JSON text past 1,024 levels does not parse: it stays text."""
    types = [event["type"] for event in bundle.events]
    assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
    assert "tool_execution_started" in types and "tool_execution_finished" in types and types[-1] == "run_finished"
    if depth == 300:
        assert "value_truncated" in [d.code.value for d in bundle.diagnostics]
        (started,) = [event for event in bundle.events if event["type"] == "tool_execution_started"]
        assert started["truncated"] == "depth" and DEPTH_MARKER in orjson.dumps(started).decode()
    for event in bundle.events:
        orjson.dumps(event)
    for event in bundle.events:
        orjson.dumps(event)  # every record read back encodes again


@pytest.mark.parametrize("depth", DEPTHS)
def test_the_api_records_every_record_of_a_run_with_deep_tool_arguments(depth):
    with capture_bundle(redaction=RedactionPolicy(keep_slots={"plan"})) as captured:
        with otel_session.session("deep-api"), otel_session.run(agent="a"):
            with otel_session.turn(0, state="s0", required_slots=["plan"]):
                with otel_session.tool_execution("lookup", arguments={"q": nested(depth)}) as tool:
                    tool.finish(result={"r": nested(depth)})
                otel_session.slot_write("plan", nested(depth), source="nlu")
    bundle = captured.bundle
    _assert_recorded(bundle, depth)
    assert [event["type"] for event in bundle.events].count("slot_write") == 1
    (tool_span,) = [span for span in captured.spans if span.name == "execute_tool lookup"]
    orjson.loads(tool_span.attributes["gen_ai.tool.call.arguments"])  # the span carries JSON text too


def _tool_run(provider: TracerProvider, session_id: str, depth: int) -> None:
    tracer = provider.get_tracer("third-party")
    deep = json.dumps(nested(depth)) if depth < 900 else "[" * depth + "1" + "]" * depth
    with tracer.start_as_current_span("invoke_agent booking", attributes={"session.id": session_id,
                                                                           "gen_ai.operation.name": "invoke_agent"}):
        with tracer.start_as_current_span("execute_tool lookup", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup", "gen_ai.tool.call.id": "call_1",
            "gen_ai.tool.call.arguments": deep, "gen_ai.tool.call.result": deep,
        }):
            pass


def _provider(exporter) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": "deep"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


@pytest.mark.parametrize("protocol", ["grpc", "http"])
@pytest.mark.parametrize("depth", DEPTHS)
def test_the_collector_records_every_span_with_deep_tool_arguments(tmp_path, protocol, depth):
    root = tmp_path / "bundles"
    with running_collectors(grpc_address="127.0.0.1:0", http_address="127.0.0.1:0", seal_after_s=0.2,
                            redactor=Redactor(RedactionPolicy(), key=b"deep")) as make:
        collector = make(root)
        exporter = (GrpcSpanExporter(endpoint=f"127.0.0.1:{collector.grpc_port}", insecure=True) if protocol == "grpc"
                    else HttpSpanExporter(endpoint=f"http://127.0.0.1:{collector.http_port}/v1/traces"))
        provider = _provider(exporter)
        _tool_run(provider, f"deep-{protocol}", depth)
        provider.shutdown()  # the official exporter raised nothing and got its answer
        (bundle,) = wait_for(lambda: [b for b in bundles(root) if (b.capture or {}).get("status") == "complete"])
    _assert_recorded(bundle, depth)


@pytest.mark.parametrize("depth", DEPTHS)
def test_import_records_every_span_with_deep_tool_arguments(tmp_path, depth):
    path = tmp_path / "traces.jsonl"
    exporter = InMemorySpanExporter()
    provider = _provider(exporter)
    _tool_run(provider, "deep-import", depth)
    provider.shutdown()
    path.write_bytes(to_json_line(encode_spans(exporter.get_finished_spans())))  # an OTLP JSON lines file
    result = CliRunner().invoke(main, ["import", str(path), "--dir", str(tmp_path / "bundles")])
    assert result.exit_code == 0, result.output
    (bundle,) = bundles(tmp_path / "bundles")
    _assert_recorded(bundle, depth)
