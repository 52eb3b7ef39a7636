"""The tolerant reader, the tail reader and `otel-session verify` on sample bundles."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from otel_session.cli import main
from otel_session.core.journal import format_timestamp, parse_timestamp
from otel_session.bundle.read import BundleStatus, JournalTail, Severity, find_bundles, iter_line_chunks, read_bundle

SAMPLES = Path(__file__).resolve().parents[2] / "fixtures" / "bundles"


@pytest.mark.parametrize(
    "name,status,codes,events",
    [
        ("complete", "complete", [], 7),
        ("unknown-type-and-fields", "complete", [], 8),
        ("recording-torn-tail", "recording", [("torn_tail", "warning")], 5),
        ("recording-without-counts", "recording", [("torn_tail", "warning")], 5),
        ("garbage-line", "invalid", [("garbage_line", "error")] * 3, 7),
        ("seq-gap", "invalid", [("seq_gap", "error")], 6),
        ("count-mismatch", "invalid", [("count_mismatch", "error")], 7),
        ("missing-capture", "invalid", [("missing_capture", "error")], 7),
        ("invalid-capture", "invalid", [("invalid_capture", "error")], 7),
        ("failed-disk-full", "failed", [("torn_tail", "warning")], 4),
        ("upstream-drop", "complete", [("upstream_drop", "warning")], 8),
    ],
)
def test_sample_bundles(name, status, codes, events):
    result = read_bundle(SAMPLES / name)
    assert result.status.value == status
    assert [(d.code.value, d.severity.value) for d in result.diagnostics] == codes
    assert len(result.events) == events
    assert result.session_id == "call-42"


@pytest.mark.parametrize(
    ("capture", "status"),
    [
        ({"status": "recording"}, "recording"),  # counts are written at terminal status (SPEC §5.3)
        ({"status": "recording", "event_count": None}, "recording"),
        ({"status": "recording", "event_count": "5"}, "invalid"),
        ({"status": "complete"}, "invalid"),
        ({"status": "failed", "failure": {"failed_at": "x", "code": "disk_full", "message": "m"}}, "invalid"),
    ],
)
def test_only_a_recording_capture_may_have_no_counts_yet(tmp_path, capture, status):
    shutil.copytree(SAMPLES / "complete", tmp_path / "run")
    (tmp_path / "run" / "capture.json").write_text(json.dumps({"schema": "otel-session.capture.v1", **capture}))
    result = read_bundle(tmp_path / "run")
    assert result.status.value == status
    codes = [d.code.value for d in result.diagnostics]
    assert codes == ([] if status == "recording" else ["invalid_capture"])
    assert len(result.events) == 7


def test_unknown_types_and_fields_are_kept_in_place():
    result = read_bundle(SAMPLES / "unknown-type-and-fields")
    assert [e["type"] for e in result.events][4] == "future_thing"
    assert result.events[4]["extra_field"] is True


def test_garbage_lines_report_their_line_numbers():
    result = read_bundle(SAMPLES / "garbage-line")
    assert [d.line for d in result.diagnostics] == [4, 5, 6]
    assert [e["seq"] for e in result.events] == list(range(1, 8))


def test_torn_tail_in_a_complete_capture_is_an_error(tmp_path):
    bundle = shutil.copytree(SAMPLES / "complete", tmp_path / "b")
    with open(bundle / "events.ndjson", "ab") as handle:
        handle.write(b'{"seq":8')
    result = read_bundle(bundle)
    assert result.status is BundleStatus.INVALID
    assert [(d.code.value, d.severity) for d in result.diagnostics] == [("torn_tail", Severity.ERROR)]


def test_records_of_another_run_are_reported(tmp_path):
    bundle = shutil.copytree(SAMPLES / "complete", tmp_path / "b")
    lines = (bundle / "events.ndjson").read_bytes().splitlines(keepends=True)
    foreign = orjson.loads(lines[1])
    foreign["run_id"] = "run-00000000-0000-0000-0000-000000000000"
    lines[1] = orjson.dumps(foreign) + b"\n"
    (bundle / "events.ndjson").write_bytes(b"".join(lines))
    assert read_bundle(bundle).status is BundleStatus.INVALID


@pytest.mark.parametrize(
    "content",
    [b"", b"\x00\x01\x02\n", b"\xff\xfe garbage\n", b"{" * 5000 + b"\n", b"null\n", b'{"seq": 1}\n', b"\n\n\n"],
)
def test_reader_never_raises_on_garbage(tmp_path, content):
    bundle = shutil.copytree(SAMPLES / "complete", tmp_path / "b")
    (bundle / "events.ndjson").write_bytes(content)
    (bundle / "capture.json").write_bytes(content)
    result = read_bundle(bundle)
    assert result.status is BundleStatus.INVALID
    assert result.diagnostics


def test_tail_never_yields_a_partial_line(tmp_path):
    path = tmp_path / "events.ndjson"
    lines = (SAMPLES / "complete" / "events.ndjson").read_bytes()
    tail = JournalTail(path)
    assert tail.poll() == []
    seen = []
    for cut in range(0, len(lines) + 1, 37):  # grow the file in odd-sized pieces
        path.write_bytes(lines[:cut])
        seen += tail.poll()
        assert all(isinstance(r, dict) for r in seen)
    path.write_bytes(lines)
    seen += tail.poll()
    assert [r["seq"] for r in seen] == list(range(1, 8))
    assert tail.offset == len(lines)
    resumed = JournalTail(path, offset=lines.index(b"\n") + 1)
    assert [r["seq"] for r in resumed.poll()] == list(range(2, 8))


def test_tail_reports_garbage_and_goes_on(tmp_path):
    path = tmp_path / "events.ndjson"
    good = (SAMPLES / "complete" / "events.ndjson").read_bytes().splitlines(keepends=True)
    path.write_bytes(good[0] + b"garbage\n" + good[1])
    tail = JournalTail(path)
    assert [r["seq"] for r in tail.poll()] == [1, 2]
    assert [(d.code.value, d.line) for d in tail.diagnostics] == [("garbage_line", 2)]


_LINES = b'{"a":1}\n' + b"\0" * 50 + b"x\n" + b"\n" + b"ab\ncd\n"


@pytest.mark.parametrize("block_size", [1, 2, 3, 7, 64, 1 << 20])
@pytest.mark.parametrize("torn", [b"", b"e" * 23])
def test_line_chunks_are_whole_lines_whatever_the_block(tmp_path, block_size, torn):
    """The journal's readers share ``iter_line_chunks``: whole lines (one of 51 bytes read over up
    to 51 blocks), then a torn tail alone, the bytes of the file, none lost or doubled."""
    path = tmp_path / "lines"
    path.write_bytes(_LINES + torn)
    with open(path, "rb") as handle:
        chunks = list(iter_line_chunks(handle, block_size))
    assert b"".join(chunks) == _LINES + torn
    whole = chunks[:-1] if torn else chunks
    assert all(chunk.endswith(b"\n") for chunk in whole) and chunks[len(whole):] == ([torn] if torn else [])
    assert b"\0" * 50 + b"x\n" in [line + b"\n" for chunk in whole for line in chunk.split(b"\n")[:-1]]


def test_a_long_stretch_without_a_newline_costs_its_length(tmp_path):
    """4 MiB without a newline (a crash's NULs) read 16 bytes at a time: 262,144 blocks kept, joined
    once. Joining the unfinished line to each block as it came (``sealed_row`` did: quadratic)
    would copy 550 GB here, and this test would not end; both readers now read this way."""
    path = tmp_path / "stretch"
    path.write_bytes(b"{}\n" + b"\0" * (4 << 20) + b"\n{}")
    with open(path, "rb") as handle:
        sizes = [len(chunk) for chunk in iter_line_chunks(handle, 16)]
    assert sizes[0] == 3 and sum(sizes[:-1]) == 3 + (4 << 20) + 1 and sizes[-1] == 2


def test_find_bundles_walks_directories():
    found = sorted(p.name for p in find_bundles([SAMPLES]))
    assert found == sorted(p.name for p in SAMPLES.iterdir())


def test_verify_exit_codes_and_json():
    runner = CliRunner()
    ok = runner.invoke(main, ["verify", str(SAMPLES / "complete")])
    assert ok.exit_code == 0 and ok.output.startswith("complete")
    bad = runner.invoke(main, ["verify", str(SAMPLES)])
    assert bad.exit_code == 1
    assert len(bad.output.strip().splitlines()) == len(list(SAMPLES.iterdir()))
    as_json = runner.invoke(main, ["verify", "--json", str(SAMPLES / "seq-gap")])
    (entry,) = json.loads(as_json.output)
    assert entry["status"] == "invalid" and entry["diagnostics"][0]["code"] == "seq_gap"
    assert set(entry) == {"path", "session_id", "run_id", "status", "event_count", "diagnostics"}
    recording = str(SAMPLES / "recording-torn-tail")
    assert runner.invoke(main, ["verify", recording]).exit_code == 1
    assert runner.invoke(main, ["verify", "--allow-recording", recording]).exit_code == 0
    assert runner.invoke(main, ["verify", "--allow-recording", "--strict", recording]).exit_code == 1
    assert runner.invoke(main, ["verify", "--strict", str(SAMPLES / "upstream-drop")]).exit_code == 1
    assert runner.invoke(main, ["verify", "/no/such/path"]).exit_code == 2
    assert runner.invoke(main, ["verify"]).exit_code == 2


def test_sessions_lists_newest_first(tmp_path):
    root = tmp_path / "root"
    for name, created in (("old", "2026-01-01T00:00:00.000000Z"), ("new", "2026-06-01T00:00:00.000000Z")):
        target = root / "sessions" / name / "run-5f1c2a7e-0b7d-4c3e-9a51-3d2e8f9b6c10"
        shutil.copytree(SAMPLES / "complete", target)
        manifest = json.loads((target / "run.json").read_text())
        manifest.update(session_id=name, created_at=created)
        (target / "run.json").write_text(json.dumps(manifest))
    out = CliRunner().invoke(main, ["sessions", "--dir", str(root), "--json"])
    assert [s["session_id"] for s in json.loads(out.output)] == ["new", "old"]


@pytest.mark.parametrize("time_ns", [0, 1_796_000_000_123_456_000, 4_102_444_799_999_999_000])
def test_parse_timestamp_inverts_format_timestamp(time_ns):
    assert parse_timestamp(format_timestamp(time_ns)) == time_ns


def test_format_timestamp_of_interleaved_seconds():
    """Requests of several runs interleave their seconds; each stamp stays exact, past the prefix cache's bound too."""
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    moments = [start + k * 1_000_000_007_000 for k in range(3_000) for start in (1_796_000_000_000_001_000, 17_000)]
    for time_ns in moments + moments[::-1]:
        assert format_timestamp(time_ns) == (epoch + timedelta(microseconds=time_ns // 1000)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-29T22:52:01.123456+01:00", 1_795_989_121_123_456_000),
        ("2026-11-29T22:52:01.123456", 1_795_992_721_123_456_000),  # no offset: UTC
        ("yesterday", None), ("", None), (None, None), (1_795_992_721, None),
    ],
)
def test_parse_timestamp_of_other_values(text, expected):
    assert parse_timestamp(text) == expected
