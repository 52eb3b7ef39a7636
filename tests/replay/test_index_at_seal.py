"""A long run's replay index is built as it seals (``replay.indexer``), by both writers, off their
paths: its first reader loads it. Short runs are left alone, a full queue skips, and a build
killed or abandoned at a collector's SIGTERM leaves nothing a reader trusts. A reader that comes
while a build of the run is in progress (at seal, or another reader's) waits for it and loads what
it made, rather than building it again beside it."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import orjson
import psutil
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import otel_session
from otel_session.bundle.files import lock_held
from otel_session.bundle.hooks import SealedRun
from otel_session.bundle.write import BundleWriter
from otel_session.replay.building import LOCK_FILE
from otel_session.replay.index import IndexStatus, index_path, open_run_index
from otel_session.replay.indexer import DEFAULT_MIN_RECORDS, ENV_INDEX_AT_SEAL, SealIndexer, seal_indexer
from otel_session.testing import running_collectors, wait_for
from otel_session.viewer import create_app
from otel_session.viewer.run_reader import RunReader

START_NS = 1_800_000_000_000_000_000


def _record(writer: BundleWriter, records: int, session_id: str = "long") -> Path:
    """A sealed run of ``records`` records (with ``run_started`` and the close's ``run_finished``)
    written straight through ``writer``: replies of 100 records (started, 98 deltas, finished)."""
    run = writer.open_run(session_id=session_id, run_id=f"run-{uuid.uuid4()}", agent="booking")
    run.append("run_started", {"kind": "live", "agent": "booking"}, at_ns=START_NS)
    for number in range(records - 2):
        reply = {"turn_index": number // 100, "message_id": f"a{number // 100}"}
        step = number % 100
        if step == 0 or number == records - 3:
            event_type, payload = ("message_started", {"role": "assistant"}) if step == 0 else \
                ("message_finished", {"settled": True, "content": []})
        elif step == 99:
            event_type, payload = "message_finished", {"settled": True, "content": []}
        else:
            event_type, payload = "assistant_delta", {"index": 0, "kind": "text", "delta": f"w{number} "}
        run.append(event_type, payload, at_ns=START_NS + 1 + number, **reply)
        if number % 1024 == 0:
            writer.force_flush()  # stay below the writer's queue bound
    run.close(run_status="ok")
    assert run.wait_sealed(120)
    return Path(run.path)


def _recorded(root: Path, records: int) -> Path:
    """A sealed run of ``records`` records under ``root``, by a writer with no hooks (no index at seal)."""
    writer = BundleWriter(root)
    try:
        return _record(writer, records)
    finally:
        writer.shutdown()


def _talk(turns: int, deltas: int = 150) -> None:
    """A long run through the instrumentation API: ``turns`` turns of one streamed reply each."""
    with otel_session.session("long-call"), otel_session.run(agent="booking"):
        for turn in range(turns):
            with otel_session.turn(turn, state="talk"), otel_session.message("assistant") as message:
                for number in range(deltas):
                    message.delta(f"w{number} ")


def _sealed_run(root: Path) -> Path | None:
    for capture in root.glob("sessions/*/run-*/capture.json"):
        if b'"recording"' not in capture.read_bytes():
            return capture.parent
    return None


def _first_open_loads_it(root: Path, run: Path, caplog) -> None:
    """The index is on disk before any reader asks; a fresh viewer's first open loads it, never builds it."""
    seek = wait_for(lambda: (index_path(root, run) / "seek.json").exists() and index_path(root, run) / "seek.json", 120)
    before = os.stat(seek)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="otel_session"):
        client = create_app({"BUNDLE_DIR": str(root), "TESTING": True}).test_client()
        answer = client.get(f"/api/sessions/{run.parent.name}/runs/{run.name}/turns")
    assert answer.status_code == 200 and answer.get_json()["indexed"] is True
    assert not [record.getMessage() for record in caplog.records if "replay index of" in record.getMessage()]
    after = os.stat(seek)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # not built again
    assert open_run_index(root, run).status is IndexStatus.LOADED


