"""What ``collect`` and ``import`` say when something is off: one clear line, the right word."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import orjson
import pytest
from click.testing import CliRunner

from otel_session.cli import main

SPAN_LINE = orjson.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "t"}, "spans": [{
    "traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "00f067aa0ba902b7", "name": "job",
    "startTimeUnixNano": "1764453121000000000", "endTimeUnixNano": "1764453121000001000",
    "attributes": [{"key": "session.id", "value": {"stringValue": "s1"}}]}]}]}]}) + b"\n"


@pytest.mark.parametrize("flag", ["--grpc", "--http"])
def test_a_busy_port_is_one_line_naming_the_address_and_the_flag(tmp_path, flag):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        address = f"127.0.0.1:{busy.getsockname()[1]}"
        other = "--http" if flag == "--grpc" else "--grpc"
        completed = subprocess.run(
            [sys.executable, "-m", "otel_session.cli", "collect", "--dir", str(tmp_path), flag, address, other, "off"],
            capture_output=True, text=True, timeout=300, env={**os.environ, "OTEL_SESSION_REDACTION_KEY": "k"},
        )
    assert completed.returncode == 1
    lines = completed.stderr.splitlines()
    assert len(lines) == 1, completed.stderr
    assert address in lines[0] and "already in use" in lines[0] and f"({flag})" in lines[0] and f"{flag} HOST:PORT" in lines[0]
    assert not (tmp_path / "sessions").exists()  # nothing touched before the listeners bound


def test_importing_a_file_again_says_already_imported_not_rejected(tmp_path):
    path = tmp_path / "traces.jsonl"
    path.write_bytes(SPAN_LINE)
    runner = CliRunner()
    first = runner.invoke(main, ["import", str(path), "--dir", str(tmp_path / "d")], env={"OTEL_SESSION_REDACTION_KEY": "k"})
    assert first.exit_code == 0 and "1 run(s) written" in first.output
    again = subprocess.run(
        [sys.executable, "-m", "otel_session.cli", "import", str(path), "--dir", str(tmp_path / "d")],
        capture_output=True, text=True, timeout=300, env={**os.environ, "OTEL_SESSION_REDACTION_KEY": "k"},
    )
    assert again.returncode == 0
    assert "0 run(s) written, 1 already imported (left unchanged" in again.stdout
    assert "rejected" not in again.stderr + again.stdout


@pytest.mark.parametrize("line, ok", [(b'{"foo":1}\n', False), (b'{"resourceSpans": []}\n', True)])
def test_a_json_line_that_is_not_otlp_is_reported_as_such(tmp_path, line, ok):
    path = tmp_path / "lines.jsonl"
    path.write_bytes(line + SPAN_LINE)
    result = CliRunner().invoke(main, ["import", str(path), "--dir", str(tmp_path / "d")],
                                env={"OTEL_SESSION_REDACTION_KEY": "k"})
    assert (result.exit_code == 0) is ok, result.output
    assert ("not an OTLP export request" in result.output) is not ok
    assert "1 run(s) written" in result.output  # the rest of the file is still imported
