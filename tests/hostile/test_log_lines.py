"""Log lines are redacted by construction (issue 15): every logger of ours comes from
``otel_session.core.log.get_logger``, and what its records say — ids, paths, exception text,
tracebacks — holds no personal data; the ``otel-session collect`` process's stderr neither."""

from __future__ import annotations

import ast
import gzip
import http.client
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode

from otel_session.core.log import get_logger, log_id
from otel_session.redact import Redactor, RedactionPolicy
from otel_session.testing import bundles, wait_for

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [*sorted((ROOT / "otel_session").rglob("*.py")), *sorted((ROOT / "collector").rglob("*.py")),
           *sorted((ROOT / "viewer").rglob("*.py"))]

EMAIL = "log.canary.7741@example.com"
PHONE = "+1 415 555 0177"
CARD = "4532 0151 1283 0366"
CANARIES = (EMAIL, "canary.7741", PHONE, "555 0177", "5550177", CARD, CARD.replace(" ", ""), "1283 0366")
CALLER = f"call-{PHONE}"


def assert_clean(text: str, where: str) -> None:
    for canary in CANARIES:
        assert canary not in text, f"{canary!r} in {where}:\n{text}"


# -- every logger of ours is made by get_logger ------------------------------------------------

_ROOT_CALLS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log"}