def test_a_long_run_has_its_index_at_seal_from_the_collector_and_in_process(tmp_path, caplog):
    in_process, collected = tmp_path / "in-process", tmp_path / "collector"
    with running_collectors(grpc_address="127.0.0.1:0", http_address="127.0.0.1:0", seal_after_s=0.2) as make:
        collector = make(collected)
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"127.0.0.1:{collector.grpc_port}",
                                                                        insecure=True)))
        recorder = otel_session.configure(bundle_dir=in_process, tracer_provider=provider)
        try:
            _talk(turns=45)
            provider.force_flush()
            for root in (in_process, collected):
                run = wait_for(lambda: _sealed_run(root), 60)
                assert orjson.loads((run / "capture.json").read_bytes())["event_count"] > DEFAULT_MIN_RECORDS
                _first_open_loads_it(root, run, caplog)
        finally:
            recorder.shutdown()
            provider.shutdown()


def test_a_short_run_is_left_to_its_first_reader(tmp_path):
    indexer = SealIndexer(tmp_path)
    writer = BundleWriter(tmp_path, hooks=indexer)
    try:
        run = _record(writer, DEFAULT_MIN_RECORDS - 1)
        assert writer.force_flush()
        assert indexer.wait_idle(60) and indexer.built == 0
        assert orjson.loads((run / "capture.json").read_bytes())["event_count"] == DEFAULT_MIN_RECORDS - 1
        assert not index_path(tmp_path, run).exists()
    finally:
        writer.shutdown()
    assert open_run_index(tmp_path, run).status is IndexStatus.BUILT


def test_a_full_queue_skips_the_run_without_holding_up_the_writer(tmp_path, caplog):
    started, release = threading.Event(), threading.Event()

    def build(root: Path, run: Path) -> bool:  # the real build, once the test lets it go on
        started.set()
        release.wait(120)
        return open_run_index(root, run) is not None

    indexer = SealIndexer(tmp_path, min_records=10, queue_bound=1, build=build)
    writer = BundleWriter(tmp_path, hooks=indexer)
    try:
        building = _record(writer, 20)
        assert writer.force_flush() and started.wait(60)  # the builder holds the first run
        with caplog.at_level(logging.WARNING, logger="otel_session"):
            queued, skipped, also_skipped = (_record(writer, 20) for _ in range(3))
            assert writer.force_flush()  # told while the builder is held: nothing waited for it
        assert indexer.skipped == 2
        assert len([record for record in caplog.records if "index at seal" in record.getMessage()]) == 1
        release.set()
        assert indexer.wait_idle(120) and indexer.built == 2
    finally:
        release.set()
        writer.shutdown()
    assert open_run_index(tmp_path, building).status is IndexStatus.LOADED
    assert open_run_index(tmp_path, queued).status is IndexStatus.LOADED
    assert open_run_index(tmp_path, skipped).status is IndexStatus.BUILT  # by its first reader, as before


def test_the_setting_turns_it_off_and_a_store_that_removes_local_copies_skips_it(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_INDEX_AT_SEAL, raising=False)
    assert seal_indexer(tmp_path).min_records == DEFAULT_MIN_RECORDS
    assert seal_indexer(tmp_path, store_removes_local=True) is None
    monkeypatch.setenv(ENV_INDEX_AT_SEAL, "off")
    assert seal_indexer(tmp_path) is None
    monkeypatch.setenv(ENV_INDEX_AT_SEAL, "500")
    assert seal_indexer(tmp_path).min_records == 500


def _build_child(parent: psutil.Process, marker: str = "build_here") -> psutil.Process | None:
    """The child of ``parent`` whose command line holds ``marker`` (the build at seal's, by default)."""
    for child in parent.children(recursive=True):
        try:
            if marker in " ".join(child.cmdline()):
                return child
        except psutil.Error:
            continue
    return None


def _no_temporaries(directory: Path) -> bool:
    return not directory.exists() or not [name for name in os.listdir(directory) if name.endswith(".tmp")]


def test_an_abandoned_build_leaves_nothing_a_reader_trusts(tmp_path):
    indexer = SealIndexer(tmp_path)
    run = _recorded(tmp_path, 30_000)  # the indexer is told by hand, so that the writer's shutdown does not close it
    indexer.runs_passed([], [_sealed(run)])
    child = wait_for(lambda: _build_child(psutil.Process()), 60)
    child.suspend()  # certainly mid-build when the stop comes
    indexer.close()
    assert not psutil.pid_exists(child.pid)  # killed and waited for by close()
    assert indexer.built == 0 and _no_temporaries(index_path(tmp_path, run))
    assert open_run_index(tmp_path, run).status is IndexStatus.BUILT


def _sealed(run: Path) -> SealedRun:
    """The run as its writer tells its hooks at seal."""
    return SealedRun(str(run), orjson.loads((run / "run.json").read_bytes()), orjson.loads((run / "capture.json").read_bytes()))


