"""The page's offline reader (static/bundle.js, run in Node) judges a downloaded bundle exactly like
the Python reader judges the directory: same status, same diagnostics (code, severity, line, seq)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

NODE = shutil.which("node")
STATIC = Path(__file__).resolve().parents[2] / "viewer" / "static"

READ_TAR = """
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
const { parseTar, readBundle } = await import(pathToFileURL(process.argv[1]).href);
const bundle = readBundle(parseTar(readFileSync(process.argv[2])));
const keep = ({ code, severity, line, seq }) => ({ code, severity, line, seq });
process.stdout.write(JSON.stringify({ status: bundle.status, events: bundle.events.length,
                                      diagnostics: bundle.diagnostics.map(keep) }));
"""


def _lines(run_dir: Path) -> list[bytes]:
    return (run_dir / "events.ndjson").read_bytes().splitlines(keepends=True)


def _write_lines(run_dir: Path, lines: list[bytes]) -> None:
    (run_dir / "events.ndjson").write_bytes(b"".join(lines))


def _set_capture(run_dir: Path, **changes) -> None:
    capture = json.loads((run_dir / "capture.json").read_text())
    (run_dir / "capture.json").write_text(json.dumps({**capture, **changes}))


DAMAGE = {
    "complete": lambda d: None,
    "torn_tail_while_recording": lambda d: (_set_capture(d, status="recording"), _write_lines(d, [*_lines(d), b'{"seq": 50, "at'])),
    "recording_without_counts": lambda d: (
        (d / "capture.json").write_text('{"schema": "otel-session.capture.v1", "status": "recording"}'),
        _write_lines(d, [*_lines(d), b'{"seq": 50, "at']),
    ),
    "torn_tail_after_complete": lambda d: _write_lines(d, [*_lines(d)[:-1], _lines(d)[-1][:-1]]),
    "garbage_line": lambda d: _write_lines(d, [*_lines(d)[:4], b"{not json\n", *_lines(d)[4:]]),
    "empty_line": lambda d: _write_lines(d, [*_lines(d)[:4], b"\n", *_lines(d)[4:]]),
    "not_utf8": lambda d: _write_lines(d, [*_lines(d)[:4], _lines(d)[4].replace(b'"type"', b'"\xff":1,"type"'), *_lines(d)[5:]]),
    "seq_gap": lambda d: _write_lines(d, [*_lines(d)[:4], *_lines(d)[5:]]),
    "missing_capture": lambda d: (d / "capture.json").unlink(),
    "invalid_capture": lambda d: (d / "capture.json").write_text('{"schema": "nope"}'),
    "failed_capture": lambda d: _set_capture(d, status="failed", failure={"failed_at": "x", "code": "disk_full", "message": "m"}),
    "count_mismatch": lambda d: _set_capture(d, event_count=3),
    "invalid_manifest": lambda d: (d / "run.json").write_text("[]"),
    "values_nested_too_deep": lambda d: (
        _write_lines(d, [*_lines(d), (json.dumps({**json.loads(_lines(d)[-1]), "seq": len(_lines(d)) + 1, "type": "slot_write",
                                                  "payload": {"slot": "deep", "value": "@@"}}).replace(
            '"@@"', "[" * 5000 + '{"k": 1}' + "]" * 5000) + "\n").encode()]),
        _set_capture(d, event_count=len(_lines(d))),
    ),
    "upstream_drop": lambda d: (
        _write_lines(d, [*_lines(d), (json.dumps({**json.loads(_lines(d)[-1]), "seq": len(_lines(d)) + 1, "type": "upstream_drop",
                                                  "payload": {"dropped_events": 2, "dropped_attributes": 0}}) + "\n").encode()]),
        _set_capture(d, event_count=len(_lines(d))),
    ),
}


@pytest.mark.skipif(NODE is None, reason="node is not installed: the offline reader parity test did NOT run")
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_offline_reader_matches_the_python_reader(client, sample, tmp_path, damage):
    run_dir = sample.root / "sessions" / "call-42" / sample.latest_run
    DAMAGE[damage](run_dir)
    expected = client.get(f"/api/sessions/call-42/runs/{sample.latest_run}/integrity").get_json()
    download = client.get(f"/api/sessions/call-42/runs/{sample.latest_run}/bundle")
    if damage == "invalid_manifest":  # the index no longer sees the run: build the archive by hand
        import tarfile

        with tarfile.open(tmp_path / "bundle.tar", "w", format=tarfile.USTAR_FORMAT) as archive:
            for name in ("run.json", "events.ndjson", "capture.json"):
                archive.add(run_dir / name, arcname=f"x/{name}")
        from otel_session.bundle.read import read_bundle

        expected = read_bundle(run_dir).as_json()
    else:
        assert download.status_code == 200
        (tmp_path / "bundle.tar").write_bytes(download.data)
    result = subprocess.run(
        [NODE, "--input-type=module", "-e", READ_TAR, str(STATIC / "bundle.js"), str(tmp_path / "bundle.tar")],
        capture_output=True, text=True, timeout=300, check=True,
    )
    offline = json.loads(result.stdout)

    def shape(diagnostics):
        return [{key: d.get(key) for key in ("code", "severity", "line", "seq")} for d in diagnostics]

    assert offline["status"] == expected["status"]
    assert offline["events"] == expected["event_count"]
    assert shape(offline["diagnostics"]) == shape(expected["diagnostics"])


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_offline_reader_refuses_a_file_that_is_not_a_tar(tmp_path):
    (tmp_path / "x.tar").write_bytes(b"PK\x03\x04 this is a zip" + b"\0" * 600)
    result = subprocess.run(
        [NODE, "--input-type=module", "-e", READ_TAR, str(STATIC / "bundle.js"), str(tmp_path / "x.tar")],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode != 0 and "not a bundle download" in result.stderr
