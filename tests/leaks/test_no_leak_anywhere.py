"""One canary test over every entry point and every output at once (issue 15).

A distinct canary of every kind of personal data the default policy detects (and one user detector
from ``OTEL_SESSION_REDACT_PATTERNS``) is put in every value type and every field (``telemetry``),
and driven, in one stack, through every entry point:

* the in-process API (``otel_session``, with an SDK logger provider), its spans exported with
  ``otel_session_otlp`` (loaded as ``OTEL_TRACES_EXPORTER`` loads it) to a loopback OTLP receiver;
* ``otel-session collect`` in a subprocess, forwarding to a loopback OTLP sink that keeps the raw
  bytes it gets, fed over gRPC and HTTP by the official exporters (traces and logs) and by raw
  requests (protobuf over gRPC and HTTP, OTLP JSON over HTTP: bytes, kvlists, any log body), and
  hostile requests whose answers might echo what they got;
* ``otel-session import`` of an OTLP JSON file, in a subprocess;
* the viewer: every JSON endpoint and page of every bundle, by stored and by original session
  id, feedback posted with a canary comment; and the CLI's ``sessions``, ``verify``, ``facts``.

Then every output is grepped for every canary, in every encoding a leak could take
(``canaries.grep``): the bundle trees (contents, file and directory names), the forwarded and the
exported bytes (and their decoded messages), every HTTP and gRPC answer, every log record of every
logger at DEBUG, and the subprocesses' stdout and stderr. Nothing may match; the self-checks show
the grep finds each canary in the raw inputs, and an allow-listed (kept) slot value in the bundle.
"""

from __future__ import annotations

import importlib.util
import io
import json
import logging
import os
import re
import select
import signal
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import grpc
import pytest
from click.testing import CliRunner
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk._configuration import _import_exporters
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import otel_session
from otel_session.cli import main as cli_main
from otel_session.collector.otlp import to_json_line
from otel_session.bundle.read import find_bundles, read_bundle
from otel_session.viewer import create_app
from otel_session.testing import OtlpHttpCapture

pytestmark = pytest.mark.slow


def _load(name: str, file: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(file))
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


canaries_module = _load("leak_canaries", "canaries.py")
telemetry = _load("leak_telemetry", "telemetry.py")
Canaries = canaries_module.Canaries

KEY = "canary-redaction-key"
ENV = {
    "OTEL_SESSION_REDACTION_KEY": KEY,
    "OTEL_SESSION_REDACT_PATTERNS": json.dumps(canaries_module.USER_PATTERNS),
    "OTEL_SESSION_REDACT_KEEP_SLOTS": "party_size",
}
DEBUG_CLI = (
    "import logging, sys; "
    "logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format='%(levelname)s %(name)s: %(message)s'); "
    "from otel_session.cli import main; sys.argv[0] = 'otel-session'; main()"
)
SIGNALS = {"/v1/traces": ExportTraceServiceRequest, "/v1/logs": ExportLogsServiceRequest}


class CapturingOtlp(OtlpHttpCapture):
    """The loopback OTLP/HTTP endpoint, its bodies also decoded for the grep."""

    def blobs(self, channel: str) -> list[tuple[str, bytes]]:
        """Each body as it came, and as its decoded OTLP message (numbers and bytes made text)."""
        result = []
        for path, body in self.requests:
            result.append((f"{channel} {path} (bytes)", body))
            message = SIGNALS[path].FromString(body)
            result.append((f"{channel} {path} (decoded)", _decoded(message)))
        return result



