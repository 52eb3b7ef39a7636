"""Load: zero loss below the bounds and bounded memory, in process and in the collector (issue 8).

    python -m bench.load [--deltas 100000] [--runs 1000] [--exporters 50] [--spans 2000] [--kills 20]

Three workloads, each in a fresh child process so its memory is its own:

* ``single_message``: one run, one assistant message of N deltas through the public API
  (``otel_session.message(...).delta``); every delta must be a journal record, in order.
* ``concurrent_runs``: N short runs open at the same time (asyncio tasks, each a session, a
  turn, a user and an assistant message, a slot write, a tool); every record of every run must be
  on disk. The baseline is the same run recorded alone.
* ``collector``: N official OTLP/gRPC exporters at once, M spans each, against one collector
  process (``python -m bench.collector --serve write``); every span bundled, rejected explicitly
  (``partial_success`` / the ``rejected`` counter) or failed at the exporter, and every GenAI span's
  records on disk. It runs twice: answered once the spans are in the journal files (the
  collector's behaviour) and answered before (``write-ack-early``, the previous behaviour), so
  the cost of acknowledging after the write is a same-run ratio.
* ``kill9``: the collector SIGKILLed N times at random moments under official gRPC and HTTP
  exporters, restarted on the same directory: acknowledged spans lost must be 0.

Memory is the child's peak RSS (``VmHWM``, reset through ``/proc/self/clear_refs`` once the
process is warm) above its RSS at that point; the bound is the writer's queue bound
(``WriterLimits.max_queue_bytes``) plus a constant. Writes ``bench/results-load.json``.
The tests in ``tests/load`` run the same workloads at moderate sizes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench import BENCH_DIR, Figure, write_results

MEMORY_CONSTANT_BYTES = 32 << 20
"""What a workload may hold beyond the writer's queue bound: interpreter, SDK, the app's own text."""
COLLECTOR_MEMORY_BOUND_BYTES = 128 << 20
"""The collector's peak growth under any load: the writer's queue bound, 256 runs awaiting their seal,
the runs open in the sink and the requests of 16 gRPC workers, plus the constant."""
CHILD_TIMEOUT_S = 600


# -- memory ----------------------------------------------------------------------------------


def _status_kib(pid: int | str, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _reset_peak_rss() -> int:
    """Reset this process's peak RSS to its current RSS (Linux); return the RSS in bytes."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass  # the peak then includes start-up: an over-estimate, never an under-estimate
    return _status_kib("self", "VmRSS") * 1024


def _peak_growth(rss_at_start: int, pid: int | str = "self") -> int:
    return max(_status_kib(pid, "VmHWM") * 1024 - rss_at_start, 0)


# -- in-process workloads (child side) --------------------------------------------------------


def _delta(i: int) -> str:
    return f"tok{i % 997} "


def single_message(deltas: int) -> dict[str, Any]:
    """One assistant message of ``deltas`` deltas; count and check its journal records."""
    import otel_session
    from otel_session.testing import capture_bundle
    from otel_session.bundle.write import WriterLimits

    limits = WriterLimits()
    with capture_bundle() as captured:
        with otel_session.session("load-warm-up"), otel_session.run(agent="load"):
            with otel_session.message("assistant") as m:
                m.delta("warm")
        rss = _reset_peak_rss()
        started = time.perf_counter()
        cpu = time.process_time()
        with otel_session.session("load-single"), otel_session.run(agent="load"):
            with otel_session.turn(0, state="answer"), otel_session.message("assistant") as m:
                for i in range(deltas):
                    m.delta(_delta(i))
        app_s = time.perf_counter() - started
        app_cpu_s = time.process_time() - cpu
        captured.recorder.force_flush()
        peak = _peak_growth(rss)
        elapsed = time.perf_counter() - started
    bundle = next(b for b in captured.bundles if b.manifest and b.manifest["session_id"] == "load-single")
    on_disk = [e for e in bundle.events if e["type"] == "assistant_delta"]
    in_order = [e["payload"]["delta"] for e in on_disk] == [_delta(i) for i in range(deltas)]
    seqs = [e["seq"] for e in bundle.events]
    return {
        "deltas": deltas,
        "status": bundle.status.value,
        "capture": bundle.capture,
        "records_on_disk": len(bundle.events),
        "deltas_on_disk": len(on_disk),
        "lost": deltas - len(on_disk),
        "in_order": in_order,
        "seq_contiguous": seqs == list(range(1, len(seqs) + 1)),
        "app_s": app_s,
        "app_cpu_s": app_cpu_s,
        "deltas_per_s_app": deltas / app_s,
        "elapsed_s": elapsed,
        "peak_rss_growth_bytes": peak,
        "memory_bound_bytes": limits.max_queue_bytes + MEMORY_CONSTANT_BYTES,
    }


