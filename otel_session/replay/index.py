"""What a sealed run's reader keeps beside the bundle root, so a reader reads only what it shows.

Contract::

    index = open_run_index(root, run_path)   # -> RunIndex, or None (recording, unsound, unreadable)
    index.status                             # IndexStatus: LOADED | BUILT | REBUILT
    index.events(after_seq, limit)           # -> (records, next_after_seq): one slice of events.ndjson
    index.state(seq)                         # nearest checkpoint + at most 256 events (SPEC §7.1)
    index.view(seq, recent=, through=)       # a checkpoint trimmed for the replay page
    index.facts(), index.integrity(), index.turns(), index.last_seq, index.count
    index.facts_json(fallback_to_latest_run=) -> bytes   # the API's answer, straight from the file
    index.turns_json() -> bytes                          # turns.as_rows of the turn summaries

Files (derived, cache, never part of a bundle or its integrity; ``<root>/.index/replay/<run's
path under the root>/``): ``seek.json`` (the seek index: the byte offset and seq of every 256th
record, the journal's size, mtime and head/tail digests, the capture's digest, the other files'
digests, and a digest of itself), ``checkpoints.ndjson`` (``replay.checkpoints``), ``objects.json``,
``facts.json``, ``integrity.json`` and ``turns.json``. They are built once for a sealed run (capture
``complete`` or ``failed``: a sealed bundle never changes) by its first reader, from one read of
its journal, then kept; one build of a run at a time, across processes (``replay.building``: a
reader that finds one in progress waits for it and loads what it kept).

Nothing is trusted blindly: a missing, corrupt or stale index (the journal or capture changed,
a digest differs, a slice does not start at the record it promised) is rebuilt from the journal,
and says so (``REBUILT``, logged). A journal whose own records are not in strictly increasing seq
order on disk gets no index (``None``): its readers fold it in memory. A root that cannot be
written keeps the built index in memory only.
"""

from __future__ import annotations

import bisect
import hashlib
import multiprocessing
import os
from contextlib import AbstractContextManager, nullcontext
from enum import Enum
from pathlib import Path
from typing import Any

import orjson

from otel_session.bundle import files
from otel_session.bundle.read import BundleRead, iter_journal_slice, read_bundle
from otel_session.core import layout
from otel_session.core.journal import CaptureStatus
from otel_session.core.log import get_logger
from otel_session.replay import facts as run_facts
from otel_session.replay.building import BUILD_WAIT_S, build_turn
from otel_session.replay.checkpoints import CheckpointBook, build_checkpoints
from otel_session.replay.fold import CHECKPOINT_INTERVAL
from otel_session.replay.cost import price_table
from otel_session.replay.latency import slow_turn_threshold_ms
from otel_session.replay.turns import as_rows, from_rows, turn_summaries

__all__ = ["INDEX_DIR", "VIEW_WINDOW_MAX", "ChildBuild", "IndexStale", "IndexStatus", "RunIndex", "build_in_child", "index_path",
           "open_run_index"]

logger = get_logger(__name__)

INDEX_DIR = layout.INDEX_DIR

_SCHEMA = "otel-session.replay-index.v1"
_SEALED = frozenset({CaptureStatus.COMPLETE.value, CaptureStatus.FAILED.value})
_EDGE_BYTES = 64 << 10
_FILES = ("checkpoints.ndjson", "objects.json", "facts.json", "integrity.json", "turns.json")
VIEW_WINDOW_MAX = 10_000
"""A view looks for what records touch at most this many records past its checkpoint."""


class IndexStatus(str, Enum):
    LOADED = "loaded"
    BUILT = "built"
    REBUILT = "rebuilt"


class IndexStale(Exception):
    """A derived file does not match the journal it claims to index."""


def index_path(root: Path, run_path: Path) -> Path:
    """The directory of a run's derived files (``run_path`` must lie under ``root``)."""
    return root / INDEX_DIR / Path(run_path).relative_to(root)


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _journal_identity(run_path: Path) -> dict[str, Any] | None:
    """What an index is checked against: the journal's size, mtime and head/tail digests, the
    capture's digest (None when the run is not sealed or cannot be read)."""
    try:
        capture_bytes = (run_path / layout.CAPTURE_FILE).read_bytes()
        capture = orjson.loads(capture_bytes)
        if not isinstance(capture, dict) or capture.get("status") not in _SEALED:
            return None
        fd = os.open(run_path / layout.EVENTS_FILE, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as handle:
            stat = os.fstat(handle.fileno())
            head = handle.read(_EDGE_BYTES)
            handle.seek(max(0, stat.st_size - _EDGE_BYTES))
            tail = handle.read(_EDGE_BYTES)
    except (OSError, orjson.JSONDecodeError):
        return None
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "head": _digest(head), "tail": _digest(tail),
            "capture": _digest(capture_bytes), "slow_turn_ms": slow_turn_threshold_ms(None),
            # Kept facts are stale when their rules or the prices in force change, as when the journal does.
            "facts_version": run_facts.FACTS_VERSION, "prices": price_table().fingerprint}


