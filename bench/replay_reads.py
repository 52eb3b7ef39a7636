"""The replay page of a long run reads only what it shows (issue 30): a 1M-event run, sealed.

The booking run of ``bench.replay`` is recorded through the real BundleWriter (1,000,000 events,
and 100,000 for the ratios), kept under the temporary directory so reruns skip it, then each step
runs in its own fresh process (its CPU time and peak memory are its own):

- ``build``: the run's first reader builds its index (seek offsets, checkpoints, facts, integrity,
  turn summaries) from one read of the journal. Once per sealed run.
- ``catalog_first``: a fresh viewer over the root with no catalog: its keeper's first pass adds the
  run's row (``catalog.rows.sealed_row``), in the viewer's process: CPU and peak memory.
- ``first``: then (the catalog holding the run) a fresh viewer opens the run with no index on disk: a
  large journal is indexed by a child process (``replay.index.build_in_child``), so the viewer's
  own memory stays small.
- ``during_seal``: a fresh viewer opens the run while its build at seal is in progress (its child
  past 1 s of CPU): it waits for that build and loads its index (``replay.building``), so the
  children's CPU is one build's; before, the viewer built it again beside it.
- ``seal``: the index built at seal instead (``replay.indexer.SealIndexer``, told of the sealed run
  as the writer's hooks are): the child process's CPU, peak memory and wall time.
- ``first_sealed``: then a fresh viewer's first open of the run (what the replay page fetches
  before it is usable): it loads the index built at seal (``LOADED``), builds nothing.
- ``viewer``: a fresh viewer over the root (index on disk) answers what the replay page fetches
  before it is usable (the page, its scripts, ``…/turns``, the view at the cursor, one window of
  ``…/events``, ``…/integrity``): bytes and server CPU. Then a seek to the last event (view +
  window, median of 5), the facts asked again, the whole state at the end, and the process's memory.
- ``old``: today's code path before issue 30 (every ``/events`` page of 10,000 read from the whole
  parsed journal, as the page fetched them all before painting; facts rebuilt per request), on the
  100k run by default and on the 1M run with ``--old-at-1m`` (about 45 s CPU and 2 GB).

Run: ``python -m bench.replay_reads [--old-at-1m]`` → ``bench/results-replay_reads.json``.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from bench import Figure, write_results
from bench.replay import record_run

SIZES = (100_000, 1_000_000)
_VERSION = 1  # bump when the generated run changes
_PAGE = 10_000
_MIB = 1 << 20


def cached_run(events: int) -> tuple[Path, Path]:
    """The bench root and run of ``events`` events, recorded once and reused while intact."""
    root = Path(tempfile.gettempdir()) / f"otel-session-bench-replay-{events}-v{_VERSION}"
    marker = root / "run-path.txt"
    if marker.exists():
        path = Path(marker.read_text())
        try:
            capture = json.loads((path / "capture.json").read_text())
        except (OSError, ValueError):
            capture = {}
        if capture.get("status") == "complete" and capture.get("event_count") == events:
            return root, path
    shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    path = record_run(root, events)
    marker.write_text(str(path))
    print(f"recorded a {events:,}-event run in {time.perf_counter() - started:.0f} s under {root}")
    return root, path


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / _MIB


# -- steps, each in a fresh process -------------------------------------------------------------


def step_build(root: Path, path: Path) -> dict:
    from otel_session.replay.index import index_path, open_run_index

    shutil.rmtree(index_path(root, path), ignore_errors=True)
    cpu, wall = time.process_time(), time.perf_counter()
    index = open_run_index(root, path)
    return {"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall, "peak_mib": _peak_mib(),
            "status": index.status.value, "index_bytes": sum(f.stat().st_size for f in index_path(root, path).iterdir())}


def step_first(root: Path, path: Path) -> dict:
    from otel_session.replay.index import index_path
    from otel_session.viewer import create_app

    shutil.rmtree(index_path(root, path), ignore_errors=True)
    app = create_app({"BUNDLE_DIR": str(root), "TESTING": True})
    _first_pass_done(app)  # the catalog holds the run (``catalog_first``): what follows is the index's path
    client = app.test_client()
    cpu, wall = time.process_time(), time.perf_counter()
    response = client.get(f"/api/sessions/bench-replay/runs/{path.name}/turns")
    assert response.status_code == 200
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"viewer_cpu_s": time.process_time() - cpu, "child_cpu_s": children.ru_utime + children.ru_stime,
            "wall_s": time.perf_counter() - wall, "viewer_peak_mib": _peak_mib(), "child_peak_mib": children.ru_maxrss / 1024}


def step_catalog_first(root: Path, path: Path) -> dict:
    from otel_session.catalog import CATALOG_FILE
    from otel_session.viewer import create_app

    for leftover in root.glob(f"{CATALOG_FILE}*"):
        leftover.unlink()
    cpu, wall = time.process_time(), time.perf_counter()
    app = create_app({"BUNDLE_DIR": str(root), "TESTING": True})
    assert app.extensions["otel_session_listing"].keeper.first_pass.wait(600)
    return {"viewer_cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall, "viewer_peak_mib": _peak_mib()}


def _first_pass_done(app) -> None:
    keeper = app.extensions["otel_session_listing"].keeper
    assert keeper is None or keeper.first_pass.wait(600)


def step_during_seal(root: Path, path: Path) -> dict:
    import psutil

    from otel_session.bundle.hooks import SealedRun
    from otel_session.replay.index import index_path, open_run_index
    from otel_session.replay.indexer import SealIndexer
    from otel_session.viewer import create_app

    shutil.rmtree(index_path(root, path), ignore_errors=True)
    app = create_app({"BUNDLE_DIR": str(root), "TESTING": True})
    _first_pass_done(app)
    client = app.test_client()
    sealed = SealedRun(str(path), orjson.loads((path / "run.json").read_bytes()), orjson.loads((path / "capture.json").read_bytes()))
    indexer = SealIndexer(root)
    indexer.runs_passed([], [sealed])

    def building() -> bool:
        for child in psutil.Process().children():
            try:
                if "build_here" in " ".join(child.cmdline()) and sum(child.cpu_times()[:2]) > 1.0:
                    return True
            except psutil.Error:
                continue
        return False

    while not building():
        time.sleep(0.05)
    cpu, wall = time.process_time(), time.perf_counter()
    response = client.get(f"/api/sessions/bench-replay/runs/{path.name}/turns")
    assert response.status_code == 200
    viewer_cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert indexer.wait_idle(3600)
    indexer.close()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"viewer_cpu_s": viewer_cpu, "wall_s": wall, "viewer_peak_mib": _peak_mib(), "built_at_seal": indexer.built,
            "children_cpu_s": children.ru_utime + children.ru_stime, "child_peak_mib": children.ru_maxrss / 1024,
            "status": open_run_index(root, path).status.value}


def step_seal(root: Path, path: Path) -> dict:
    from otel_session.bundle.hooks import SealedRun
    from otel_session.replay.index import index_path
    from otel_session.replay.indexer import SealIndexer

    shutil.rmtree(index_path(root, path), ignore_errors=True)
    sealed = SealedRun(str(path), orjson.loads((path / "run.json").read_bytes()), orjson.loads((path / "capture.json").read_bytes()))
    indexer = SealIndexer(root)
    cpu, wall = time.process_time(), time.perf_counter()
    indexer.runs_passed([], [sealed])  # as the writer's hooks thread tells it at seal
    told_cpu = time.process_time() - cpu
    assert indexer.wait_idle(3600) and indexer.built == 1
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"told_cpu_s": told_cpu, "writer_side_cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall,
            "child_cpu_s": children.ru_utime + children.ru_stime, "child_peak_mib": children.ru_maxrss / 1024}


def step_first_sealed(root: Path, path: Path) -> dict:
    from otel_session.replay.index import index_path, open_run_index
    from otel_session.viewer import create_app

    seek = index_path(root, path) / "seek.json"
    before = seek.stat().st_mtime_ns
    client = create_app({"BUNDLE_DIR": str(root), "TESTING": True}).test_client()

    def get(url: str) -> tuple[bytes, float, float]:
        cpu, wall = time.process_time(), time.perf_counter()
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        return response.data, time.process_time() - cpu, time.perf_counter() - wall

    wall = time.perf_counter()
    usable, _ = page_usable(get, "bench-replay", path.name)
    wall = time.perf_counter() - wall
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"usable": usable, "wall_s": wall, "child_cpu_s": children.ru_utime + children.ru_stime, "peak_mib": _peak_mib(),
            "rebuilt": seek.stat().st_mtime_ns != before, "status": open_run_index(root, path).status.value}


def step_viewer(root: Path, path: Path) -> dict:
    from otel_session.viewer import create_app

    run_id, session_id = path.name, "bench-replay"
    client = create_app({"BUNDLE_DIR": str(root), "TESTING": True}).test_client()
    api = f"/api/sessions/{session_id}/runs/{run_id}"

    def get(url: str) -> tuple[bytes, float, float]:
        cpu, wall = time.process_time(), time.perf_counter()
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code, response.data[:200])
        return response.data, time.process_time() - cpu, time.perf_counter() - wall

    usable, run = page_usable(get, session_id, run_id)
    last = run["last_seq"]
    seeks = [_window(get, api, seq, last) for seq in (last // 2, last, 1_000, last, last // 3, last, 7, last, last // 4, last)]
    to_last = [seek for seek, seq in zip(seeks, (0, 1) * 5) if seq]
    facts_first, facts_first_cpu, facts_first_wall = get(f"/api/sessions/{session_id}/facts?run_id={run_id}")
    facts_again = [get(f"/api/sessions/{session_id}/facts?run_id={run_id}") for _ in range(5)]
    state, state_cpu, state_wall = get(f"{api}/state")
    return {
        "last_seq": last,
        "turns": len(run["turns"]["rows"]),
        "usable": usable,
        "seek_to_last": {"wall_ms": statistics.median(s["wall_s"] for s in to_last) * 1000,
                         "cpu_ms": statistics.median(s["cpu_s"] for s in to_last) * 1000,
                         "bytes": statistics.median(s["bytes"] for s in to_last)},
        "facts_first": {"cpu_ms": facts_first_cpu * 1000, "wall_ms": facts_first_wall * 1000, "bytes": len(facts_first)},
        "facts_again": {"cpu_ms": statistics.median(f[1] for f in facts_again) * 1000,
                        "wall_ms": statistics.median(f[2] for f in facts_again) * 1000},
        "whole_state_at_end": {"cpu_s": state_cpu, "wall_s": state_wall, "bytes": len(state)},
        "rss_mib": _rss_mib(),
        "peak_mib": _peak_mib(),
    }


def page_usable(get, session_id: str, run_id: str) -> tuple[dict, dict]:
    """What the replay page fetches before it is usable (the page, its scripts, ``…/turns``, the view
    at the cursor and one window of ``…/events``, ``…/integrity``), through ``get(url) -> (body,
    cpu_s, wall_s)``: its bytes and server CPU, and the ``…/turns`` answer."""
    api = f"/api/sessions/{session_id}/runs/{run_id}"
    static = Path(__file__).resolve().parents[1] / "viewer" / "static"
    fetched, cpu = 0, 0.0
    html, spent, _ = get(f"/sessions/{session_id}/runs/{run_id}")
    fetched += len(html) + sum(item.stat().st_size for item in static.iterdir())  # every script and style, at most
    cpu += spent
    turns, spent, _ = get(f"{api}/turns")
    run = orjson.loads(turns)
    last = run["last_seq"]
    fetched, cpu = fetched + len(turns), cpu + spent
    window = _window(get, api, last, last)
    fetched, cpu = fetched + window["bytes"], cpu + window["cpu_s"]
    integrity, spent, _ = get(f"{api}/integrity")
    fetched, cpu = fetched + len(integrity), cpu + spent
    return {"bytes": fetched, "cpu_s": cpu, "turns_bytes": len(turns), "window_bytes": window["bytes"]}, run


def _window(get, api: str, seq: int, last: int) -> dict:
    """What replay.js fetches for the window at ``seq``: the view, then the records up to 2,048 past it."""
    through = min(seq + 2048, last)
    view, cpu, wall = get(f"{api}/state?seq={seq}&recent=50&through={through}")
    size = len(view)
    after = orjson.loads(view)["base_seq"]
    while after < through:
        page, spent, took = get(f"{api}/events?after_seq={after}&limit={min(_PAGE, through - after)}")
        size, cpu, wall = size + len(page), cpu + spent, wall + took
        answer = orjson.loads(page)
        if answer["next_after_seq"] is None or not answer["events"]:
            break
        after = answer["events"][-1]["seq"]
    return {"bytes": size, "cpu_s": cpu, "wall_s": wall}


def step_old(root: Path, path: Path) -> dict:
    """Today's code path before issue 30, as viewer/api.py ran it: the whole journal parsed once
    (cached), each /events page filtered from all of it, the page fetching every page before it
    painted; facts rebuilt on every request; the state from an in-memory replayer."""
    from otel_session.bundle.read import read_bundle
    from otel_session.replay.facts import build_session_facts, run_events
    from otel_session.replay.reduce import Replayer

    cpu = time.process_time()
    bundle = read_bundle(path)
    fetched, after = 0, 0
    while True:
        selected = [event for event in run_events(bundle) if event["seq"] > after]
        page = selected[:_PAGE]
        more = len(selected) > _PAGE
        fetched += len(orjson.dumps({"events": page, "next_after_seq": page[-1]["seq"] if more else None,
                                     "capture_status": (bundle.capture or {}).get("status"), "integrity": bundle.status.value}))
        if not more:
            break
        after = page[-1]["seq"]
    usable_cpu = time.process_time() - cpu
    cpu = time.process_time()
    build_session_facts(bundle)
    facts_cpu = time.process_time() - cpu
    cpu = time.process_time()
    Replayer(run_events(bundle)).state_at(None)
    state_cpu = time.process_time() - cpu
    return {"usable": {"bytes": fetched, "cpu_s": usable_cpu}, "facts_again_cpu_s": facts_cpu,
            "state_at_end_cpu_s": state_cpu, "peak_mib": _peak_mib()}


_STEPS = {"build": step_build, "catalog_first": step_catalog_first, "first": step_first, "during_seal": step_during_seal,
          "seal": step_seal, "first_sealed": step_first_sealed,
          "viewer": step_viewer, "old": step_old}


def _in_process(step: str, root: Path, path: Path) -> dict:
    completed = subprocess.run([sys.executable, "-m", "bench.replay_reads", "--step", step, str(root), str(path)],
                               cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, check=True)
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main(*, old_at_1m: bool = False) -> dict:
    measured: dict[int, dict] = {}
    for events in SIZES:
        root, path = cached_run(events)
        journal = (path / "events.ndjson").stat().st_size
        measured[events] = {"journal_bytes": journal, "build": _in_process("build", root, path),
                            "catalog_first": _in_process("catalog_first", root, path),
                            "first": _in_process("first", root, path), "during_seal": _in_process("during_seal", root, path),
                            "seal": _in_process("seal", root, path),
                            "first_sealed": _in_process("first_sealed", root, path), "viewer": _in_process("viewer", root, path)}
        if events == SIZES[0] or old_at_1m:
            measured[events]["old"] = _in_process("old", root, path)
    small, large = measured[SIZES[0]], measured[SIZES[1]]
    big = large["viewer"]
    old_large = large.get("old")
    figures = [
        Figure("replay_reads.page_bytes_1m", big["usable"]["bytes"] / _MIB, "MiB",
               baseline=old_large["usable"]["bytes"] / _MIB if old_large else None, target="<= 5 MiB",
               ok=big["usable"]["bytes"] <= 5 * _MIB, note="fetched before the replay page is usable; baseline: every /events page"),
        Figure("replay_reads.page_cpu_1m_s", big["usable"]["cpu_s"], "s",
               baseline=old_large["usable"]["cpu_s"] if old_large else None, target="<= 1 s",
               ok=big["usable"]["cpu_s"] <= 1.0, note="server CPU of a fresh viewer (index on disk)"),
        Figure("replay_reads.seek_to_last_1m_cpu_ms", big["seek_to_last"]["cpu_ms"], "ms", target="<= 100 ms",
               ok=big["seek_to_last"]["cpu_ms"] <= 100,
               note=f"view + window, median of 5, server CPU; wall {big['seek_to_last']['wall_ms']:.1f} ms on this shared machine"),
        Figure("replay_reads.facts_again_1m_cpu_ms", big["facts_again"]["cpu_ms"], "ms",
               baseline=old_large["facts_again_cpu_s"] * 1000 if old_large else None, target="<= 50 ms",
               ok=big["facts_again"]["cpu_ms"] <= 50,
               note=f"server CPU, median of 5; wall {big['facts_again']['wall_ms']:.1f} ms; baseline: facts rebuilt per request"),
        Figure("replay_reads.viewer_rss_1m_mib", big["rss_mib"], "MiB", target="bounded (<= 300 MiB)",
               ok=big["peak_mib"] <= 300, note=f"after the page, 10 seeks, facts and the whole state at the end; peak {big['peak_mib']:.0f} MiB"),
        Figure("replay_reads.index_build_1m_cpu_s", large["build"]["cpu_s"], "s",
               note=f"once per sealed run, by its first reader; peak {large['build']['peak_mib']:.0f} MiB, "
                    f"{large['build']['index_bytes'] / _MIB:.0f} MiB of index for a {large['journal_bytes'] / _MIB:.0f} MiB journal"),
        Figure("replay_reads.first_open_1m_viewer_peak_mib", large["first"]["viewer_peak_mib"], "MiB",
               baseline=large["build"]["peak_mib"], target="bounded (<= 300 MiB)", ok=large["first"]["viewer_peak_mib"] <= 300,
               note=f"a fresh viewer opening the run with no index: the build ran in a child process "
                    f"({large['first']['child_cpu_s']:.1f} s CPU, peak {large['first']['child_peak_mib']:.0f} MiB, "
                    f"{large['first']['wall_s']:.0f} s wall); baseline: the same build in the caller"),
        Figure("replay_reads.catalog_first_pass_1m_viewer_peak_mib", large["catalog_first"]["viewer_peak_mib"], "MiB",
               target="bounded (<= 300 MiB)", ok=large["catalog_first"]["viewer_peak_mib"] <= 300,
               note=f"a fresh viewer over the root with no catalog, until its keeper's first pass added the run's row "
                    f"({large['catalog_first']['viewer_cpu_s']:.2f} s CPU, app start included): catalog.rows.sealed_row"),
        Figure("replay_reads.open_during_seal_1m_children_cpu_s", large["during_seal"]["children_cpu_s"], "s",
               baseline=large["first"]["child_cpu_s"], ok=large["during_seal"]["status"] == "loaded",
               note=f"a fresh viewer opening the run while it is built at seal: it waits and loads that index "
                    f"(viewer {large['during_seal']['viewer_cpu_s']:.2f} s CPU, peak {large['during_seal']['viewer_peak_mib']:.0f} MiB, "
                    f"{large['during_seal']['wall_s']:.0f} s wall); the children's CPU is one build's; baseline: one build"),
        Figure("replay_reads.first_open_after_seal_1m_cpu_s", large["first_sealed"]["usable"]["cpu_s"], "s",
               baseline=large["first"]["viewer_cpu_s"] + large["first"]["child_cpu_s"], target="<= 1 s",
               ok=large["first_sealed"]["usable"]["cpu_s"] <= 1.0 and large["first_sealed"]["status"] == "loaded"
               and not large["first_sealed"]["rebuilt"],
               note=f"a fresh viewer's first open with the index built at seal: server CPU before usable, "
                    f"{large['first_sealed']['usable']['bytes'] / _MIB:.2f} MiB fetched, {large['first_sealed']['wall_s']:.2f} s wall, "
                    f"index {large['first_sealed']['status']}; baseline: the first open building it (viewer + child)"),
        Figure("replay_reads.index_at_seal_1m_child_cpu_s", large["seal"]["child_cpu_s"], "s",
               note=f"the build at seal, in its niced child: peak {large['seal']['child_peak_mib']:.0f} MiB, "
                    f"{large['seal']['wall_s']:.0f} s wall; the writer's side {large['seal']['writer_side_cpu_s'] * 1000:.1f} ms CPU "
                    f"(telling it: {large['seal']['told_cpu_s'] * 1e6:.0f} µs)"),
        Figure("replay_reads.page_bytes_100k", small["viewer"]["usable"]["bytes"] / _MIB, "MiB",
               baseline=small["old"]["usable"]["bytes"] / _MIB, note="the same run size, both paths in this run"),
        Figure("replay_reads.page_cpu_100k_s", small["viewer"]["usable"]["cpu_s"], "s",
               baseline=small["old"]["usable"]["cpu_s"], note="server CPU before usable; baseline: today's path"),
        Figure("replay_reads.page_cpu_1m_vs_100k", big["usable"]["cpu_s"], "s", baseline=small["viewer"]["usable"]["cpu_s"],
               note="10x the events: the page costs about the same"),
    ]
    return write_results("replay_reads", figures, {"runs": {str(events): value for events, value in measured.items()}})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.replay_reads", description=__doc__.splitlines()[0])
    parser.add_argument("--old-at-1m", action="store_true", help="also measure today's path on the 1M run (slow)")
    parser.add_argument("--step", choices=sorted(_STEPS), help=argparse.SUPPRESS)
    parser.add_argument("paths", nargs="*", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step:
        print(json.dumps(_STEPS[args.step](*args.paths)))
    else:
        main(old_at_1m=args.old_at_1m)
