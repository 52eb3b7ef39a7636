"""The bundle writer: run-scoped, append-only, bounded, never blocking the producer (SPEC §5.3–5.4).

Contract::

    writer = BundleWriter(root, identifier=redactor.identifier)  # one writer thread for all runs
    run = writer.open_run(session_id=..., run_id=...)  # creates the bundle, takes the run's lock
    run.append("turn_started", {"state": "greet", "required_slots": []}, at_ns=...)  # -> AppendResult
    run.close()                                       # drain, count lines, write terminal capture
    writer.force_flush(); writer.shutdown()           # like an OTel SpanExporter
    BundleWriter(root, seal_sync=FsyncEach())         # how seals sync (default: $OTEL_SESSION_SEAL_SYNC)
    BundleWriter(root, hooks=CatalogHook(root))       # told of runs opened and sealed, on the writer thread

Producers enqueue fully stamped records (``seq`` assigned at enqueue, ``at`` from the event's own
timestamp) and never touch the disk; the writer thread appends them in batches (a flush starts 25 ms
after the first queued record, or at once when 256 records or 256 KiB are queued; everything queued
goes out in one ``write``, one line per record, records never merged). The runs that close in one
writer pass are sealed as one group: one sync of their file system for all of them, then their
captures renamed, then one more (``otel_session.bundle.seal``). Every id that names a bundle
(session id, agent, service: the directory and ``run.json``) goes through ``identifier`` here, the
one place all writers pass (default: ``Redactor.from_env(root).identifier``, issue 15 §5). Reaching a queue bound, an
oversized event or an append error marks that run's capture ``failed`` with a code, stops its
recording and is logged; nothing raises into the producer and nothing is dropped silently.
"""
from __future__ import annotations

import atexit
import errno
import fcntl
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson

from otel_session.core import layout
from otel_session.bundle.capture_pool import CapturePool
from otel_session.bundle.claims import JournalFiles, WriterClaims, release
from otel_session.bundle.files import (
    DIR_MODE,
    FILE_MODE,
    json_document,
    make_empty_file,
    make_private_dir,
    make_private_dirs,
    require_real_dir,
    write_json_atomic,
    write_new_file,
)
from otel_session.core.journal import CAPTURE_SCHEMA, RUN_SCHEMA, CaptureStatus, RunKind, format_timestamp
from otel_session.core.log import get_logger
from otel_session.bundle.recorder import (
    AppendResult,
    FailureCode,
    RunLockedError,
    RunRecorder,
    RunSealedError,
    WriterClosedError,
    WriterLimits,
    Written,
)
from otel_session.bundle.recording import WaitResult, WaitStatus
from otel_session.bundle.hooks import HookTeller, RunHooks, SealedRun
from otel_session.redact import Redactor
from otel_session.bundle.seal import SealSync, seal_sync_from_env, seal_together
from otel_session.bundle.recovery import (
    check_recording,
    cut_last_record,
    last_record,
    recover_journal,
    remove_abandoned_builds,
    remove_seal_leftovers,
    restart_in_forked_children,
    weak_atexit,
)


__all__ = [
    "AppendResult",
    "BundleWriter",
    "FailureCode",
    "RunHooks",
    "RunLockedError",
    "RunRecorder",
    "RunSealedError",
    "WaitResult",
    "WaitStatus",
    "WriterClosedError",
    "WriterLimits",
    "Written",
    "write_json_atomic",
]

logger = get_logger(__name__)

_KNOWN_DIRS = 4096
_RunKey = tuple[RunKind | str, str, str | None, str | None, str, bool, str | None, bool]
"""``open_run``'s arguments but ``run_id`` and ``created_at_ns``: ``(kind, session_id, eval_id, agent,
service, service given, recorded_by, session_derived)``, the service defaulted (``$OTEL_SERVICE_NAME``)."""
_MANIFEST_ORDER = (
    "schema", "session_id", "run_id", "kind", "created_at", "service", "eval_id", "agent", "recorded_by",
    "session_derived",
)
"""The order ``open_run`` writes a manifest's fields in (``run.json``)."""
_RunHead = tuple[str, str, dict[str, Any]]
"""``(stored session id, session directory, manifest fields)`` of a ``_RunKey`` (``_run_head``)."""


