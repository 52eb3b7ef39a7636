"""The tolerant bundle reader: integrity status and diagnostics (SPEC §5.5), tailing, the run index.

Contract::

    result = read_bundle(path)      # -> BundleRead(status, events, diagnostics, manifest, capture)
    read_bundle(path, record_offsets=True).offsets  # byte offset of each record's line (a seek index's source)
    for records in iter_journal_slice(events_path, offset): ...  # seek + read, a chunk at a time
    for chunk in iter_line_chunks(handle): ...  # a file's bytes as whole lines, a block read at a time
    tail = JournalTail(events_path) # tail.poll() -> new complete records, never a partial line
    for run in iter_runs(root): ... # RunInfo of every live run (eval runs on request)

Reading is pure: nothing is written, garbage and unknown lines never raise. Unknown fields are
kept, unknown record types stay in place, garbage lines are reported and skipped, a torn final line
is buffered (normal while recording). Any diagnostic of severity ``error`` makes the status
``invalid``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from otel_session.core import layout
from otel_session.core.journal import (
    CAPTURE_SCHEMA,
    DEPTH_MARKER,
    MAX_DEPTH,
    REQUIRED_FIELDS,
    RUN_SCHEMA,
    TRUNCATED_FIELD,
    CaptureStatus,
    EventType,
    decode_line,
)

__all__ = [
    "BundleRead",
    "BundleStatus",
    "Diagnostic",
    "DiagnosticCode",
    "JournalTail",
    "RunInfo",
    "Severity",
    "find_bundles",
    "find_run",
    "iter_journal_slice",
    "iter_line_chunks",
    "iter_run_dirs",
    "iter_runs",
    "iter_session_runs",
    "parse_journal",
    "read_bundle",
    "read_manifest",
    "run_info",
]

_READ_BLOCK = 1 << 20
"""What a journal's whole readers (``read_bundle``, the catalog's rows) read of it at a time."""
_SHARED_FIELDS = ("session_id", "run_id", "type", "message_id", "tool_call_id")
"""Values most records repeat, parsed as one string object each (about 0.3 KB a record less)."""


class BundleStatus(str, Enum):
    RECORDING = "recording"
    COMPLETE = "complete"
    FAILED = "failed"
    INVALID = "invalid"


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"


class DiagnosticCode(str, Enum):
    MISSING_CAPTURE = "missing_capture"
    INVALID_CAPTURE = "invalid_capture"
    INVALID_MANIFEST = "invalid_manifest"
    SEQ_GAP = "seq_gap"
    COUNT_MISMATCH = "count_mismatch"
    TORN_TAIL = "torn_tail"
    GARBAGE_LINE = "garbage_line"
    UPSTREAM_DROP = "upstream_drop"
    RECONCILE_MISMATCH = "reconcile_mismatch"
    VALUE_TRUNCATED = "value_truncated"


@dataclass(frozen=True)
class Diagnostic:
    code: DiagnosticCode
    severity: Severity
    message: str
    line: int | None = None
    seq: int | None = None

    def as_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {"code": self.code.value, "severity": self.severity.value, "message": self.message}
        if self.line is not None:
            value["line"] = self.line
        if self.seq is not None:
            value["seq"] = self.seq
        return value


@dataclass
class BundleRead:
    path: Path
    status: BundleStatus
    manifest: dict[str, Any] | None
    capture: dict[str, Any] | None
    events: list[dict[str, Any]] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    offsets: list[int] | None = None
    """With ``record_offsets``: the byte offset in the journal of each of ``events``' lines."""

    @property
    def session_id(self) -> str | None:
        return (self.manifest or {}).get("session_id")

    @property
    def run_id(self) -> str | None:
        return (self.manifest or {}).get("run_id")

    @property
    def has_warnings(self) -> bool:
        return any(d.severity is Severity.WARNING for d in self.diagnostics)

    def as_json(self) -> dict[str, Any]:
        """The ``verify --json`` / ``…/integrity`` shape."""
        return {
            "path": str(self.path),
            "session_id": self.session_id,
            "run_id": self.run_id,
            "status": self.status.value,
            "event_count": len(self.events),
            "diagnostics": [d.as_json() for d in self.diagnostics],
        }