_SHORT_RUN_DELTAS = 10


async def _short_run(index: int, all_open: asyncio.Event, opened: list[int]) -> None:
    import otel_session

    with otel_session.session(f"load-{index}"), otel_session.run(agent="load"):
        opened.append(index)
        await all_open.wait()
        with otel_session.turn(0, state="collect", required_slots=["party_size"]):
            with otel_session.message("user") as m:
                m.text(f"a table for {index % 8 + 1}")
            await asyncio.sleep(0)
            otel_session.slot_write("party_size", index % 8 + 1, source="nlu")
            with otel_session.tool_execution("check_availability", call_id=f"c{index}", arguments={"n": index}) as tool:
                await asyncio.sleep(0)
                tool.finish(result={"free": True})
            with otel_session.message("assistant") as m:
                for i in range(_SHORT_RUN_DELTAS):
                    m.delta(_delta(i))
                    await asyncio.sleep(0)


async def _concurrently(runs: int) -> int:
    opened: list[int] = []
    all_open = asyncio.Event()
    tasks = [asyncio.create_task(_short_run(i, all_open, opened)) for i in range(runs)]
    while len(opened) < runs and not any(task.done() for task in tasks):
        await asyncio.sleep(0)
    peak_open = len(opened)
    all_open.set()
    await asyncio.gather(*tasks)
    return peak_open


def concurrent_runs(runs: int) -> dict[str, Any]:
    """``runs`` short runs open at once; every run's records on disk, none lost."""
    from otel_session.testing import capture_bundle

    with capture_bundle() as reference:
        asyncio.run(_concurrently(1))
    per_run = Counter(e["type"] for e in reference.bundle.events)
    with capture_bundle() as captured:
        rss = _reset_peak_rss()
        started = time.perf_counter()
        cpu = time.process_time()
        peak_open = asyncio.run(_concurrently(runs))
        app_s = time.perf_counter() - started
        app_cpu_s = time.process_time() - cpu
        captured.recorder.force_flush()
        peak = _peak_growth(rss)
    expected = sum(per_run.values()) * runs
    on_disk = sum(len(b.events) for b in captured.bundles)
    mismatched = [
        b.run_id for b in captured.bundles
        if Counter(e["type"] for e in b.events) != per_run or b.status.value != "complete"
    ]
    return {
        "runs": runs,
        "runs_open_at_once": peak_open,
        "bundles": len(captured.bundles),
        "records_per_run": dict(per_run),
        "records_expected": expected,
        "records_on_disk": on_disk,
        "lost": expected - on_disk,
        "runs_not_matching_reference": len(mismatched),
        "app_s": app_s,
        "app_cpu_s": app_cpu_s,
        "runs_per_s": runs / app_s,
        "peak_rss_growth_bytes": peak,
        "peak_rss_growth_per_run_bytes": peak / runs,
    }


# -- the collector workload (parent side drives, child collects) ------------------------------


def _genai_span_keys(batch: list) -> set[tuple[str, str]]:
    """(trace id, span id) of the spans that produce journal records (all but plain HTTP spans)."""
    return {
        (f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}")
        for span in batch
        if span.attributes.get("gen_ai.operation.name")
    }