def test_a_collector_stopped_by_sigterm_mid_build_ends_the_build_and_its_reader_rebuilds(tmp_path):
    root = tmp_path / "collector"
    process = subprocess.Popen(
        [sys.executable, "-m", "otel_session.cli", "collect", "--dir", str(root), "--grpc", "127.0.0.1:0",
         "--http", "off", "--seal-after", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={key: value for key, value in os.environ.items() if key != ENV_INDEX_AT_SEAL},
    )
    try:
        banner = process.stdout.readline()
        assert "otel-session collector:" in banner, process.stderr.read()
        port = int(banner.split("grpc=")[1].split()[0].rsplit(":", 1)[1])
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"127.0.0.1:{port}", insecure=True)))
        recorder = otel_session.configure(bundle_dir=tmp_path / "in-process", tracer_provider=provider)
        try:
            _talk(turns=120)
            provider.force_flush()
        finally:
            recorder.shutdown()
            provider.shutdown()
        child = wait_for(lambda: _build_child(psutil.Process(process.pid)), 120)
        child.suspend()  # the build is in progress when SIGTERM comes, whatever the machine's load
        run = _sealed_run(root)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert not psutil.pid_exists(child.pid)
    assert not (index_path(root, run) / "seek.json").exists() and _no_temporaries(index_path(root, run))
    assert open_run_index(root, run).status is IndexStatus.BUILT


def _lock_held(root: Path, run: Path) -> bool:
    """Whether someone holds the run's build lock."""
    return lock_held(index_path(root, run) / LOCK_FILE)


def _stopped_holding_the_lock(child: psutil.Process, root: Path, run: Path) -> None:
    """Let ``child`` run in slices of a few milliseconds until it holds the run's build lock, and
    leave it stopped there: mid-build whatever the machine's load (a build takes far longer)."""
    child.suspend()

    def step() -> bool:
        if _lock_held(root, run):
            return True
        assert not (index_path(root, run) / "seek.json").exists(), "the build ended without ever holding the lock"
        child.resume()
        time.sleep(0.002)
        child.suspend()
        return False

    wait_for(step, 120, interval=0)


def _waiting(caplog) -> bool:
    return any("a build is in progress" in record.getMessage() for record in caplog.records)


def _in_thread(action) -> tuple[threading.Thread, list]:
    answer: list = []
    thread = threading.Thread(target=lambda: answer.append(action()), daemon=True)
    thread.start()
    return thread, answer


def test_a_reader_during_the_build_at_seal_waits_for_it_and_loads_what_it_made(tmp_path, caplog):
    run = _recorded(tmp_path, 30_000)
    indexer = SealIndexer(tmp_path)
    try:
        indexer.runs_passed([], [_sealed(run)])
        child = wait_for(lambda: _build_child(psutil.Process()), 60)
        _stopped_holding_the_lock(child, tmp_path, run)
        with caplog.at_level(logging.INFO, logger="otel_session"):
            client = create_app({"BUNDLE_DIR": str(tmp_path), "TESTING": True}).test_client()
            reader, answer = _in_thread(lambda: client.get(f"/api/sessions/{run.parent.name}/runs/{run.name}/turns"))
            wait_for(lambda: _waiting(caplog), 60)  # the viewer's first open waits: it builds nothing beside it
            child.resume()
            reader.join(120)
        assert indexer.wait_idle(120) and indexer.built == 1
    finally:
        indexer.close()
    assert answer[0].status_code == 200 and answer[0].get_json()["indexed"] is True
    assert not [record.getMessage() for record in caplog.records if record.getMessage().endswith((" built", " rebuilt"))]
    assert open_run_index(tmp_path, run).status is IndexStatus.LOADED


def test_two_first_opens_at_once_build_the_index_once(tmp_path, caplog):
    """Two viewers over one root (two workers) open a run with no index at the same moment."""
    run = _recorded(tmp_path, 30_000)
    first, second = RunReader(tmp_path, child_build_bytes=1), RunReader(tmp_path, child_build_bytes=1)
    with caplog.at_level(logging.INFO, logger="otel_session"):
        building, built = _in_thread(lambda: first.turns(run))
        child = wait_for(lambda: _build_child(psutil.Process(), "spawn_main"), 60)
        child.suspend()  # the first holds the run's build lock from before it started this child: mid-build
        try:
            waiting, loaded = _in_thread(lambda: second.turns(run))
            wait_for(lambda: _waiting(caplog), 60)
        finally:
            child.resume()
        building.join(120)
        waiting.join(120)
    assert built[0]["indexed"] and loaded[0]["indexed"] and orjson.dumps(loaded[0]) == orjson.dumps(built[0])
    statuses = [record.getMessage().rsplit(" ", 1)[1] for record in caplog.records
                if record.getMessage().startswith("replay index of") and "waiting" not in record.getMessage()]
    assert statuses == ["built"]  # the second loaded what the first made
    assert open_run_index(tmp_path, run).status is IndexStatus.LOADED