def _is_record(value: dict[str, Any]) -> bool:
    return (
        all(name in value for name in REQUIRED_FIELDS)
        and type(value["seq"]) is int
        and isinstance(value["type"], str)
        and isinstance(value["at"], str)
    )


def parse_journal(
    data: bytes, *, first_line: int = 1, offsets: list[int] | None = None
) -> tuple[list[dict[str, Any]], list[Diagnostic], bytes]:
    """Parse complete lines of ``data``; return (records, garbage diagnostics, trailing partial line).

    ``offsets``, when given, receives the byte offset in ``data`` of each record returned."""
    end = data.rfind(b"\n") + 1
    records: list[dict[str, Any]] = []
    diagnostics: list[Diagnostic] = []
    line_number = first_line - 1
    next_offset = 0
    shared: dict[str, str] = {}  # one string object for the ids and types every record repeats
    for raw in data[:end].split(b"\n")[:-1]:
        line_number += 1
        line_offset = next_offset
        next_offset += len(raw) + 1
        if not raw.strip():
            diagnostics.append(Diagnostic(DiagnosticCode.GARBAGE_LINE, Severity.ERROR, "empty line", line=line_number))
            continue
        try:
            value = decode_line(raw)
        except ValueError as exc:
            diagnostics.append(
                Diagnostic(DiagnosticCode.GARBAGE_LINE, Severity.ERROR, f"not a JSON object: {exc}", line=line_number)
            )
            continue
        if not _is_record(value):
            missing = [name for name in REQUIRED_FIELDS if name not in value]
            reason = f"missing {', '.join(missing)}" if missing else "seq, at or type has the wrong type"
            diagnostics.append(
                Diagnostic(DiagnosticCode.GARBAGE_LINE, Severity.ERROR, f"not a journal record: {reason}", line=line_number)
            )
            continue
        for name in _SHARED_FIELDS:
            text = value.get(name)
            if type(text) is str:
                value[name] = shared.setdefault(text, text)
        records.append(value)
        if offsets is not None:
            offsets.append(line_offset)
    return records, diagnostics, data[end:]