def collector_load(
    exporters: int, spans_per_exporter: int, batch: int = 400, per_trace: int = 8, *, mode: str = "write"
) -> dict[str, Any]:
    """``exporters`` official gRPC exporters × ``spans_per_exporter`` spans against one collector
    (``mode`` ``write-ack-early``: acknowledged before the journal write, the previous behaviour)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    from bench.collector import _batch, export_concurrently  # the benchmark's realistic agent spans
    from otel_session.bundle.read import find_bundles, read_bundle

    resource = Resource.create({"service.name": "load-agent"})
    scope = InstrumentationScope("bench.load")
    prepared = [
        [_batch(e, b, batch, per_trace, resource, scope) for b in range(spans_per_exporter // batch)]
        for e in range(exporters)
    ]
    sent = sum(len(spans) for batches in prepared for spans in batches)
    expected_keys = set().union(*(_genai_span_keys(spans) for batches in prepared for spans in batches))
    failed_at_exporter: list[int] = []
    failed_keys: set[tuple[str, str]] = set()
    with tempfile.TemporaryDirectory(prefix="otel-session-load-") as root:
        child = subprocess.Popen(
            [sys.executable, "-m", "bench.collector", "--serve", mode, "--dir", root],
            stdout=subprocess.PIPE, text=True, cwd=BENCH_DIR.parent,
        )
        try:
            port = int(child.stdout.readline())
            rss_at_ready = _status_kib(child.pid, "VmRSS") * 1024

            def failed(index: int, spans: list) -> None:
                failed_at_exporter.append(len(spans))
                failed_keys.update(_genai_span_keys(spans))

            wall_s = export_concurrently(port, prepared, failed)
            peak = _peak_growth(rss_at_ready, child.pid)
            child.send_signal(signal.SIGTERM)
            report = json.loads(child.stdout.readline())
            child.wait(CHILD_TIMEOUT_S)
        finally:
            if child.poll() is None:
                child.kill()
        bundles = [read_bundle(path) for path in find_bundles([Path(root)])]
    on_disk_keys = {(e.get("trace_id"), e.get("span_id")) for b in bundles for e in b.events}
    counters = report["counters"]
    failed = sum(failed_at_exporter)
    accounted = counters["bundled"] + counters["rejected"] + counters["no_session"] + failed
    return {
        "exporters": exporters,
        "spans_sent": sent,
        "wall_s": wall_s,
        "spans_per_s_wall": sent / wall_s,
        "collector_cpu_s": report["cpu_s"],
        "spans_per_core_s": sent / report["cpu_s"],
        "counters": counters,
        "failed_at_exporter": failed,
        # Spans no counter and no failed export account for (lost), and spans that are both bundled
        # and failed at the exporter (its deadline passed while the collector was still taking them).
        "unaccounted": max(sent - accounted, 0),
        "bundled_yet_failed_at_exporter": max(accounted - sent, 0),
        "genai_spans_expected_on_disk": len(expected_keys),
        "genai_spans_missing_on_disk": len(expected_keys - on_disk_keys),
        # Records missing on disk that no failed export or rejection explains (must be 0).
        "genai_spans_lost": len(expected_keys - on_disk_keys - failed_keys) if counters["rejected"] == 0 else None,
        "bundles": len(bundles),
        "bundles_not_complete": sum(1 for b in bundles if b.status.value != "complete"),
        "collector_peak_rss_growth_bytes": peak,
    }


# -- kill -9 (the collector side's durability) -------------------------------------------------

KILL9_SESSION = "kill9"


def _start_collector(root: Path, log: Any) -> tuple[subprocess.Popen, int, int]:
    """``otel-session collect`` on ``root`` (free ports); its process and gRPC and HTTP ports."""
    process = subprocess.Popen(
        [sys.executable, "-m", "otel_session.cli", "collect", "--dir", str(root), "--grpc", "127.0.0.1:0",
         "--http", "127.0.0.1:0", "--seal-after", "0.5"],
        stdout=subprocess.PIPE, stderr=log, text=True, cwd=BENCH_DIR.parent,
        env={**os.environ, "OTEL_SESSION_REDACTION_KEY": "kill9"},
    )
    banner = process.stdout.readline()
    if "otel-session collector:" not in banner:
        raise RuntimeError(f"the collector did not start: {banner!r}")
    ports = [int(banner.split(f"{name}=")[1].split()[0].rsplit(":", 1)[1]) for name in ("grpc", "http")]
    return process, ports[0], ports[1]


def _whole_trace(rng: Any, resource: Any, tools: int = 3) -> list:
    """One run as an exporter sends it: ``tools`` tool calls and the root that names the session."""
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import SpanContext, TraceFlags

    trace_id = rng.getrandbits(128) | 1
    root = SpanContext(trace_id, rng.getrandbits(64) | 1, False, TraceFlags(1))
    start = 1_764_453_121_000_000_000 + rng.getrandbits(30)
    tool = {"session.id": KILL9_SESSION, "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}
    spans = [
        ReadableSpan("execute_tool lookup", SpanContext(trace_id, rng.getrandbits(64) | 1, False, TraceFlags(1)),
                     parent=root, resource=resource, start_time=start + n * 1000, end_time=start + n * 1000 + 500,
                     attributes=tool)
        for n in range(tools)
    ]
    spans.append(ReadableSpan("invoke_agent kill9", root, resource=resource, start_time=start - 1,
                              end_time=start + 10_000, attributes={"session.id": KILL9_SESSION}))
    return spans


def _journaled_span_ids(root: Path) -> set[str]:
    from otel_session.bundle.read import iter_runs, read_bundle

    return {event["span_id"] for info in iter_runs(root) for event in read_bundle(info.path).events if "span_id" in event}


def kill9(kills: int, *, seed: int = 9, clients: int = 4) -> dict[str, Any]:
    """SIGKILL a collector ``kills`` times at random moments while ``clients`` official exporters
    (half gRPC, half HTTP) export whole traces into it, restarting it on the same directory.

    After each kill: the acknowledged spans missing from the journals (must be 0) and the bundles
    left ``recording`` that read ``complete`` (must be 0); after a last restart and SIGTERM, the
    statuses of all bundles (all ``complete``).
    """
    import random
    import threading

    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import SpanExportResult

    from otel_session.bundle.read import BundleStatus, iter_runs, read_bundle

    resource = Resource.create({"service.name": "kill9"})
    rng = random.Random(seed)
    acked: set[str] = set()
    lock = threading.Lock()
    lost_by_kill: list[int] = []
    open_yet_complete = 0
    with tempfile.TemporaryDirectory(prefix="otel-session-kill9-") as tmp:
        root = Path(tmp) / "root"
        with open(Path(tmp) / "collector.log", "w") as log:
            for kill in range(kills):
                process, grpc_port, http_port = _start_collector(root, log)
                exporters = [
                    GrpcExporter(endpoint=f"http://127.0.0.1:{grpc_port}", insecure=True, timeout=1) if n % 2 == 0
                    else HttpExporter(endpoint=f"http://127.0.0.1:{http_port}/v1/traces", timeout=1)
                    for n in range(clients)
                ]
                stop = threading.Event()

                def client(exporter: Any, client_seed: int) -> None:
                    spans_rng = random.Random(client_seed)
                    while not stop.is_set():
                        spans = _whole_trace(spans_rng, resource)
                        if exporter.export(spans) is SpanExportResult.SUCCESS:
                            with lock:
                                acked.update(f"{span.context.span_id:016x}" for span in spans)

                threads = [threading.Thread(target=client, args=(exporter, seed * 1000 + kill * clients + n))
                           for n, exporter in enumerate(exporters)]
                for thread in threads:
                    thread.start()
                time.sleep(rng.uniform(0.2, 0.8))  # a random moment under load
                process.send_signal(signal.SIGKILL)
                process.wait(CHILD_TIMEOUT_S)
                stop.set()
                for thread in threads:
                    thread.join(CHILD_TIMEOUT_S)
                for exporter in exporters:
                    exporter.shutdown()
                lost_by_kill.append(len(acked - _journaled_span_ids(root)))
                open_yet_complete += sum(
                    1 for info in iter_runs(root)
                    if info.capture_status == "recording" and read_bundle(info.path).status is BundleStatus.COMPLETE
                )
            process, _, _ = _start_collector(root, log)  # resumes every run left recording and seals it
            process.send_signal(signal.SIGTERM)
            exit_code = process.wait(CHILD_TIMEOUT_S)
        statuses = Counter(read_bundle(info.path).status.value for info in iter_runs(root))
        lost_at_end = len(acked - _journaled_span_ids(root))
    return {
        "kills": kills,
        "spans_acked": len(acked),
        "acked_spans_lost_by_kill": lost_by_kill,
        "acked_spans_lost": max([lost_at_end, *lost_by_kill]),
        "recording_bundles_read_complete": open_yet_complete,
        "final_statuses": dict(statuses),
        "final_exit_code": exit_code,
    }


# -- running and reporting ---------------------------------------------------------------------

WORKLOADS = {"single_message": single_message, "concurrent_runs": concurrent_runs}


def measure(workload: str, size: int) -> dict[str, Any]:
    """Run an in-process workload in a fresh child process and return its figures."""
    completed = subprocess.run(
        [sys.executable, "-m", "bench.load", "--child", workload, "--size", str(size)],
        capture_output=True, text=True, cwd=BENCH_DIR.parent, timeout=CHILD_TIMEOUT_S, check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"{workload} child failed ({completed.returncode}):\n{completed.stderr[-4000:]}")
    return json.loads(completed.stdout.splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=1_000)
    parser.add_argument("--exporters", type=int, default=50)
    parser.add_argument("--spans", type=int, default=2_000, help="spans per exporter")
    parser.add_argument("--kills", type=int, default=20, help="SIGKILLs of the kill -9 round")
    parser.add_argument("--child", choices=sorted(WORKLOADS), help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(WORKLOADS[args.child](args.size), default=str))
        return {}
    load_before = os.getloadavg()
    message = measure("single_message", args.deltas)
    runs = measure("concurrent_runs", args.runs)
    collector = collector_load(args.exporters, args.spans)
    ack_early = collector_load(args.exporters, args.spans, mode="write-ack-early")
    killed = kill9(args.kills)
    mib = 1 << 20
    figures = [
        Figure("load.message_deltas_lost", message["lost"], "deltas", target="0", ok=message["lost"] == 0 and message["in_order"],
               note=f"{args.deltas:,} deltas in one message"),
        Figure("load.message_deltas_per_s", message["deltas_per_s_app"], "deltas/s", note="app thread, public API"),
        Figure("load.message_peak_rss_growth", message["peak_rss_growth_bytes"] / mib, "MiB",
               target=f"<= queue bound + {MEMORY_CONSTANT_BYTES // mib} MiB",
               ok=message["peak_rss_growth_bytes"] <= message["memory_bound_bytes"]),
        Figure("load.concurrent_runs_records_lost", runs["lost"], "records", target="0",
               ok=runs["lost"] == 0 and runs["runs_not_matching_reference"] == 0,
               note=f"{runs['runs_open_at_once']:,} runs open at once"),
        Figure("load.concurrent_runs_per_s", runs["runs_per_s"], "runs/s"),
        Figure("load.concurrent_runs_peak_rss_growth", runs["peak_rss_growth_bytes"] / mib, "MiB",
               note=f"{runs['peak_rss_growth_per_run_bytes'] / 1024:.0f} KiB per open run"),
        Figure("load.collector_spans_unaccounted", collector["unaccounted"], "spans", target="0",
               ok=collector["unaccounted"] == 0 and not collector["genai_spans_lost"],
               note=f"{args.exporters} exporters × {args.spans:,} spans; {collector['failed_at_exporter']:,} failed "
                    f"at the exporter (UNAVAILABLE after its retries); counters {collector['counters']}"),
        Figure("load.collector_spans_failed_at_exporter", collector["failed_at_exporter"], "spans",
               note="refused retryably while the writer was behind; the exporter gave up after its retries"),
        Figure("load.collector_spans_bundled_yet_failed_at_exporter", collector["bundled_yet_failed_at_exporter"],
               "spans", note="the exporter's 60 s deadline passed while the collector was still taking the request"),
        Figure("load.collector_spans_per_s_wall", collector["spans_per_s_wall"], "spans/s",
               note="answered once the spans are in the journal files (ack after write)"),
        Figure("load.collector_spans_per_s_wall_ack_early", ack_early["spans_per_s_wall"], "spans/s",
               note="the same load answered before the journal write (the previous behaviour)"),
        Figure("load.kill9_acked_spans_lost", killed["acked_spans_lost"], "spans", target="0",
               ok=killed["acked_spans_lost"] == 0 and killed["recording_bundles_read_complete"] == 0
               and set(killed["final_statuses"]) == {"complete"},
               note=f"{killed['kills']} SIGKILLs under {killed['spans_acked']:,} acknowledged spans "
                    f"(official gRPC + HTTP exporters); final bundles {killed['final_statuses']}"),
        Figure("load.collector_spans_per_core_s", collector["spans_per_core_s"], "spans/s"),
        Figure("load.collector_peak_rss_growth", collector["collector_peak_rss_growth_bytes"] / mib, "MiB",
               target=f"<= {COLLECTOR_MEMORY_BOUND_BYTES // mib} MiB",
               ok=collector["collector_peak_rss_growth_bytes"] <= COLLECTOR_MEMORY_BOUND_BYTES),
    ]
    details = {
        "single_message": message,
        "concurrent_runs": runs,
        "collector": collector,
        "collector_ack_early": ack_early,
        "kill9": killed,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
    }
    return write_results("load", figures, details)


if __name__ == "__main__":
    main()