class LogCapture(logging.Handler):
    """Every record of every logger, formatted with its traceback."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@dataclass
class Stack:
    """What one run of the whole stack left behind, for the greps."""

    canaries: Canaries
    roots: dict[str, Path]
    outputs: dict[str, list[tuple[str, bytes]]] = field(default_factory=dict)
    inputs: dict[str, list[tuple[str, bytes]]] = field(default_factory=dict)

    def add(self, output: str, name: str, data: bytes | str) -> None:
        self.outputs.setdefault(output, []).append((name, data.encode() if isinstance(data, str) else data))

    def add_input(self, where: str, data: bytes | str) -> None:
        self.inputs.setdefault(where, []).append((where, data.encode() if isinstance(data, str) else data))


# -- the stack ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    base = tmp_path_factory.mktemp("leaks")
    roots = {name: base / name for name in ("api", "collector", "import")}
    result = Stack(Canaries(), roots)
    capture = LogCapture()
    root_logger = logging.getLogger()
    old_level = root_logger.level
    root_logger.addHandler(capture)
    root_logger.setLevel(logging.DEBUG)
    sink, exported, plain = CapturingOtlp(), CapturingOtlp(), CapturingOtlp()
    try:
        with mock.patch.dict(os.environ, ENV):
            _api(result, exported, plain)
            _collector(result, sink)
            _import(result, base)
            _viewer_and_cli(result)
    finally:
        root_logger.removeHandler(capture)
        root_logger.setLevel(old_level)
        for receiver in (sink, exported, plain):
            receiver.close()
    for output, root in roots.items():
        for path in sorted(root.rglob("*")):
            relative = str(path.relative_to(base))
            result.add(f"bundles ({output})", f"{relative} (name)", relative)
            if path.is_file():
                result.add(f"bundles ({output})", relative, path.read_bytes())
    result.outputs["forwarded OTLP"] = sink.blobs("forwarded")
    result.outputs["exported spans (otel_session_otlp)"] = exported.blobs("exported")
    result.outputs["own spans exported by plain otlp"] = plain.blobs("plain otlp")
    result.add("logs", "every logger at DEBUG", "\n".join(capture.lines))
    yield result


def _api(stack: Stack, exported: CapturingOtlp, plain: CapturingOtlp) -> None:
    """The otel_session API in process; spans leave through ``otel_session_otlp``, and through
    the plain ``otlp`` exporter (the API's own spans are redacted before they are made)."""
    env = {"OTEL_SESSION_DIR": str(stack.roots["api"]), "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
           "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{exported.url}/v1/traces"}
    with mock.patch.dict(os.environ, env):
        span_exporters, _, _ = _import_exporters(["otel_session_otlp"], [], [])
        exporter = span_exporters["otel_session_otlp"]()
    resource = Resource.create(telemetry.resource_attributes(stack.canaries, "API"))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.add_span_processor(SimpleSpanProcessor(HttpSpanExporter(endpoint=f"{plain.url}/v1/traces")))
    logger_provider = LoggerProvider(resource=resource)
    recorder = otel_session.configure(bundle_dir=stack.roots["api"], tracer_provider=provider,
                                      logger_provider=logger_provider)
    try:
        telemetry.exercise_api(stack.canaries, "API", logger_provider)
        telemetry.send_sdk_telemetry(provider, None, stack.canaries, "API third-party spans")
    finally:
        recorder.shutdown()
        provider.shutdown()
        logger_provider.shutdown()
    assert exported.requests, "otel_session_otlp exported nothing"


def _providers(canaries: Canaries, where: str, span_exporter: Any, log_exporter: Any) -> tuple[TracerProvider, LoggerProvider]:
    resource = Resource.create(telemetry.resource_attributes(canaries, where))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))
    return provider, logger_provider