def test_a_build_that_never_ends_is_waited_for_a_bounded_time(tmp_path):
    """A build stopped mid-way (its process alive, its lock held): the reader builds beside it once the wait is over."""
    import fcntl

    run = _recorded(tmp_path, 5_000)
    index_path(tmp_path, run).mkdir(parents=True)
    fd = os.open(index_path(tmp_path, run) / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a build that holds it and never ends
        assert open_run_index(tmp_path, run, wait_s=0.1).status is IndexStatus.BUILT
    finally:
        os.close(fd)
    assert open_run_index(tmp_path, run).status is IndexStatus.LOADED


def _holding_its_build_lock(root: Path, run: Path) -> subprocess.Popen:
    """Another process holding ``run``'s build lock (a build at seal, say) until its stdin closes."""
    index_path(root, run).mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600); "
         "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()", str(index_path(root, run) / LOCK_FILE)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n" and _lock_held(root, run)
    return holder


def test_waiting_for_one_runs_build_never_holds_up_opening_another(tmp_path, caplog):
    """A viewer waits for another process's build of run A (up to BUILD_WAIT_S); meanwhile its
    readers of run B, indexed already, load B's index at once."""
    waited_for, indexed = _recorded(tmp_path, 2_000), _recorded(tmp_path, 2_000)
    assert open_run_index(tmp_path, indexed).status is IndexStatus.BUILT
    holder = _holding_its_build_lock(tmp_path, waited_for)
    client = create_app({"BUNDLE_DIR": str(tmp_path), "TESTING": True}).test_client()
    try:
        with caplog.at_level(logging.INFO, logger="otel_session"):
            waiting, waited = _in_thread(lambda: client.get(f"/api/sessions/long/runs/{waited_for.name}/turns"))
            wait_for(lambda: _waiting(caplog), 60)
            opening, opened = _in_thread(lambda: client.get(f"/api/sessions/long/runs/{indexed.name}/turns"))
            opening.join(60)  # a guard: the open takes milliseconds; before, it waited for run A's build to end
            assert not opening.is_alive() and waiting.is_alive()  # B answered while A is still waited for
    finally:
        holder.communicate("")
    waiting.join(120)
    assert opened[0].status_code == 200 and opened[0].get_json()["indexed"] is True
    assert waited[0].status_code == 200 and waited[0].get_json()["indexed"] is True


def test_a_viewer_building_one_run_still_loads_another_at_once(tmp_path, caplog):
    """The viewer builds one index at a time (a build reads a whole journal), and a run once, but
    loading one already built never waits behind that build."""
    building, indexed = _recorded(tmp_path, 2_000), _recorded(tmp_path, 2_000)
    assert open_run_index(tmp_path, indexed).status is IndexStatus.BUILT
    reader = RunReader(tmp_path, child_build_bytes=1)  # every build in a child process, which the test can stop
    with caplog.at_level(logging.INFO, logger="otel_session"):
        builder, built = _in_thread(lambda: reader.turns(building))
        child = wait_for(lambda: _build_child(psutil.Process(), "spawn_main"), 60)
        child.suspend()  # mid-build of the first run
        try:
            again, built_again = _in_thread(lambda: reader.turns(building))
            opening, opened = _in_thread(lambda: reader.turns(indexed))
            opening.join(60)  # a guard: loading takes milliseconds
            assert not opening.is_alive() and builder.is_alive()
        finally:
            child.resume()
        builder.join(120)
        again.join(120)
    assert opened[0]["indexed"] and built[0]["indexed"] and orjson.dumps(built_again[0]) == orjson.dumps(built[0])
    assert [record.getMessage() for record in caplog.records if record.getMessage().endswith(" built")] == \
        [f"replay index of {building} built"]  # the second reader of the run waited for the first's build
    assert open_run_index(tmp_path, building).status is IndexStatus.LOADED