def _other_loggers(path: Path) -> list[str]:
    """Where ``path`` makes a logger, or logs through the root logger, other than by ``get_logger``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id == "logging" and (
                    node.func.attr in {"getLogger", "Logger", "getLoggerClass", "setLoggerClass"} | _ROOT_CALLS):
                found.append(f"logging.{node.func.attr} (line {node.lineno})")
        if isinstance(node, ast.ImportFrom) and node.module == "logging":
            names = {alias.name for alias in node.names} & ({"getLogger", "Logger"} | _ROOT_CALLS)
            found += [f"from logging import {name} (line {node.lineno})" for name in sorted(names)]
    return found


@pytest.mark.parametrize("path", [path for path in SOURCES if path != ROOT / "otel_session" / "core" / "log.py"],
                         ids=lambda path: str(path.relative_to(ROOT)))
def test_every_logger_comes_from_get_logger(path):
    assert not _other_loggers(path), (
        f"{path.relative_to(ROOT)} makes a logger another way: {_other_loggers(path)}; use "
        "otel_session.core.log.get_logger(__name__), whose records are redacted before any handler sees them")


def test_the_check_sees_a_logger_made_another_way(tmp_path):
    module = tmp_path / "module.py"
    module.write_text("import logging\nlogger = logging.getLogger(__name__)\nlogging.warning('x')\n")
    assert _other_loggers(module) == ["logging.getLogger (line 2)", "logging.warning (line 3)"]


# -- what a record of ours says ----------------------------------------------------------------


class _Unprintable:
    """A value whose conversion fails with an error text that quotes personal data."""

    def __repr__(self) -> str:
        raise ValueError(f"cannot show {EMAIL} / {CARD}")

    __str__ = __repr__


@pytest.fixture
def debug_logs(caplog):
    caplog.set_level(logging.DEBUG)
    return caplog


def _logged(caplog) -> str:
    """Every record as a handler prints it (message, traceback, stack), and as its fields say."""
    formatter = logging.Formatter("%(message)s")
    return "\n".join(formatter.format(record) + f" {record.args!r} {record.exc_info!r}" for record in caplog.records)


def test_a_traceback_quoting_personal_data_is_redacted(debug_logs):
    """The redactor fails on a slot value (through the API) and logs the traceback: its text quotes the value."""
    import otel_session
    from otel_session.testing import capture_bundle

    with capture_bundle():
        with otel_session.session("s1"), otel_session.run(agent="a"), otel_session.turn(0, state="s"):
            otel_session.slot_write("contact", _Unprintable())
    text = _logged(debug_logs)
    assert "redaction failed" in text and "ValueError: cannot show [email]" in text  # the traceback is there
    assert_clean(text, "the log records")


@pytest.mark.parametrize("identifiers", ["hash", "keep"])
def test_arguments_are_redacted_by_kind(debug_logs, monkeypatch, identifiers):
    monkeypatch.setenv("OTEL_SESSION_REDACTION_KEY", "log-lines")
    monkeypatch.setenv("OTEL_SESSION_REDACT_IDENTIFIERS", identifiers)
    stored = Redactor(RedactionPolicy.from_env(), key=b"log-lines").identifier(CALLER)
    logger = get_logger("otel_session.test_log_lines")
    logger.warning("run of %s at %s failed: %s (%d bytes, %r)", log_id(CALLER), Path("/r/sessions") / CALLER,
                   ValueError(f"no {EMAIL}"), int(CARD.replace(" ", "")), [PHONE])
    logger.info("%(who)s said %(what)s", {"who": log_id(CALLER), "what": f"call {PHONE}"})
    logger.error(f"built in the message: {EMAIL}")
    logger.info("a mapping: %s", {EMAIL: PHONE})
    logger.debug("where", stack_info=True, extra={"unused": EMAIL})
    try:
        raise KeyError(CARD)
    except KeyError:
        logger.exception("lookup of %s failed", log_id(CALLER))
    lines = [logging.Formatter("%(message)s").format(record) for record in debug_logs.records]
    assert lines[0] == f"run of {stored} at /r/sessions/{stored} failed: no [email] ([card] bytes, \"['[phone]']\")"
    assert lines[1] == f"{stored} said call [phone]"
    assert lines[2] == "built in the message: [email]"
    assert lines[3] == "a mapping: {'[email]': '[phone]'}"
    lines.pop(3)
    assert lines[3].startswith("where\nStack (most recent call last):")
    assert lines[4].startswith(f"lookup of {stored} failed\nTraceback") and lines[4].endswith("KeyError: '[card]'")
    assert all(record.args == () and record.exc_info is None for record in debug_logs.records)
    if identifiers == "keep":
        assert stored == CALLER  # ids as stored: as given
        assert_clean("\n".join(lines).replace(CALLER, ""), "the log lines")
    else:
        assert stored.startswith("call-hmac-sha256:")
        assert_clean("\n".join(lines), "the log lines")


@pytest.mark.parametrize("identifiers", ["hash", "keep"])
def test_a_path_names_the_session_as_stored(debug_logs, monkeypatch, identifiers):
    """A capture that fails logs its bundle path: the stored id in it, kept as stored (under
    ``keep`` a caller's number is the directory's name), not masked as text would be."""
    import otel_session
    from otel_session.testing import capture_bundle
    from otel_session.bundle.write import WriterLimits

    monkeypatch.setenv("OTEL_SESSION_REDACT_IDENTIFIERS", identifiers)
    plain = "call-14155550177"  # a directory name as it is, a phone number to the detectors
    with capture_bundle(redaction=RedactionPolicy.from_env(), writer_limits=WriterLimits(max_event_bytes=200)) as captured:
        with otel_session.session(plain), otel_session.run(agent="a"), otel_session.turn(0, state="s"):
            otel_session.slot_write("contact", f"call me on {PHONE} " * 10)
    [bundle] = bundles(captured.root)
    line = next(record.getMessage() for record in debug_logs.records if record.getMessage().startswith("capture of "))
    assert f"capture of {bundle.path} failed" in line
    assert ("14155550177" in line) is (identifiers == "keep")
    assert_clean(line.replace(plain, ""), "the capture failure's line")


@pytest.mark.parametrize("identifiers", ["hash", "keep"])
def test_a_path_through_a_digest_named_directory_is_printed_as_it_is(debug_logs, monkeypatch, identifiers):
    """A session id that is no safe directory name is stored under a digest of it (``~`` and 40
    hex digits). This one's digest holds a Luhn-valid run of 13 digits, a card to the detectors
    (the CI failure of 2026-12-03 drew such a digest at random): the line names the directory as it
    is, and still masks a number in another component."""
    from otel_session.core.layout import session_dir

    monkeypatch.setenv("OTEL_SESSION_REDACT_IDENTIFIERS", identifiers)
    directory = session_dir(Path("/r"), "caller 109")
    assert directory.name == "~26eff1ad6694804121527d41598bc36ee0f689a3"
    get_logger("otel_session.test_log_lines").error("capture of %s failed", directory / CALLER)
    line = debug_logs.records[-1].getMessage()
    assert line.startswith(f"capture of {directory}/call-")
    if identifiers == "hash":  # under keep, the caller's number is the directory's name
        assert_clean(line, "the line")


def test_the_bundle_root_is_printed_as_the_operator_gave_it(debug_logs, tmp_path):
    """The root is a setting, not an id: a number in its name (``…-1000000``, a phone number to
    the detectors) is printed as it is, not hashed with this process's key."""
    import otel_session
    from otel_session.catalog import open_catalog
    from otel_session.catalog.sync import catch_up
    from otel_session.testing import capture_bundle

    root = tmp_path / "bench-replay-1000000"
    with capture_bundle(root=root):
        with otel_session.session("s1"), otel_session.run(agent="a"):
            pass
    catalog = open_catalog(root)
    try:
        catalog.clear()
        catch_up(catalog, root)
    finally:
        catalog.close()
    line = next(record.getMessage() for record in debug_logs.records if "lacks under" in record.getMessage())
    assert line.endswith(f"lacks under {root}")