def _collector(stack: Stack, sink: CapturingOtlp) -> None:
    """``otel-session collect`` fed by every client, forwarding to ``sink``; stopped by SIGTERM."""
    process = subprocess.Popen(
        [sys.executable, "-c", DEBUG_CLI, "collect", "--dir", str(stack.roots["collector"]),
         "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", "--forward", f"{sink.url}/v1/traces",
         "--seal-after", "0.5", "--hold-logs", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ})
    try:
        banner = _read_banner(process)
        grpc_port, http_port = (int(port) for port in re.findall(r"(?:grpc|http)=127\.0\.0\.1:(\d+)", banner))
        http = f"http://127.0.0.1:{http_port}"
        for name, span_exporter, log_exporter in [
            ("gRPC official exporters", GrpcSpanExporter(endpoint=f"127.0.0.1:{grpc_port}", insecure=True),
             GrpcLogExporter(endpoint=f"127.0.0.1:{grpc_port}", insecure=True)),
            ("HTTP official exporters", HttpSpanExporter(endpoint=f"{http}/v1/traces"),
             HttpLogExporter(endpoint=f"{http}/v1/logs")),
        ]:
            provider, logger_provider = _providers(stack.canaries, name, span_exporter, log_exporter)
            telemetry.send_sdk_telemetry(provider, logger_provider, stack.canaries, name)
            logger_provider.shutdown()
            provider.shutdown()
        _keep_everything_app(stack, f"127.0.0.1:{grpc_port}")
        channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
        exports = {"/v1/traces": channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export"),
                   "/v1/logs": channel.unary_unary("/opentelemetry.proto.collector.logs.v1.LogsService/Export")}
        for name in ("raw protobuf over gRPC", "raw protobuf over HTTP", "raw OTLP JSON over HTTP"):
            for path, request in zip(SIGNALS, telemetry.raw_requests(stack.canaries, name)):
                stack.add_input(name, _decoded(request))
                if name.endswith("gRPC"):
                    stack.add("HTTP answers", f"{name} {path}",
                              exports[path](request.SerializeToString(), timeout=10))
                elif "JSON" in name:
                    body = to_json_line(request)
                    stack.add_input(name, body)
                    stack.add("HTTP answers", f"{name} {path}", _post(http + path, body, "application/json"))
                else:
                    stack.add("HTTP answers", f"{name} {path}",
                              _post(http + path, request.SerializeToString(), "application/x-protobuf"))
        for name, body, content_type in _hostile_bodies(stack.canaries):
            stack.add("HTTP answers", name, _post(http + "/v1/traces", body, content_type))
            try:
                stack.add("HTTP answers", f"{name} (gRPC)", exports["/v1/traces"](body, timeout=10))
            except grpc.RpcError as error:
                stack.add("HTTP answers", f"{name} (gRPC)", f"{error.code()} {error.details()}")
        channel.close()
    finally:
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=300)
    stack.add("collect output", "stdout", banner.encode() + stdout)
    stack.add("collect output", "stderr", stderr)
    assert process.returncode == 0, stderr.decode()[-3000:]
    assert sink.requests, "nothing was forwarded"


def _keep_everything_app(stack: Stack, address: str) -> None:
    """An app with a keep-everything policy sends its own spans raw (plain otlp) to the collector."""
    placed = stack.roots["collector"].parent / "keep-everything-placed.json"
    first = stack.canaries._serial  # it mints on from here; the parent after what it minted
    completed = subprocess.run([sys.executable, str(Path(__file__).with_name("keep_everything_app.py")), address,
                                str(first), str(placed)], capture_output=True, timeout=120, check=False,
                               env={**os.environ})
    assert completed.returncode == 0, completed.stderr.decode()[-3000:]
    stack.canaries.adopt([tuple(item) for item in json.loads(placed.read_text())], first)


def _decoded(message: Any) -> bytes:
    """A protobuf message as bytes and as text (its numbers as digits, its bytes as base64)."""
    return message.SerializeToString() + json_format.MessageToJson(message).encode() + str(message).encode()


def _read_banner(process: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + 120  # generous: a loaded machine starts it slowly
    assert process.stdout is not None
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 0.5)
        if ready:
            line = process.stdout.readline().decode()
            if "otel-session collector:" in line:
                return line
        if process.poll() is not None:
            break
    raise AssertionError(f"the collector did not start: {process.stderr.read().decode()[-2000:] if process.stderr else ''}")


def _post(url: str, body: bytes, content_type: str) -> bytes:
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return f"{response.status} {dict(response.headers)}\n".encode() + response.read()
    except urllib.error.HTTPError as error:
        return f"{error.code} {dict(error.headers)}\n".encode() + error.read()


def _hostile_bodies(canaries: Canaries) -> list[tuple[str, bytes, str]]:
    """Requests a receiver refuses in part or whole, whose answers might quote what they got."""
    email, phone = canaries.mint("email", "hostile request"), canaries.mint("phone", "hostile request")
    spans = lambda span: json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()  # noqa: E731
    return [
        ("hostile: trace id", spans({"traceId": email, "spanId": "00f067aa0ba902b7", "name": phone}), "application/json"),
        ("hostile: name object", spans({"name": {"n": email}}), "application/json"),
        ("hostile: kind", spans({"kind": email, "startTimeUnixNano": phone}), "application/json"),
        ("hostile: not JSON", f"call {phone} or {email}".encode(), "application/json"),
        ("hostile: bad ids", spans({"traceId": "0" * 32, "spanId": "0" * 16, "name": f"x {email}"}), "application/json"),
        ("hostile: not protobuf", f"\x0a\xff{email} {phone}".encode(), "application/x-protobuf"),
    ]