def iter_journal_slice(
    events_path: str | os.PathLike[str], offset: int, *, chunk_bytes: int = 256 << 10
) -> Iterator[list[dict[str, Any]]]:
    """The complete records of a journal from byte ``offset`` (a line start) on, one chunk at a time.

    Only what is iterated is read (seek, then reads of ``chunk_bytes``); garbage lines are skipped
    as :func:`parse_journal` skips them, a torn final line is left out. A line longer than a chunk
    is read whole. The file is opened without following a symlink planted in its place.
    """
    fd = os.open(events_path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as handle:
        handle.seek(offset)
        pending = b""
        while True:
            data = handle.read(chunk_bytes)
            if not data:
                return
            records, _garbage, pending = parse_journal(pending + data)
            if records:
                yield records


def iter_line_chunks(handle: BinaryIO, block_size: int = _READ_BLOCK) -> Iterator[bytes]:
    """The bytes of ``handle`` from where it stands to its end, read ``block_size`` at a time.

    Each chunk ends with a newline and holds whole lines (a line longer than a block is read whole,
    in one chunk); a last line the file does not end with a newline (a torn tail) is one last chunk,
    the only one that does not end with one. The chunks joined are the bytes read. Linear in their
    size: a stretch without a newline is kept as its blocks and joined once, however many blocks."""
    pieces: list[bytes] = []  # the start of a line no block has ended yet
    while block := handle.read(block_size):
        end = block.rfind(b"\n") + 1
        if not end:
            pieces.append(block)
            continue
        pieces.append(block if end == len(block) else block[:end])
        yield b"".join(pieces) if len(pieces) > 1 else pieces[0]
        pieces = [block[end:]] if end < len(block) else []
    if pieces:
        yield b"".join(pieces)


def _read_journal(
    events_path: Path, offsets: list[int] | None
) -> tuple[list[dict[str, Any]], list[Diagnostic], bytes, int]:
    """:func:`parse_journal` over the whole file, read a block at a time (records, garbage, torn
    tail, complete lines): never the file's bytes and all its lines at once besides the records
    (at 1M records that was 0.8 GB more at the peak than the parsed records themselves)."""
    records: list[dict[str, Any]] = []
    garbage: list[Diagnostic] = []
    lines = consumed = 0
    with open(events_path, "rb") as handle:
        for chunk in iter_line_chunks(handle):
            if not chunk.endswith(b"\n"):
                return records, garbage, chunk, lines  # the torn tail: the last chunk
            found: list[int] | None = [] if offsets is not None else None
            parsed, bad, _ = parse_journal(chunk, first_line=lines + 1, offsets=found)
            records += parsed
            garbage += bad
            if offsets is not None and found is not None:
                offsets += [consumed + offset for offset in found]
            lines += chunk.count(b"\n")
            consumed += len(chunk)
    return records, garbage, b"", lines


def _load_json_object(path: Path) -> dict[str, Any] | None:
    try:
        value = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def read_manifest(path: Path) -> dict[str, Any] | None:
    """Return a bundle's ``run.json`` if it is a valid v1 manifest, else ``None``."""
    manifest = _load_json_object(path / layout.RUN_FILE)
    if (
        manifest is None
        or manifest.get("schema") != RUN_SCHEMA
        or not isinstance(manifest.get("session_id"), str)
        or not isinstance(manifest.get("run_id"), str)
    ):
        return None
    return manifest


def _counts_valid(capture: dict[str, Any]) -> bool:
    """Counts are written at terminal status (SPEC §5.3): a recording capture may have none yet."""
    count = capture.get("event_count")
    return type(count) is int or (count is None and capture.get("status") == CaptureStatus.RECORDING.value)


def _check_capture(capture: dict[str, Any] | None, path: Path) -> tuple[dict[str, Any] | None, list[Diagnostic]]:
    if not (path / layout.CAPTURE_FILE).exists():
        return None, [Diagnostic(DiagnosticCode.MISSING_CAPTURE, Severity.ERROR, f"{layout.CAPTURE_FILE} is missing")]
    statuses = {status.value for status in CaptureStatus}
    if (
        capture is None
        or capture.get("schema") != CAPTURE_SCHEMA
        or capture.get("status") not in statuses
        or not _counts_valid(capture)
    ):
        return None, [
            Diagnostic(
                DiagnosticCode.INVALID_CAPTURE,
                Severity.ERROR,
                f"{layout.CAPTURE_FILE} is not a valid {CAPTURE_SCHEMA} document",
            )
        ]
    return capture, []


def read_bundle(path: str | os.PathLike[str], *, record_offsets: bool = False) -> BundleRead:
    """Read one bundle directory and judge its integrity. Never raises for bad content.

    ``record_offsets`` also keeps each record's byte offset in the journal (``BundleRead.offsets``)."""
    path = Path(path)
    diagnostics: list[Diagnostic] = []
    manifest = read_manifest(path)
    if manifest is None:
        diagnostics.append(
            Diagnostic(DiagnosticCode.INVALID_MANIFEST, Severity.ERROR, f"{layout.RUN_FILE} is missing or not {RUN_SCHEMA}")
        )
    capture, capture_diagnostics = _check_capture(_load_json_object(path / layout.CAPTURE_FILE), path)
    diagnostics += capture_diagnostics
    offsets: list[int] | None = [] if record_offsets else None
    try:
        events, garbage, torn, complete_lines = _read_journal(path / layout.EVENTS_FILE, offsets)
    except FileNotFoundError:
        events, garbage, torn, complete_lines = [], [], b"", 0
    except OSError as exc:
        events, garbage, torn, complete_lines = [], [], b"", 0
        offsets = [] if record_offsets else None
        diagnostics.append(Diagnostic(DiagnosticCode.GARBAGE_LINE, Severity.ERROR, f"cannot read journal: {exc}"))
    diagnostics += garbage
    capture_status = capture.get("status") if capture else None

    expected = 1
    for event in events:
        if manifest is not None and (event["session_id"], event["run_id"]) != (manifest["session_id"], manifest["run_id"]):
            diagnostics.append(
                Diagnostic(
                    DiagnosticCode.GARBAGE_LINE, Severity.ERROR, "record belongs to another session or run", seq=event["seq"]
                )
            )
        if event["seq"] != expected:
            diagnostics.append(
                Diagnostic(
                    DiagnosticCode.SEQ_GAP,
                    Severity.ERROR,
                    f"expected seq {expected}, found {event['seq']}",
                    seq=event["seq"],
                )
            )
        expected = event["seq"] + 1
        if event.get(TRUNCATED_FIELD) == "depth":
            diagnostics.append(
                Diagnostic(
                    DiagnosticCode.VALUE_TRUNCATED,
                    Severity.WARNING,
                    f"values nested deeper than {MAX_DEPTH} levels were cut, each replaced by {DEPTH_MARKER!r}",
                    seq=event["seq"],
                )
            )
        if event["type"] == EventType.UPSTREAM_DROP.value:
            payload = event.get("payload") if isinstance(event.get("payload"), dict) else {}
            diagnostics.append(
                Diagnostic(
                    DiagnosticCode.UPSTREAM_DROP,
                    Severity.WARNING,
                    f"a span lost {payload.get('dropped_events', 0)} events and "
                    f"{payload.get('dropped_attributes', 0)} attributes before it reached the collector",
                    seq=event["seq"],
                )
            )

    if torn:
        severity = Severity.ERROR if capture_status == CaptureStatus.COMPLETE.value else Severity.WARNING
        diagnostics.append(
            Diagnostic(
                DiagnosticCode.TORN_TAIL,
                severity,
                f"final line is incomplete ({len(torn)} bytes without a newline)",
                line=complete_lines + 1,
            )
        )
    if capture is not None and capture_status != CaptureStatus.RECORDING.value and capture["event_count"] != complete_lines:
        diagnostics.append(
            Diagnostic(
                DiagnosticCode.COUNT_MISMATCH,
                Severity.ERROR,
                f"{layout.CAPTURE_FILE} counts {capture['event_count']} events, the journal has {complete_lines} lines",
            )
        )

    if any(d.severity is Severity.ERROR for d in diagnostics):
        status = BundleStatus.INVALID
    else:
        status = BundleStatus(capture_status)
    return BundleRead(path, status, manifest, capture, events, diagnostics, offsets)


class JournalTail:
    """Incremental reader of a growing ``events.ndjson``: yields complete records only.

    A partial final line is kept back until its newline arrives; garbage lines are reported in
    ``diagnostics`` and skipped.
    """

    def __init__(self, path: str | os.PathLike[str], offset: int = 0) -> None:
        self.path = Path(path)
        self.offset = offset
        self._line = 1
        self.diagnostics: list[Diagnostic] = []

    def poll(self, max_bytes: int = 4 << 20) -> list[dict[str, Any]]:
        """Return the records completed since the last poll (from at most ``max_bytes`` new bytes)."""
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read(max_bytes)
        except FileNotFoundError:
            return []
        records, garbage, torn = parse_journal(data, first_line=self._line)
        consumed = len(data) - len(torn)
        if consumed == 0 and len(data) == max_bytes:
            # One line longer than max_bytes: skip it as garbage rather than stall forever.
            self.diagnostics.append(
                Diagnostic(DiagnosticCode.GARBAGE_LINE, Severity.ERROR, "line longer than the tail buffer", line=self._line)
            )
            consumed = len(data)
        self.offset += consumed
        self._line += data[:consumed].count(b"\n")
        self.diagnostics += garbage
        return records


@dataclass(frozen=True)
class RunInfo:
    """One run as the index sees it (from ``run.json`` and ``capture.json``)."""

    path: Path
    session_id: str
    run_id: str
    kind: str
    created_at: str
    capture_status: str | None
    agent: str | None = None
    eval_id: str | None = None
    service: str | None = None
    recorded_by: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "run_id": self.run_id,
            "kind": self.kind,
            "created_at": self.created_at,
            "capture_status": self.capture_status,
            "agent": self.agent,
            "eval_id": self.eval_id,
            "service": self.service,
        }