# -- the collector process's own streams -------------------------------------------------------


def _span_json(name: str, session_id: str, trace_id: str = "0af7651916cd43dd8448eb211c80319c") -> bytes:
    return orjson.dumps({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": f"svc-{EMAIL}"}}]},
        "scopeSpans": [{"spans": [{
            "traceId": trace_id, "spanId": "b7ad6b7169203331", "name": name,
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000001000000000",
            "attributes": [{"key": "session.id", "value": {"stringValue": session_id}}],
        }]}],
    }]})


def _post(port: int, path: str, body: bytes, headers: dict[str, str]) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def _export_with_the_official_exporter(port: int) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": f"svc-{EMAIL}", "user.id": PHONE}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces")))
    tracer = provider.get_tracer("log-lines")
    with tracer.start_as_current_span(f"invoke_agent {EMAIL}", attributes={"session.id": CALLER}) as span:
        with tracer.start_as_current_span("chat", attributes={"gen_ai.input.messages": f'[{{"role":"user","content":"{CARD}"}}]'}):
            pass
        span.record_exception(ValueError(f"card {CARD} refused for {EMAIL}"))
        span.set_status(Status(StatusCode.ERROR, f"{PHONE} unreachable"))
    provider.shutdown()


@pytest.mark.slow
def test_the_collect_process_prints_no_personal_data(tmp_path):
    """``otel-session collect`` (at DEBUG neither: its default INFO lines and every warning)
    receives PII-laden spans, then faulty requests that quote PII, then a late span of a sealed
    run and a restart that resumes nothing: its stdout and stderr hold none of it."""
    root = tmp_path / "bundles"
    env = {**os.environ, "OTEL_SESSION_REDACTION_KEY": "log-lines"}
    env.pop("OTEL_SESSION_REDACT_IDENTIFIERS", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "otel_session.cli", "collect", "--dir", str(root), "--grpc", "off",
         "--http", "127.0.0.1:0", "--seal-after", "0.2", "--hold-unrouted", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        banner = process.stdout.readline()
        assert "otel-session collector:" in banner, process.stderr.read()
        port = int(banner.split("http=")[1].split()[0].rsplit(":", 1)[1])
        _export_with_the_official_exporter(port)
        wait_for(lambda: [b for b in bundles(root) if b.capture.get("status") not in (None, "recording")])
        json_headers = {"Content-Type": "application/json"}
        proto_headers = {"Content-Type": "application/x-protobuf"}
        faults = [
            ("/v1/traces", _span_json(f"late {EMAIL}", CALLER), json_headers),  # the sealed run's trace again
            ("/v1/traces", _span_json("bad id", f"../{EMAIL}", trace_id="1af7651916cd43dd8448eb211c80319c"), json_headers),
            ("/v1/traces", _span_json(f"no session {EMAIL}", "", trace_id="2af7651916cd43dd8448eb211c80319c"), json_headers),
            ("/v1/traces", _span_json("bad trace", CALLER, trace_id=EMAIL), json_headers),
            ("/v1/traces", b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "' + EMAIL.encode() + b'", "traceId": 7}]}]}]}', json_headers),
            ("/v1/traces", b"\x0a\xff\xff" + EMAIL.encode() + CARD.encode(), proto_headers),
            ("/v1/traces", gzip.compress(b"\x0a\x05" + EMAIL.encode())[:-4], {**proto_headers, "Content-Encoding": "gzip"}),
            ("/v1/logs", orjson.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": [{"body": {"stringValue": EMAIL},
                "traceId": "3af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "eventName": f"gen_ai.{EMAIL}"}]}]}]}), json_headers),
            (f"/v1/traces?session={EMAIL}", _span_json("query", CALLER), json_headers),
            (f"/v1/{EMAIL}", b"{}", json_headers),
            ("/v1/traces", _span_json("wrong type", CALLER), {"Content-Type": f"text/{EMAIL}"}),
        ]
        statuses = [_post(port, path, body, headers) for path, body, headers in faults]
        assert any(status >= 400 for status in statuses) and 200 in statuses, statuses
        wait_for(lambda: len(bundles(root)) >= 2)  # the sessionless trace, recorded after its hold
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    assert "rejected" in err and "sealed" in err, err  # the lines under test were printed
    assert_clean(out, "the collector's stdout")
    assert_clean(err, "the collector's stderr")