def open_run_index(root: str | os.PathLike[str], run_path: str | os.PathLike[str], *, rebuild: bool = False,
                   child_build_bytes: int | None = None, wait_s: float = BUILD_WAIT_S,
                   builds: AbstractContextManager[Any] | None = None) -> RunIndex | None:
    """The run's index: loaded when it is sound, else built from the journal (and kept when the
    root can be written). None for a run that is not sealed or whose journal cannot be indexed.
    ``rebuild``: a reader found the loaded one wrong; build it again whatever its files say.
    ``child_build_bytes``: a journal at least this large is indexed by a child process
    (:func:`build_in_child`), so that the caller's memory never holds the whole parsed run.
    A build of the same run in progress (at seal, or by another reader) is waited for, at most
    ``wait_s``, and what it kept loaded (``replay.building``): the run is never built twice at once.
    ``builds``: held while this call builds, not while it loads or waits: a caller's bound on its builds at once."""
    root, run_path = Path(root), Path(run_path)
    identity = _journal_identity(run_path)
    if identity is None:
        return None
    directory = index_path(root, run_path)
    problem = "a reader found it wrong" if rebuild else "absent"
    seen = _stat_of(directory / "seek.json")
    if not rebuild and seen is not None:
        try:
            return RunIndex.load(run_path, directory, identity)
        except (OSError, ValueError, KeyError, TypeError, IndexStale) as exc:
            problem = str(exc) or type(exc).__name__
            logger.warning("replay index of %s is unusable (%s): rebuilding it from the journal", run_path, problem)
    with build_turn(root, directory, wait_s=wait_s):
        if _stat_of(directory / "seek.json") not in (None, seen):  # a build that held the turn kept one
            try:
                return RunIndex.load(run_path, directory, identity)
            except (OSError, ValueError, KeyError, TypeError, IndexStale) as exc:
                logger.warning("replay index of %s built meanwhile is unusable (%s): rebuilding it", run_path, exc)
        with builds or nullcontext():
            return _build(root, run_path, identity, rebuilt=problem != "absent", child_build_bytes=child_build_bytes)


def _build(root: Path, run_path: Path, identity: dict[str, Any], *, rebuilt: bool,
           child_build_bytes: int | None) -> RunIndex | None:
    """Build the index, in a child process when the journal is at least ``child_build_bytes``."""
    built_by_child = None
    if child_build_bytes is not None and identity["size"] >= child_build_bytes:
        built_by_child = build_in_child(root, run_path, rebuild=rebuilt)
    if built_by_child is ChildBuild.NOT_INDEXABLE:
        return None
    if built_by_child is ChildBuild.KEPT:
        try:
            index = RunIndex.load(run_path, index_path(root, run_path), identity)
        except (OSError, ValueError, KeyError, TypeError, IndexStale) as exc:
            logger.warning("replay index of %s built in a child process is unusable (%s)", run_path, exc)
        else:
            index.status = IndexStatus.REBUILT if rebuilt else IndexStatus.BUILT
            return index
    return RunIndex.build(root, run_path, identity, rebuilt=rebuilt)


def _stat_of(path: Path) -> tuple[int, int] | None:
    """(inode, mtime) of a file, None when absent: tells whether another build replaced it."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns


class ChildBuild(str, Enum):
    KEPT = "kept"  # the index is on disk: load it
    NOT_INDEXABLE = "not_indexable"  # not sealed (any more), or its records are unsound: read it whole
    NOT_KEPT = "not_kept"  # built, but the root cannot keep it: build in the caller


def build_in_child(root: str | os.PathLike[str], run_path: str | os.PathLike[str], *, rebuild: bool = False) -> ChildBuild | None:
    """Build the run's index in a child process (a fresh interpreter), so that the memory of one
    whole read (0.9 GB at 1M events) is given back to the system with it, not kept by a
    long-lived caller's allocator. None when the child failed (the caller builds it itself)."""
    context = multiprocessing.get_context("spawn")  # never fork a threaded server
    with context.Pool(1) as pool:
        try:
            return ChildBuild(pool.apply(_build_and_keep, (str(root), str(run_path), rebuild)))
        except Exception as exc:
            logger.warning("replay index of %s: the build in a child process failed (%s)", run_path, exc)
            return None