def _import(stack: Stack, base: Path) -> None:
    """``otel-session import`` of one OTLP JSON file (traces and logs), in a subprocess."""
    traces, logs = telemetry.raw_requests(stack.canaries, "import")
    path = base / "exported.jsonl"
    path.write_bytes(to_json_line(traces) + to_json_line(logs))
    stack.add_input("import", path.read_bytes())
    completed = subprocess.run([sys.executable, "-c", DEBUG_CLI, "import", str(path), "--dir", str(stack.roots["import"])],
                               capture_output=True, timeout=120, check=False, env={**os.environ})
    stack.add("import output", "stdout", completed.stdout)
    stack.add("import output", "stderr", completed.stderr)
    assert b"1 run(s) written" in completed.stdout, completed.stdout + completed.stderr


def _viewer_and_cli(stack: Stack) -> None:
    """Every viewer answer about every bundle (by stored and by original id), and the CLI's."""
    originals = sorted({placed.where.split(" session id [")[0] for placed in stack.canaries.placed
                        if " session id [" in placed.where})
    for name, root in stack.roots.items():
        app = create_app({"BUNDLE_DIR": str(root), "TESTING": True, "STREAM_POLL_SECONDS": 0.01})
        client = app.test_client()
        answers: list[tuple[str, Any]] = []

        def get(url: str) -> Any:
            response = client.get(url)
            data = response.get_data()
            if response.mimetype == "application/x-tar":
                with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                    data += b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())  # type: ignore[union-attr]
                    data += "\n".join(tar.getnames()).encode()
            answers.append((url, data))
            return response

        replays: list[list[str]] = []
        sessions = get("/api/sessions").get_json()["sessions"]
        assert sessions, f"no session in {name}"
        get("/")
        get("/api/runs")
        get("/open")
        for session in sessions:
            sid = urllib.parse.quote(session["session_id"], safe="")
            get(f"/sessions/{sid}")
            runs = get(f"/api/sessions/{sid}/runs").get_json()["runs"]
            for path in ("feedback", "facts"):
                get(f"/api/sessions/{sid}/{path}")
            comment = telemetry.text(stack.canaries, f"viewer feedback comment ({name})")
            posted = client.post(f"/api/sessions/{sid}/feedback", json={"rating": 4, "comment": comment})
            assert posted.status_code == 201, posted.get_data()
            answers.append(("POST feedback", posted.get_data()))
            for run in runs:
                rid = run["run_id"]
                replays.append(["replay", session["session_id"], rid, "--dir", str(root), "--json"])
                get(f"/sessions/{sid}/runs/{rid}")
                for path in ("events", "state", "integrity", "bundle", "stream"):
                    get(f"/api/sessions/{sid}/runs/{rid}/{path}")
                get(f"/compare?left={sid}/{rid}&right={sid}/{rid}")
            bad_run = urllib.parse.quote(f"run-{stack.canaries.mint('email', f'viewer malformed run id ({name})')}", safe="")
            get(f"/api/sessions/{sid}/runs/{bad_run}/events")  # a malformed run id: the 400 names no value
            get(f"/sessions/{sid}/runs/{bad_run}")
        for where in originals:  # the ids as the callers know them: found through their hash
            sid = _original_session_id(stack, where)
            get(f"/api/sessions/{urllib.parse.quote(sid, safe='')}/runs")
            get(f"/sessions/{urllib.parse.quote(sid, safe='')}")
        unknown = telemetry.identifier(stack.canaries, f"viewer unknown session ({name})")
        get(f"/api/sessions/{urllib.parse.quote(unknown, safe='')}/runs")
        get(f"/api/sessions/{urllib.parse.quote(unknown, safe='')}/runs/{urllib.parse.quote(unknown, safe='')}/events")
        for url, data in answers:
            stack.add("HTTP answers", f"viewer ({name}) {url}", data)
        runner = CliRunner()
        commands = [["sessions", "--dir", str(root), "--json"], ["sessions", "--dir", str(root)],
                    ["verify", str(root)], ["verify", "--json", str(root)]]
        for where in originals:
            commands.append(["facts", _original_session_id(stack, where), "--dir", str(root)])
            commands.append(["facts", _original_session_id(stack, where), "--dir", str(root), "--json"])
        commands.append(["facts", unknown, "--dir", str(root)])
        commands += replays
        for command in commands:
            outcome = runner.invoke(cli_main, command, catch_exceptions=False)
            stack.add("CLI output", f"otel-session {command[0]} ({name})", outcome.output)