def _import(path: Path, root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OTEL_SESSION_REDACTION_KEY": "log-lines"}
    env.pop("OTEL_SESSION_REDACT_IDENTIFIERS", None)
    return subprocess.run([sys.executable, "-m", "otel_session.cli", "import", str(path), "--dir", str(root)],
                          capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.slow
def test_the_import_command_prints_no_personal_data(tmp_path):
    """``otel-session import`` of spans whose ids hold PII (session, eval, service, span names),
    a log record, lines that quote PII where a diagnostic might, then the same file again (every
    run already sealed): stdout and stderr hold none of it."""
    lines = [
        _span_json(f"invoke_agent {EMAIL}", CALLER),
        _span_json(f"bad trace {EMAIL}", CALLER, trace_id=EMAIL),
        orjson.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": [{"body": {"stringValue": f"mail {EMAIL}"},
            "traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331",
            "eventName": "gen_ai.user.message"}]}]}]}),
        b'{"resourceSpans": "' + f"{EMAIL} {CARD}".encode() + b'"}',
        f"not json: {PHONE}".encode(),
    ]
    exported = tmp_path / "traces.jsonl"
    exported.write_bytes(b"\n".join(lines) + b"\n")
    root = tmp_path / "bundles"
    first, again = _import(exported, root), _import(exported, root)
    assert "1 run(s) written" in first.stdout and "already imported" in again.stdout, first.stdout + first.stderr
    assert first.stderr.count("Error:") >= 3, first.stderr
    [bundle] = bundles(root)
    assert bundle.session_id.startswith("call-hmac-sha256:")
    for completed in (first, again):
        assert_clean(completed.stdout, "import's stdout")
        assert_clean(completed.stderr, "import's stderr")


@pytest.mark.slow
def test_the_view_process_prints_no_personal_data(tmp_path):
    """``otel-session view``: werkzeug's request lines name the sessions asked for (URL-encoded):
    a caller's number or an e-mail address in a path is printed redacted."""
    import urllib.parse
    import urllib.request
    from urllib.error import HTTPError

    root = tmp_path / "bundles"
    root.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_SESSION_")}
    process = subprocess.Popen([sys.executable, "-m", "otel_session.cli", "view", "--dir", str(root), "--port", "0", "--access-log"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        banner = process.stdout.readline()
        url = banner.split(" on ")[1].split()[0]
        for path in (f"sessions/{urllib.parse.quote(CALLER, safe='')}", f"api/sessions/{urllib.parse.quote(EMAIL)}/runs",
                     f"sessions/{CALLER.replace(' ', '%20')}?card={CARD.replace(' ', '+')}"):
            with pytest.raises(HTTPError):
                urllib.request.urlopen(url + path, timeout=10)
    finally:
        process.terminate()
        out, err = process.communicate(timeout=300)
    assert err.count("404") >= 3, err  # the request lines were printed
    for text in (out, err, urllib.parse.unquote_plus(err)):
        assert_clean(text, "the viewer's output")
