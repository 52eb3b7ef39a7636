"""An agent's latency with its OTLP collector up, refusing connections, or accepting and never answering.

    python -m bench.unreachable [--runs 200] [--rounds 3]

Runs the fault tests' agent (``tests/faults/agent_app.py``: one session, run and turn per request,
a tool call and a 20-delta streamed reply; ``configure()`` with a ``BatchSpanProcessor`` and the
official OTLP/HTTP exporter, SDK defaults) as a child process four times: without an exporter, with
``otel-session collect`` up on loopback (the baseline), with the port closed (connection refused)
and with a socket that accepts but never answers (a hung collector). Reports p50/p95 of the app's
run latency, the process's total time (its final ``shutdown()`` waits for the exporter) and the
spans the SDK's queue dropped — medians over rounds in which the modes alternate (the machine may be
busy with other work); writes ``bench/results-unreachable.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from bench import BENCH_DIR, Figure, write_results

AGENT_APP = BENCH_DIR.parent / "tests" / "faults" / "agent_app.py"
MODES = ["no_exporter", "collector_up", "connection_refused", "no_answer"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def _collector(root: Path):
    process = subprocess.Popen(
        [sys.executable, "-m", "otel_session.cli", "collect", "--dir", str(root), "--grpc", "off",
         "--http", "127.0.0.1:0", "--status-interval", "3600"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        banner = process.stdout.readline()
        yield f"http://{banner.split('http=')[1].split()[0]}/v1/traces"
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)


@contextmanager
def _black_hole():
    """A listening socket nobody accepts from: connects succeed, requests never get an answer."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1024)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1/traces"


def _measure(endpoint: str | None, runs: int, root: Path) -> dict:
    command = [sys.executable, str(AGENT_APP), "--dir", str(root), "--runs", str(runs)]
    if endpoint:
        command += ["--otlp", endpoint]
    started = time.perf_counter()
    completed = subprocess.run(
        command, capture_output=True, text=True, timeout=600,
        env={**os.environ, "OTEL_SESSION_REDACTION_KEY": "bench"},
    )
    total_s = time.perf_counter() - started
    lines = [json.loads(line) for line in completed.stdout.splitlines() if line.startswith("{")]
    latencies = sorted(line["turn_ms"] for line in lines if "turn_ms" in line)
    errors = sum(1 for line in lines if line.get("error"))
    return {
        "p50_ms": statistics.median(latencies),
        "p95_ms": latencies[int(0.95 * (len(latencies) - 1))],
        "max_ms": latencies[-1],
        "runs": len(latencies),
        "app_errors": errors,
        "exit_code": completed.returncode,
        "process_s": total_s,
        "spans_dropped_by_queue": completed.stderr.count("Queue full, dropping Span"),
        "export_failures_logged": completed.stderr.count("Failed to export spans batch"),
    }


def _endpoint_for(mode: str, base: Path) -> contextlib.AbstractContextManager[str | None]:
    if mode == "collector_up":
        return _collector(base / "collected")  # stopped after its measurement: no CPU left to it
    if mode == "connection_refused":
        return contextlib.nullcontext(f"http://127.0.0.1:{_free_port()}/v1/traces")
    if mode == "no_answer":
        return _black_hole()
    return contextlib.nullcontext(None)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.unreachable")
    parser.add_argument("--runs", type=int, default=200, help="runs (requests) per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; modes alternate within each round")
    args = parser.parse_args(argv if argv is not None else [])
    rounds: dict[str, list[dict]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="bench-unreachable-") as tmp:
        for number in range(args.rounds):
            order = MODES[number % len(MODES):] + MODES[: number % len(MODES)]
            for mode in order:
                base = Path(tmp) / f"{mode}-{number}"
                with _endpoint_for(mode, base) as endpoint:
                    rounds[mode].append(_measure(endpoint, args.runs, base / "bundles"))
    modes = {mode: _median_of(measured) for mode, measured in rounds.items()}
    up = modes["collector_up"]
    figures = []
    for mode in ("connection_refused", "no_answer"):
        label = mode.replace("_", " ")
        figures.append(Figure(f"run p50, collector {label}", modes[mode]["p50_ms"], "ms", up["p50_ms"],
                              note="baseline: collector up"))
        figures.append(Figure(f"run p95, collector {label}", modes[mode]["p95_ms"], "ms", up["p95_ms"],
                              note="baseline: collector up"))
    figures.append(Figure("run p50, collector up", up["p50_ms"], "ms", modes["no_exporter"]["p50_ms"],
                          note="baseline: no exporter"))
    result = write_results("unreachable", figures, {"runs": args.runs, "rounds": rounds, "medians": modes})
    for mode, measured in modes.items():
        print(f"{mode}: p50 {measured['p50_ms']:.2f} ms, p95 {measured['p95_ms']:.2f} ms, "
              f"process {measured['process_s']:.1f} s, queue drops {measured['spans_dropped_by_queue']}, "
              f"app errors {measured['app_errors']} (medians of {args.rounds} rounds)")
    return result


def _median_of(measured: list[dict]) -> dict:
    return {key: statistics.median(m[key] for m in measured) for key in measured[0]}


if __name__ == "__main__":
    main(sys.argv[1:])