def _build_and_keep(root: str, run_path: str, rebuild: bool) -> str:
    """The child's work; its parent holds the run's build lock."""
    identity = _journal_identity(Path(run_path))
    index = None if identity is None else RunIndex.build(Path(root), Path(run_path), identity, rebuilt=rebuild)
    if index is None:
        return ChildBuild.NOT_INDEXABLE.value
    return (ChildBuild.KEPT if index.kept else ChildBuild.NOT_KEPT).value


class RunIndex:
    """The seek index, checkpoints, facts, integrity and turn summaries of one sealed run."""

    def __init__(self, run_path: Path, directory: Path, seek: dict[str, Any], status: IndexStatus,
                 contents: dict[str, bytes] | None = None) -> None:
        self.run_path = run_path
        self.directory = directory
        self.status = status
        self._seek = seek
        self._offsets: list[int] = seek["offsets"]
        self._seqs: list[int] = seek["seqs"]
        self._line_offsets: list[int] = seek["line_offsets"]
        self._ids = tuple(seek["ids"])
        self._contents = contents  # the files, when the root could not keep them
        self._book: CheckpointBook | None = None
        self._integrity: dict[str, Any] | None = None
        self._verified: dict[str, tuple[int, int]] = {}  # file -> (size, mtime_ns) when its digest was checked
        self.count: int = seek["count"]
        self.last_seq: int = seek["last_seq"]

    # -- building and loading -------------------------------------------------------------------

    @classmethod
    def build(cls, root: Path, run_path: Path, identity: dict[str, Any], *, rebuilt: bool = False) -> RunIndex | None:
        """Read the journal once and derive every file (None when its records are unsound)."""
        directory = index_path(root, run_path)
        bundle = read_bundle(run_path, record_offsets=True)
        own, offsets = _own_records(bundle)
        if own is None:
            return None
        built = build_checkpoints(own)
        line_offsets, position = [], 0
        for line in built.lines:
            line_offsets.append(position)
            position += len(line)
        integrity = {**bundle.as_json(), "capture": bundle.capture}
        integrity.pop("path")
        facts = run_facts.build_session_facts(bundle, slow_turn_ms=identity["slow_turn_ms"])
        facts.pop("fallback_to_latest_run")  # per request: facts_json() puts it first
        facts["integrity"] = {**facts["integrity"], "capture": bundle.capture}
        contents = {
            "checkpoints.ndjson": b"".join(built.lines),
            "objects.json": orjson.dumps(built.objects),
            "facts.json": orjson.dumps(facts),
            "integrity.json": orjson.dumps(integrity),
            "turns.json": orjson.dumps(as_rows(turn_summaries(own))),
        }
        seek = {
            "schema": _SCHEMA,
            "interval": CHECKPOINT_INTERVAL,
            "journal": identity,
            "ids": [own[0]["session_id"], own[0]["run_id"]] if own else [bundle.session_id, bundle.run_id],
            "count": len(own),
            "last_seq": own[-1]["seq"] if own else 0,
            "offsets": offsets[::CHECKPOINT_INTERVAL],
            "seqs": [event["seq"] for event in own[::CHECKPOINT_INTERVAL]],
            "line_offsets": line_offsets,
            "files": {name: [len(data), _digest(data)] for name, data in contents.items()},
        }
        seek["digest"] = _digest(orjson.dumps(seek, option=orjson.OPT_SORT_KEYS))
        status = IndexStatus.REBUILT if rebuilt else IndexStatus.BUILT
        try:
            _write(root, directory, contents, seek)
        except (OSError, layout.UnsafePathError) as exc:
            logger.warning("replay index of %s kept in memory only: cannot write %s (%s)", run_path, directory, exc)
            return cls(run_path, directory, seek, status, contents)
        return cls(run_path, directory, seek, status)

    @classmethod
    def load(cls, run_path: Path, directory: Path, identity: dict[str, Any]) -> RunIndex:
        """Load and check ``seek.json`` against the journal; raise what makes it unusable."""
        seek = orjson.loads(_read_private(directory / "seek.json"))
        if not isinstance(seek, dict) or seek.get("schema") != _SCHEMA:
            raise IndexStale(f"not a {_SCHEMA} document")
        claimed = seek.pop("digest", None)
        if claimed != _digest(orjson.dumps(seek, option=orjson.OPT_SORT_KEYS)):
            raise IndexStale("seek.json does not match its digest")
        if seek["journal"] != identity or seek["interval"] != CHECKPOINT_INTERVAL:
            raise IndexStale("the journal, its capture or the settings changed since it was built")
        for name in _FILES:
            if os.stat(directory / name).st_size != seek["files"][name][0]:
                raise IndexStale(f"{name} has another size than recorded")
        index = cls(run_path, directory, seek, IndexStatus.LOADED)
        index._file("checkpoints.ndjson")  # checked whole once: a view reads lines anywhere in it
        return index

    # -- reading ------------------------------------------------------------------------------

    def events(self, after_seq: int, limit: int) -> tuple[list[dict[str, Any]], int | None]:
        """Up to ``limit`` of the run's records with a seq above ``after_seq``, reading only from
        the indexed record at or before it; the seq to ask after next, None at the end."""
        slot = max(0, bisect.bisect_right(self._seqs, after_seq + 1) - 1)
        page: list[dict[str, Any]] = []
        if not self._seqs or after_seq >= self.last_seq:
            return page, None
        first = True
        for records in iter_journal_slice(self.run_path / layout.EVENTS_FILE, self._offsets[slot]):
            if first:
                self._check_start(records, slot)
                first = False
            for record in records:
                if record["seq"] > after_seq and (record["session_id"], record["run_id"]) == self._ids:
                    if len(page) == limit:
                        return page, page[-1]["seq"]
                    page.append(record)
        if first:  # nothing at all where the index promised a record
            raise IndexStale(f"the journal has no record at byte {self._offsets[slot]}")
        return page, None

    def state(self, seq: int | None) -> dict[str, Any]:
        """The replay state after every record with seq <= ``seq`` (the newest when None)."""
        line, folded = self._line_for(seq)
        state = self._checkpoints().full_state(line)
        for event in folded:
            state.apply(event)
        return state.render()

    def view(self, seq: int | None, *, recent: int, through: int | None = None) -> dict[str, Any]:
        """The checkpoint at or before ``seq``, trimmed for the page (``CheckpointBook.view``),
        with every message and tool the records up to ``through`` touch (at most
        :data:`VIEW_WINDOW_MAX` records past it), and the ``base_seq`` the page folds on from."""
        line, _ = self._line_for(seq, fold=False)
        base_seq = self._checkpoint_seq(line)
        ids: set[str] = set()
        if through is not None and through > base_seq:
            window, _ = self.events(base_seq, min(VIEW_WINDOW_MAX, through - base_seq))
            for event in window:
                if event["seq"] > through:
                    break
                if isinstance(event.get("message_id"), str):
                    ids.add("m:" + event["message_id"])
                if isinstance(event.get("tool_call_id"), str):
                    ids.add("t:" + event["tool_call_id"])
        view = self._checkpoints().view(line, recent=recent, ids=ids)
        return {"base_seq": base_seq, "last_seq": self.last_seq, "event_count": self.count, **view}

    def facts(self) -> dict[str, Any]:
        """The run's facts (``facts.build_session_facts``, its integrity with the capture), without
        ``fallback_to_latest_run``: that is the request's."""
        return orjson.loads(self._file("facts.json"))

    def facts_json(self, *, fallback_to_latest_run: bool) -> bytes:
        """The facts as the API answers them, made from the file's bytes (no parse: a 1M-event
        run's facts are about 11 MB of JSON)."""
        flag = b"true" if fallback_to_latest_run else b"false"
        return b"".join((b'{"fallback_to_latest_run":', flag, b",", memoryview(self._file("facts.json"))[1:]))

    def integrity(self) -> dict[str, Any]:
        """The reader's verdict (``BundleRead.as_json`` without its path) and the capture."""
        if self._integrity is None:
            self._integrity = orjson.loads(self._file("integrity.json"))
        return self._integrity

    def turns(self) -> list[dict[str, Any]]:
        return from_rows(orjson.loads(self._file("turns.json")))

    def turns_json(self) -> bytes:
        """The turn summaries as ``turns.as_rows`` writes them, straight from the file."""
        return self._file("turns.json")

    @property
    def kept(self) -> bool:
        """Whether its files are on disk (else the root could not be written: held in memory)."""
        return self._contents is None

    def nbytes(self) -> int:
        """About what this object holds in memory (for a byte-bounded cache)."""
        held = sum(len(data) for data in (self._contents or {}).values())
        directory = 8 * self._seek["files"]["objects.json"][0]  # parsed once a view asks for it
        return 64 * (len(self._offsets) + len(self._line_offsets)) + held + directory + 4096

    # -- internals ----------------------------------------------------------------------------

    def _line_for(self, seq: int | None, *, fold: bool = True) -> tuple[int, list[dict[str, Any]]]:
        """The checkpoint line at or before ``seq`` and (with ``fold``) the records past it up to ``seq``."""
        if seq is None or seq > self.last_seq:
            seq = self.last_seq
        slot = bisect.bisect_right(self._seqs, seq) - 1
        if slot < 0:
            return 0, []
        if not fold:
            return slot, []
        folded, _ = self.events(self._seqs[slot] - 1, CHECKPOINT_INTERVAL)
        return slot, [event for event in folded if event["seq"] <= seq]

    def _checkpoint_seq(self, line: int) -> int:
        """The seq the state of checkpoint ``line`` is at (0 for the empty state)."""
        return 0 if line == 0 else self._checkpoints_line(line)["seq"]

    def _check_start(self, records: list[dict[str, Any]], slot: int) -> None:
        own = [record for record in records if (record["session_id"], record["run_id"]) == self._ids]
        if not own or own[0]["seq"] != self._seqs[slot]:
            raise IndexStale(f"the journal at byte {self._offsets[slot]} is not record seq {self._seqs[slot]}")

    def _checkpoints(self) -> CheckpointBook:
        if self._book is None:
            self._book = CheckpointBook(self._checkpoints_line, orjson.loads(self._file("objects.json")))
        return self._book

    def _checkpoints_line(self, line: int) -> dict[str, Any]:
        start = self._line_offsets[line]
        end = self._line_offsets[line + 1] if line + 1 < len(self._line_offsets) else self._seek["files"]["checkpoints.ndjson"][0]
        if self._contents is not None:
            data = self._contents["checkpoints.ndjson"][start:end]
        else:
            with open(self.directory / "checkpoints.ndjson", "rb") as handle:
                handle.seek(start)
                data = handle.read(end - start)
        parsed = orjson.loads(data)
        if not isinstance(parsed, dict) or parsed.get("k") != line:
            raise IndexStale(f"checkpoints.ndjson line {line} is not checkpoint {line}")
        return parsed

    def _file(self, name: str) -> bytes:
        """A derived file's bytes: its digest checked on its first read, its size and mtime after."""
        if self._contents is not None:
            return self._contents[name]
        fd = os.open(self.directory / name, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as handle:
            stat = os.fstat(handle.fileno())
            data = handle.read()
        if self._verified.get(name) != (len(data), stat.st_mtime_ns):
            if [len(data), _digest(data)] != self._seek["files"][name]:
                raise IndexStale(f"{name} does not match its digest")
            self._verified[name] = (len(data), stat.st_mtime_ns)
        return data


def _own_records(bundle: BundleRead) -> tuple[list[dict[str, Any]] | None, list[int]]:
    """The run's own records and their byte offsets when they lie on disk in strictly increasing
    seq order, each seq once (so a slice of the file is a slice of the run); (None, []) otherwise."""
    own = run_facts.run_events(bundle)
    session_run = (own[0]["session_id"], own[0]["run_id"]) if own else None
    offsets = [offset for event, offset in zip(bundle.events, bundle.offsets or ())
               if (event["session_id"], event["run_id"]) == session_run]
    in_file = (event for event in bundle.events if (event["session_id"], event["run_id"]) == session_run)
    # In file order, each the record run_events kept in seq order: so their offsets increase.
    if len(offsets) != len(own) or any(found is not kept for found, kept in zip(in_file, own)):
        return None, []
    return own, offsets


def _read_private(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def _write(root: Path, directory: Path, contents: dict[str, bytes], seek: dict[str, Any]) -> None:
    """Write the files (0600 in 0700 directories), ``seek.json`` last: it is what makes them an index."""
    files.make_private_dirs(root, directory)
    for name, data in contents.items():
        tmp = files.temporary_path(directory / name)
        fd = files.write_temporary(tmp, data)
        os.close(fd)
        os.replace(tmp, directory / name)
    files.write_json_atomic(directory / "seek.json", seek, sync=False)