def _original_session_id(stack: Stack, where: str) -> str:
    """The session id ``telemetry.identifier`` built at ``where``, as the sender gave it."""
    values = [placed.value for placed in stack.canaries.placed if placed.where.startswith(f"{where} session id [")]
    return "caller " + " / ".join(values)


# -- the greps ---------------------------------------------------------------------------------

OUTPUTS = ["bundles (api)", "bundles (collector)", "bundles (import)", "forwarded OTLP",
           "exported spans (otel_session_otlp)", "own spans exported by plain otlp", "HTTP answers", "logs",
           "collect output", "import output", "CLI output"]
# What an output carries raw by design: plain ``otlp`` sends third-party spans, the app's resource
# and the attributes it gives a run as they are, and the ids of the API's own spans as given (so
# a collector with another key still hashes them as its own: docs/conventions.md, redaction).
# Everything else of the API's own spans is redacted before the span is made.
RAW_BY_DESIGN = {"own spans exported by plain otlp": ("API third-party spans ", "API resource", "API service.name",
                                                      "API user.id", "API run attributes", "API session id")}


@pytest.mark.parametrize("output", OUTPUTS)
def test_no_canary_in(stack: Stack, output: str) -> None:
    blobs = stack.outputs.get(output)
    assert blobs, f"nothing was captured for {output}"
    leaks: dict[str, set[str]] = {}
    raw = RAW_BY_DESIGN.get(output)
    raw_seen = 0
    for name, data in blobs:
        for found in stack.canaries.grep(data):
            if raw is not None and stack.canaries.placed_where(found).startswith(raw):
                raw_seen += 1
            elif not stack.canaries.is_control(found):
                leaks.setdefault(stack.canaries.where_of(found), set()).add(name)
    assert raw is None or raw_seen, f"{output}: the raw {raw} canaries are not found (the grep is blind)"
    report = [f"{where}\n    in {len(names)} answer(s)/file(s), e.g. {sorted(names)[0]}" for where, names in sorted(leaks.items())]
    assert not leaks, f"{len(leaks)} canaries in {output}:\n" + "\n".join(report)


def test_the_grep_finds_every_canary_in_the_raw_inputs(stack: Stack) -> None:
    """Self-check: the requests as sent hold every canary placed in them, in whatever form they
    travel (bytes as base64 in OTLP JSON, numbers as digits, escaped JSON in a string)."""
    for where, blobs in stack.inputs.items():
        found = {stack.canaries.where_of(f).split(" put in ")[0] for _, data in blobs for f in stack.canaries.grep(data)}
        placed = [p for p in stack.canaries.placed if p.where.startswith(f"{where} ")]
        missing = [f"{p.kind} {p.value!r} at {p.where}" for p in placed if f"{p.kind} {p.value!r}" not in found]
        assert placed and not missing, f"{where}: the grep misses\n" + "\n".join(missing[:40])


def test_the_allow_listed_slot_is_kept_and_found(stack: Stack) -> None:
    """Self-check on an output: the allow-listed slot value (``OTEL_SESSION_REDACT_KEEP_SLOTS``)
    is recorded as is, and the grep finds it in the bundle and in the exported spans."""
    for output in ("bundles (api)", "exported spans (otel_session_otlp)"):
        found = [f for _, data in stack.outputs[output] for f in stack.canaries.grep(data)]
        assert any(stack.canaries.is_control(f) for f in found), output


def test_every_entry_point_reached_its_bundles(stack: Stack) -> None:
    """The greps looked at real records: each root holds complete runs with the canary fields."""
    for name, root in stack.roots.items():
        bundles = [read_bundle(path) for path in find_bundles([root])]
        types = {event["type"] for bundle in bundles for event in bundle.events}
        assert bundles and all(b.status.value == "complete" for b in bundles), name
        assert {"message_finished", "tool_execution_started"} <= types, (name, types)
    collector_sessions = {read_bundle(p).session_id for p in find_bundles([stack.roots["collector"]])}
    assert len(collector_sessions) == 6, collector_sessions  # 2 official exporters, 3 raw clients, 1 raw app