def _check_text(name: str, value: Any) -> None:
    """Raise ``ValueError`` for a ``str`` id that is not valid Unicode text (a lone surrogate); the
    message names the field, never its value (an id may be personal data, and a caller may log it)."""
    if isinstance(value, str) and value.encode("utf-8", "replace").decode("utf-8") != value:
        raise ValueError(f"{name} is not valid Unicode text (it holds a lone surrogate)")


_RECORDING_DOCUMENT = json_document(
    {"schema": CAPTURE_SCHEMA, "status": CaptureStatus.RECORDING.value, "event_count": 0})
"""``capture.json`` of a run being recorded, the same bytes for every run."""


class BundleWriter:
    """Writes run bundles under ``root`` with one background thread. Follows the exporter contract:
    :meth:`force_flush` and :meth:`shutdown` (idempotent, drains once, leaves no thread or file)."""

    def __init__(
        self, root: str | os.PathLike[str], *, limits: WriterLimits | None = None,
        identifier: Callable[[str], str] | None = None, seal_sync: SealSync | None = None,
        hooks: RunHooks | None = None,
    ) -> None:
        self.root = Path(root)
        self.limits = limits or WriterLimits()
        self._seal_sync = seal_sync or seal_sync_from_env()
        """How the runs closing in one writer pass are made durable together (``otel_session.bundle.seal``)."""
        self._hooks = HookTeller(hooks) if hooks is not None else None
        """Tells ``hooks`` (the catalog) of runs opened and sealed, from a thread of its own."""
        self._identifier = identifier
        """Maps an id holding PII to the one stored (``Redactor.identifier``); made on first use."""
        self._cond = threading.Condition()
        self._written_cond = threading.Condition()
        """Notified after each writer pass (records written, runs sealed): see :meth:`wait_written`."""
        self._dirty: dict[RunRecorder, None] = {}
        self._deadline = 0.0
        self._urgent = False
        self._busy = False
        self._stopping = False
        self._closed = False
        self._open_runs: dict[str, RunRecorder] = {}
        self._open_lock = threading.Lock()
        self._root_name = os.fspath(self.root)
        self._captures = CapturePool(self._root_name)
        """Spare ``recording`` capture inodes: seals keep them, opens reuse them (``capture_pool``)."""
        self._claims = WriterClaims(self._root_name)
        """This writer's lock and its runs' owner marks: one writer per run (``claims``)."""
        self._journals = JournalFiles()
        """The journals the writer thread keeps open, a bounded few: no descriptor per open run."""
        self._known_dirs: set[str] = set()
        """Session directories made or checked already (under ``_open_lock``)."""
        self._stored_ids: dict[str, str] = {}
        """Ids as stored, by the id given (``_stored_identifier``)."""
        self._run_heads: dict[_RunKey, _RunHead] = {}
        """What the runs of one session, agent and service share, checked once (``_run_head``)."""
        self._pid = os.getpid()
        """This process's (a system call each time asked; a forked child sets its own)."""
        self._thread = threading.Thread(target=self._run, name="otel-session-writer", daemon=True)
        self._thread.start()
        self._atexit = weak_atexit(self)
        restart_in_forked_children(self)

    def _after_fork_in_child(self) -> None:
        """A forked child (gunicorn ``--preload``, multiprocessing) gets a writer of its own.

        ``fork`` copies no thread: without this the child's records would queue and never be
        written. Runs the parent had open stay the parent's (their journals, their locks): the
        child refuses records for them and starts a new writer thread for the runs it opens.
        """
        self._pid = os.getpid()
        if self._closed:
            return  # shut down in the parent: nothing to restart, nothing of the child's to write
        self._cond = threading.Condition()
        self._written_cond = threading.Condition()
        self._open_lock = threading.Lock()
        self._dirty = {}
        self._urgent = self._busy = self._stopping = False
        self._captures.abandon()  # the parent's: its spares and its lock stay the parent's
        self._captures = CapturePool(self._root_name)
        self._claims.abandon()  # the parent's lock: its runs stay the parent's
        self._claims = WriterClaims(self._root_name)
        self._journals = JournalFiles(self._journals.limit)
        inherited, self._open_runs = list(self._open_runs.values()), {}
        for recorder in inherited:
            recorder._disown_after_fork()
        if inherited:
            logger.warning("forked child: %d run(s) open in the parent stay the parent's; records for them "
                           "are refused here", len(inherited))
        self._thread = threading.Thread(target=self._run, name="otel-session-writer", daemon=True)
        self._thread.start()

    # -- opening runs ----------------------------------------------------------------------

    def open_run(
        self,
        *,
        session_id: str,
        run_id: str,
        kind: RunKind | str = RunKind.LIVE,
        eval_id: str | None = None,
        agent: str | None = None,
        service: str | None = None,
        created_at_ns: int | None = None,
        recorded_by: str | None = None,
        session_derived: bool = False,
    ) -> RunRecorder:
        """Create (or continue, after a crash) the bundle of one run and take its lock.

        ``recorded_by`` names the recorder in ``run.json`` (the collector resumes only its own runs);
        ``session_derived`` says the session id is not the app's (a trace that named none).

        Raises ``UnsafePathError`` for ids that would leave the root, ``RunLockedError`` when
        another writer holds the run, ``RunSealedError`` when its capture is already terminal,
        ``WriterClosedError`` after shutdown, and ``OSError`` when the directory cannot be made.
        """
        key = (kind, session_id, eval_id, agent, service or os.environ.get("OTEL_SERVICE_NAME") or "unknown_service",
               bool(service), recorded_by, bool(session_derived))  # 1 and True: one key, stored as ``true``
        stored_session_id, directory, head = self._run_heads.get(key) or self._run_head(key)
        if not layout.is_valid_run_id(run_id):
            raise layout.UnsafePathError(f"malformed run id {run_id!r}: expected 'run-' followed by a UUID")
        new_manifest: dict[str, Any] = {
            "schema": RUN_SCHEMA,
            "session_id": stored_session_id,
            "run_id": run_id,
            "kind": head["kind"],
            "created_at": format_timestamp(created_at_ns or time.time_ns()),
        }
        new_manifest.update(head)  # "kind" stays where it was put; "service" and the optional fields follow
        with self._open_lock:
            if self._closed:
                raise WriterClosedError("the bundle writer was shut down")
            if run_id in self._open_runs:
                raise RunLockedError(f"run {run_id} is already open in this writer")
            recorder = self._create_run(directory, run_id, new_manifest) or self._continue_run(Path(directory, run_id))
            self._open_runs[run_id] = recorder
        if self._hooks is not None:
            self._hooks.opened(recorder.directory, recorder.manifest)
        return recorder

    def continue_run(
        self,
        path: str | os.PathLike[str],
        *,
        ending: Callable[[dict[str, Any]], bool],
        reopenable: Callable[[dict[str, Any], dict[str, Any]], bool],
    ) -> RunRecorder:
        """Continue the bundle at ``path`` as its own recorder: one left ``recording`` (a crash), or
        one sealed that ``reopenable(manifest, capture)`` accepts (the recorder ended it itself, at
        its stop: its capture goes back to ``recording``, ``"reopened"`` counting how often). A last
        record ``ending`` accepts (that recorder-written ending) is cut: the run's real ending comes later.

        Raises ``RunSealedError`` for a sealed bundle ``reopenable`` refuses (nothing changed), and
        what :meth:`open_run` raises for an existing bundle.
        """
        path = Path(path)
        events_path = path / layout.EVENTS_FILE
        with self._open_lock:
            if self._closed:
                raise WriterClosedError("the bundle writer was shut down")
            require_real_dir(path)
            manifest = orjson.loads((path / layout.RUN_FILE).read_bytes())
            if manifest.get("run_id") in self._open_runs:
                raise RunLockedError(f"run {manifest.get('run_id')} is already open in this writer")
            capture_path = path / layout.CAPTURE_FILE
            capture = orjson.loads(capture_path.read_bytes())
            if capture.get("status") != CaptureStatus.RECORDING.value:
                last, _ = last_record(events_path)
                if (capture.get("status") != CaptureStatus.COMPLETE.value or not reopenable(manifest, capture)
                        or last is None or not ending(last)):
                    raise RunSealedError(f"capture of {path} is {capture.get('status')}; not reopened", path)
                events_fd = os.open(events_path, os.O_RDWR | os.O_APPEND)
                try:
                    try:
                        fcntl.flock(events_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        raise RunLockedError(f"another writer holds {path}; one writer per run") from None
                    self._claims.claim(os.fspath(path))
                    reopened = {"schema": CAPTURE_SCHEMA, "status": CaptureStatus.RECORDING.value, "event_count": 0,
                                "reopened": int(capture.get("reopened", 0)) + 1}
                    write_json_atomic(capture_path, reopened, sync=False)  # the seal makes it durable
                finally:
                    os.close(events_fd)
            recorder = self._continue_run(path, cut=ending)
            self._open_runs[recorder.run_id] = recorder
        return recorder

    def name_agent(self, recorder: RunRecorder, agent: str) -> bool:
        """Give the open run ``recorder`` records the agent ``agent`` in its ``run.json``, stored as
        ``open_run`` stores one (the collector learns a run's agent from a span that comes after
        the run was opened): the manifest reads as if opened with it, field order included. False
        when the run no longer records (``RunRecorder.replace_manifest``). Raises ``ValueError``
        for an agent that is not Unicode text, ``OSError`` when ``run.json`` cannot be replaced."""
        _check_text("agent", agent)
        manifest = {**recorder.manifest, "agent": self._stored_identifier(agent)}
        ordered = {name: manifest[name] for name in _MANIFEST_ORDER if name in manifest}
        ordered.update(manifest)  # fields of a newer writer this one does not know keep their place after
        return recorder.replace_manifest(ordered)

    def _run_head(self, key: _RunKey) -> _RunHead:
        """What the runs opened with ``key``'s arguments share: the stored session id, the session
        directory and the manifest's fields but ``run_id`` and ``created_at`` (``kind`` first), each id
        checked and mapped once, remembered (a session's runs repeat them; the checks and the
        directory's name cost more Python than the rest of an open). Raises ``ValueError`` for an id
        that is not Unicode text and for an eval run without its ``eval_id``."""
        kind, session_id, eval_id, agent, service, service_given, recorded_by, session_derived = key
        kind = RunKind(kind)
        checked = (("session_id", session_id), ("eval_id", eval_id), ("agent", agent), ("service", service_given and service))
        for name, value in checked:  # the environment's service name is stored as it is
            _check_text(name, value)
        if kind is RunKind.EVAL and not eval_id:
            raise ValueError("an eval run needs an eval_id")
        identifier = self._stored_identifier
        stored_session_id = identifier(session_id)
        eval_id = identifier(eval_id) if eval_id and kind is RunKind.EVAL else None
        agent = identifier(agent) if agent else agent
        directory = layout.session_dir_name(self._root_name, stored_session_id, eval_id)
        head: dict[str, Any] = {"kind": kind.value, "service": identifier(service)}
        optional = {"eval_id": eval_id, "agent": agent, "recorded_by": recorded_by, "session_derived": session_derived}
        head.update((name, value) for name, value in optional.items() if value)
        if len(self._run_heads) >= _KNOWN_DIRS:
            self._run_heads.clear()
        known = self._run_heads[key] = (stored_session_id, directory, head)
        return known

    def _stored_identifier(self, value: str) -> str:
        """``value`` as stored: the id mapping (by default the environment's policy with the root's
        key, so that ``stored_session_id`` finds the session by its original id), remembered: the
        runs of a session, service and agent repeat their ids."""
        stored = self._stored_ids.get(value)
        if stored is None:
            if self._identifier is None:
                self._identifier = Redactor.from_env(self.root).identifier
            stored = self._identifier(value)
            if len(self._stored_ids) >= _KNOWN_DIRS:
                self._stored_ids.clear()
            self._stored_ids[value] = stored
        return stored

    def _create_run(self, directory: str, run_id: str, manifest: dict[str, Any]) -> RunRecorder | None:
        """Make a new bundle ``directory/run_id``, or return None when it already exists.

        The bundle is assembled in a hidden directory beside ``path`` (journal locked, ``run.json``,
        ``capture.json`` ``recording``) and renamed into place, so a reader never sees it half made
        and an existing bundle is never touched. Nothing is synced here: a bundle is made durable
        as a whole when it seals, its directory entries up to the root included. Every step is one
        system call; on a busy file system each costs (paths are strings here: ``pathlib`` cost as
        much CPU as the calls on tmpfs).
        """
        self._ensure_private_dir(directory)
        path = f"{directory}/{run_id}"
        building = f"{directory}/.{run_id}.{self._pid}.{threading.get_ident()}.new"
        try:
            os.mkdir(building, DIR_MODE)  # 0700 at most: a umask only takes bits away
        except FileNotFoundError:  # the session directory was removed since (retention, a move)
            self._known_dirs.discard(directory)
            self._ensure_private_dir(directory)
            os.mkdir(building, DIR_MODE)
        try:
            make_empty_file(f"{building}/{layout.EVENTS_FILE}")  # opened by the writer thread when it appends
            self._claims.mark(building)
            write_new_file(f"{building}/{layout.RUN_FILE}", json_document(manifest))
            capture = f"{building}/{layout.CAPTURE_FILE}"
            if not self._captures.take(capture):
                write_new_file(capture, _RECORDING_DOCUMENT)
            os.rename(building, path)
        except BaseException as exc:
            shutil.rmtree(building, ignore_errors=True)
            if isinstance(exc, OSError) and exc.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR):
                return None  # the run exists: continue it, or be refused (lock, seal, symlink)
            raise
        return RunRecorder(self, path, manifest, 1, 0, created=True)

    def _ensure_private_dir(self, directory: str) -> None:
        """Make ``directory`` (0700) unless it exists; refuse a symlink or a file in its place, or on the way.

        A session directory whose parent is ``<root>/sessions`` and was made or checked already is
        made after one ``lstat`` of that parent (still refused if it became a symlink): the walk from
        the root cost a new session two more system calls and ``pathlib``. An eval's sessions
        (``<root>/evals/<eval>/sessions``) are deeper than one ``lstat`` sees: walked every time.
        """
        known = self._known_dirs
        if directory in known:
            return
        parent = directory.rpartition("/")[0]
        try:
            if parent not in known or parent.rpartition("/")[0] != self._root_name:
                raise FileNotFoundError(parent)
            require_real_dir(parent)
            make_private_dir(directory)
        except FileNotFoundError:  # not checked yet, or removed since (retention, a move)
            known.discard(parent)
            make_private_dirs(self.root, Path(directory))  # refuses <root>/sessions (or evals/…) linked elsewhere
        if len(known) >= _KNOWN_DIRS:
            known.clear()
        known.update((parent, directory))

    def _continue_run(self, path: Path, *, cut: Callable[[dict[str, Any]], bool] | None = None) -> RunRecorder:
        """Take over an existing bundle that is still ``recording`` (left by a crashed writer).

        The journal's ``flock`` is held for the claim only (``claims``): another claimer waits
        its turn, and a live writer's mark in the bundle refuses this one."""
        require_real_dir(path)
        events_path = path / layout.EVENTS_FILE
        try:
            events_fd = os.open(events_path, os.O_RDWR | os.O_APPEND)
        except FileNotFoundError:  # a journal made on first append by older writers, or none yet
            check_recording(path)
            events_fd = os.open(events_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, FILE_MODE)
        try:
            try:
                fcntl.flock(events_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RunLockedError(f"another writer holds {path} (an flock on {layout.EVENTS_FILE}); one writer per run") from None
            check_recording(path)
            self._claims.claim(os.fspath(path))
            remove_seal_leftovers(path)
            manifest = orjson.loads((path / layout.RUN_FILE).read_bytes())
            next_seq, torn = recover_journal(events_path)
            if cut is not None and cut_last_record(events_path, cut):
                next_seq -= 1
        finally:
            os.close(events_fd)  # the claim is made: the mark is the lock from here
        if torn:
            logger.warning("reopened %s: cut a torn final line of %d bytes", path, torn)
        return RunRecorder(self, path, manifest, next_seq, torn, created=False)

    def remove_abandoned_builds(self) -> int:
        """Delete bundles a dead process left half made under the root; how many (``recovery``)."""
        return remove_abandoned_builds(self.root)

    # -- exporter contract -----------------------------------------------------------------

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Write everything enqueued so far (and seal runs already closed), and tell the hooks of it.
        True when done in time."""
        deadline = time.monotonic() + timeout_millis / 1000
        with self._cond:
            self._urgent = True
            self._cond.notify_all()
            while self._dirty or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._thread.is_alive():
                    return False
                self._cond.wait(remaining)
        return self._hooks is None or self._hooks.flush(max(0.0, deadline - time.monotonic()))

    def wait_written(self, targets: Iterable[tuple[RunRecorder, int]], timeout_s: float) -> WaitResult:
        """Wait until each ``(recorder, seq)``'s records up to ``seq`` are in its journal file (not
        fsynced: that is the seal's). The writer is asked to flush now; every writer pass wakes
        all waiters at once, so concurrent callers share its writes. ``lost`` lists the recorders
        whose capture stopped before their records were written."""
        pending = list(targets)
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._urgent = True
            self._cond.notify_all()
        lost: list[RunRecorder] = []
        with self._written_cond:
            while True:
                waiting = []
                for recorder, seq in pending:
                    state = recorder.written(seq)
                    if state is Written.QUEUED:
                        waiting.append((recorder, seq))
                    elif state is Written.LOST:
                        lost.append(recorder)
                pending = waiting
                if not pending:
                    return WaitResult(WaitStatus.LOST if lost else WaitStatus.WRITTEN, lost)
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._thread.is_alive():
                    return WaitResult(WaitStatus.TIMED_OUT, lost)
                self._written_cond.wait(remaining)

    def shutdown(self, timeout_millis: int = 30_000) -> None:
        """Finish open runs as interrupted, drain once, stop the thread. Idempotent."""
        with self._open_lock:
            if self._closed:
                return
            self._closed = True
            open_runs = list(self._open_runs.values())
        for recorder in open_runs:
            if recorder.accepting:
                recorder.close(run_status="interrupted")
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout_millis / 1000)
        if self._thread.is_alive():
            logger.error("bundle writer did not drain within %d ms", timeout_millis)
        else:
            self._captures.close()  # one still sealing keeps it: removed once this process is gone
            if self._hooks is not None:
                self._hooks.close(timeout_millis / 1000)
            self._claims.close()  # runs still open keep a dead writer's mark: resumable
        atexit.unregister(self._atexit)

    @property
    def queued_bytes(self) -> int:
        """Bytes queued in every run's recorder, waiting for the writer thread (those of the pass
        under way excepted): what the collector bounds by ``max_queued_bytes``."""
        with self._cond:
            dirty = list(self._dirty)
        return sum(recorder.queued_bytes for recorder in dirty)

    @property
    def open_runs(self) -> list[RunRecorder]:
        with self._open_lock:
            return list(self._open_runs.values())

    # -- writer thread ---------------------------------------------------------------------

    def schedule(self, recorder: RunRecorder, *, urgent: bool) -> None:
        # May be called with the recorder's lock held: the condition is never held while
        # taking a recorder's lock, so the two locks are always taken in this order.
        with self._cond:
            if not self._dirty:
                self._deadline = time.monotonic() + self.limits.flush_interval_s
            self._dirty[recorder] = None
            if urgent:
                self._urgent = True
            self._cond.notify()

    def forget(self, recorder: RunRecorder) -> None:
        """A sealed run (writer thread): its journal closed, its owner mark gone, out of
        :attr:`open_runs`. Without ``_open_lock``: a seal waited for every open's system calls
        under it (a futex wait and a thread switch a bundle), and one ``pop`` is atomic; the run id
        cannot name a newer recorder (``open_run`` refuses it while this one is open)."""
        try:
            self._journals.close(recorder)
            release(recorder.directory)
        finally:
            self._open_runs.pop(recorder.run_id, None)

    def journal_fd(self, recorder: RunRecorder) -> int:
        """``recorder``'s journal, open for append (writer thread; ``claims.JournalFiles``)."""
        return self._journals.fd(recorder)

    def close_journal(self, recorder: RunRecorder) -> None:
        self._journals.close(recorder)

    def _write(self, fd: int, data: memoryview) -> int:
        """The one syscall that appends journal bytes (a seam for fault-injection tests)."""
        return os.write(fd, data)

    def _run(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._dirty and not self._stopping:
                    cond.wait()
                while self._dirty and not self._urgent and not self._stopping:
                    remaining = self._deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    cond.wait(remaining)
                if not self._dirty and self._stopping:
                    cond.notify_all()
                    with self._written_cond:
                        self._written_cond.notify_all()
                    return
                runs = list(self._dirty)
                self._dirty.clear()
                self._urgent = False
                self._busy = True
            closing = [recorder for recorder in runs if _guarded(recorder, recorder._drain)]
            with self._written_cond:  # one pass's writes acknowledge every request waiting on them
                self._written_cond.notify_all()
            if closing:
                captures = seal_together(closing, self._seal_sync, self.root, self._captures)
                if self._hooks is not None:
                    self._hooks.passed([SealedRun(recorder.directory, recorder.manifest, captures.get(recorder.directory))
                                        for recorder in closing])
            with cond:
                self._busy = False
                cond.notify_all()
            with self._written_cond:
                self._written_cond.notify_all()


def _guarded(recorder: RunRecorder, step: Callable[[], bool | None]) -> bool | None:
    """Run one writer step of a run; a bug in one run must not stop the others."""
    try:
        return step()
    except Exception:  # noqa: BLE001
        logger.exception("bundle writer failed on %s", recorder.path)
        return None