def run_info(run_path: Path) -> RunInfo | None:
    """The manifest and capture status of the run at ``run_path`` (None without a valid manifest)."""
    manifest = read_manifest(run_path)
    if manifest is None:
        return None
    capture = _load_json_object(run_path / layout.CAPTURE_FILE) or {}
    return RunInfo(
        path=run_path,
        session_id=manifest["session_id"],
        run_id=manifest["run_id"],
        kind=str(manifest.get("kind", "live")),
        created_at=str(manifest.get("created_at", "")),
        capture_status=capture.get("status") if isinstance(capture.get("status"), str) else None,
        agent=manifest.get("agent"),
        eval_id=manifest.get("eval_id"),
        service=manifest.get("service"),
        recorded_by=manifest.get("recorded_by"),
    )


def _run_dirs_under(sessions_root: Path) -> Iterator[Path]:
    if not sessions_root.is_dir():
        return
    for session_path in sorted(sessions_root.iterdir()):
        if session_path.is_dir() and not session_path.is_symlink():
            yield from _run_dirs_in_session(session_path)


def _run_dirs_in_session(session_path: Path) -> Iterator[Path]:
    for name in run_dir_names(session_path):
        yield session_path / name


def run_dir_names(session_path: str | os.PathLike[str]) -> list[str]:
    """The run directories in one session directory, by name, sorted (no symlinks, no hidden
    half-made bundles); [] when it cannot be listed."""
    try:
        entries = list(os.scandir(session_path))
    except OSError:
        return []
    return sorted(
        entry.name for entry in entries if layout.is_valid_run_id(entry.name) and entry.is_dir(follow_symlinks=False)
    )


def _infos(run_paths: Iterable[Path]) -> Iterator[RunInfo]:
    for run_path in run_paths:
        info = run_info(run_path)
        if info is not None:
            yield info


def iter_session_runs(root: str | os.PathLike[str], session_id: str, *, include_evals: bool = False) -> Iterator[RunInfo]:
    """The runs of one session, reading only that session's directory (and its eval twins when
    asked), not every bundle under ``root``."""
    root = Path(root)
    session_dirs = [layout.session_dir(root, session_id)]
    if include_evals and (root / "evals").is_dir():
        session_dirs += [
            eval_path / "sessions" / session_dirs[0].name
            for eval_path in sorted((root / "evals").iterdir())
            if eval_path.is_dir() and not eval_path.is_symlink()
        ]
    for session_path in session_dirs:
        if session_path.is_dir() and not session_path.is_symlink():
            yield from (info for info in _infos(_run_dirs_in_session(session_path)) if info.session_id == session_id)


def find_run(root: str | os.PathLike[str], run_id: str, *, include_evals: bool = False) -> RunInfo | None:
    """The run named ``run_id`` in any session (a directory lookup per session, no bundle read)."""
    if not layout.is_valid_run_id(run_id):
        return None
    root = Path(root)
    patterns = ["sessions/*/" + run_id] + (["evals/*/sessions/*/" + run_id] if include_evals else [])
    for pattern in patterns:
        for run_path in sorted(root.glob(pattern)):
            if run_path.is_dir() and not run_path.is_symlink() and not run_path.parent.is_symlink():
                info = run_info(run_path)
                if info is not None and info.run_id == run_id:
                    return info
    return None


def iter_runs(root: str | os.PathLike[str], *, include_evals: bool = False) -> Iterator[RunInfo]:
    """Every run under ``root``: live runs, and eval runs only when asked (never in the live index)."""
    return _infos(iter_run_dirs(root, include_evals=include_evals))


def iter_run_dirs(root: str | os.PathLike[str], *, include_evals: bool = False) -> Iterator[Path]:
    """The directory of every run under ``root``, without reading any bundle (``run_info`` reads one)."""
    root = Path(root)
    yield from _run_dirs_under(root / "sessions")
    if include_evals and (root / "evals").is_dir():
        for eval_path in sorted((root / "evals").iterdir()):
            if eval_path.is_dir() and not eval_path.is_symlink():
                yield from _run_dirs_under(eval_path / "sessions")


def find_bundles(paths: Iterable[str | os.PathLike[str]]) -> Iterator[Path]:
    """Bundle directories at or below each path (a directory with ``run.json`` or ``events.ndjson``)."""
    for start in paths:
        start = Path(start)
        if _is_bundle(start):
            yield start
            continue
        for directory, subdirs, _files in os.walk(start):
            subdirs[:] = sorted(name for name in subdirs if not name.startswith("."))  # a bundle being made
            candidate = Path(directory)
            if candidate != start and _is_bundle(candidate):
                subdirs.clear()
                yield candidate


def _is_bundle(path: Path) -> bool:
    return (path / layout.RUN_FILE).is_file() or (path / layout.EVENTS_FILE).is_file()
