"""Collector ingest benchmark: spans/s over OTLP/gRPC from N concurrent official exporters.

    python -m bench.collector [--spans 30000] [--exporters 4] [--batch 512] [--spans-per-trace 8,64] [--rounds 3]
                              [--span-records] [--catalog-off] [--against REF]

Runs the collector in a child process twice in one run — receiver only (decode + count, the
baseline) and bundle writing on (decode → normalize → redact → write, sealing included) — and
drives each with N threads, each an official ``OTLPSpanExporter`` (gRPC) exporting batches of
realistic agent spans (a run root, chat spans with GenAI message attributes, tool spans; one
session per trace), for short runs (8 spans a trace) and long runs (64): every trace is a bundle
opened and sealed, so short runs weigh the per-bundle cost (directories, lock, fsyncs, the
event-time rewrite) and long runs the per-span cost. Reports wall spans/s, the collector's CPU seconds per 1k spans and spans/s
per core (spans ÷ collector CPU seconds), writes ``bench/results-collector.json`` and prints a
summary. Every measurement runs ``--rounds`` times, the modes alternating; each figure is the
median round's, and its note gives the spread. Targets (issue 21), spans per collector CPU-second
with writing on: ≥ 15,000 for 64-span runs on disk, ≥ 18,000 on tmpfs, ≥ 8,000 for 8-span runs on
disk. The per-bundle CPU is split from the per-span CPU by the two run sizes of the same run
(CPU/span = per-span + per-bundle ÷ spans-per-run) and printed beside the file-system floor: the
system calls alone one bundle needs, made by hand in the same run.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench import Figure, write_results

TARGETS = {(64, "disk"): 15_000, (64, "tmpfs"): 18_000, (8, "disk"): 8_000}
"""Spans per collector CPU-second with writing on, by (spans per run, file system): issue 21."""


# -- the collector side (child process) ------------------------------------------------------


def serve(mode: str, root: str) -> None:
    """Run a collector until SIGTERM, then print its counters and CPU time as JSON."""
    from otel_session.collector.server import Collector, settle_heap_for_serving
    from otel_session.redact import RedactionPolicy, Redactor
    from otel_session.core.stop_signal import StopSignal

    collector = Collector(
        root,
        grpc_address="127.0.0.1:0",
        http_address=None,
        seal_after_s=1.0,
        redactor=Redactor(RedactionPolicy(), key=b"bench"),
        bundle=mode != "receive",
    )
    if mode == "write-ack-early":  # the acknowledgement before the journal write (the previous figure)
        collector.sink.ack_after_write = False
    collector.start()
    stop = StopSignal().install()
    settle_heap_for_serving()  # as ``otel-session collect`` does
    ready = os.times()
    print(collector.grpc_port, flush=True)
    stop.wait()
    hooks_cpu_s = _thread_cpu_s("otel-session-run-hooks")  # before the stop ends that thread
    collector.stop()  # seals every run still open: part of the work measured
    done = os.times()
    print(json.dumps({
        "hooks_cpu_s": hooks_cpu_s,
        "counters": collector.counters.snapshot(),
        "cpu_s": (done.user + done.system) - (ready.user + ready.system),
        "sys_s": done.system - ready.system,
        "startup_cpu_s": ready.user + ready.system,
    }), flush=True)


def _thread_cpu_s(name: str) -> float | None:
    """CPU seconds of this process's thread called ``name`` so far (Linux ``/proc``), None without one."""
    for thread in threading.enumerate():
        if thread.name == name and thread.native_id is not None:
            try:
                fields = Path(f"/proc/self/task/{thread.native_id}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                return None
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    return None


# -- the client side ---------------------------------------------------------------------------


_SYSTEM_PROMPT = (
    '{"role":"system","parts":[{"type":"text","content":"You book tables at Chez Otel (+33 1 23 45 67 89). '
    'Ask for the day, the time and the party size; confirm before booking."}]}'
)
_EXCHANGE = (
    '{{"role":"assistant","parts":[{{"type":"tool_call","id":"call_{0}","name":"check_availability",'
    '"arguments":{{"day":"friday","party_size":2}}}}]}},'
    '{{"role":"tool","parts":[{{"type":"tool_call_response","id":"call_{0}","response":"19:00 free"}}]}}'
)
_HISTORY_CAP = 8
_RUNS_PER_SESSION = 4


def _batch(exporter_index: int, batch_index: int, size: int, per_trace: int, resource, scope) -> list:
    """``size`` finished spans in traces (runs) of ``per_trace`` spans, shaped like an agent loop.

    Each run: a root (``invoke_agent``); then per 8 spans 5 model calls (``chat``), 2 tool calls
    (``execute_tool``) and 1 plain HTTP span. Every model call sends the shared system prompt, the
    run's own user message and the history so far (an assistant tool call and its tool response per
    earlier call, the last 8), and gets a reply of its own, as GenAI instrumentations record them.
    Sessions hold 4 runs (a conversation of 4 turns). Every run is new and is sealed. Trace and span
    ids are random 128/64-bit numbers as SDKs draw them (seeded, so a run repeats).
    """
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

    spans = []
    now = time.time_ns()
    # A string seed is hashed whole: integer seeds differing in their upper 32-bit word gave equal
    # streams (exporter 1's batch 2 drew exporter 0's trace ids), so runs repeated across batches
    # and the later copy was refused as already sealed, or merged into the earlier one.
    rng = random.Random(f"{exporter_index}/{batch_index}")
    for trace_number in range(size // per_trace):
        trace_id = rng.getrandbits(128) | 1
        session_id = f"bench-{exporter_index}-{batch_index}-{trace_number // _RUNS_PER_SESSION}"
        root_ctx = SpanContext(trace_id, rng.getrandbits(64) | 1, is_remote=False, trace_flags=TraceFlags(1))
        start = now + trace_number * 1_000
        user = f'{{"role":"user","parts":[{{"type":"text","content":"a table for two on friday at 7pm please, ref B{batch_index}T{trace_number}"}}]}}'
        calls = 0
        for position in range(1, per_trace):
            context = SpanContext(trace_id, rng.getrandbits(64) | 1, is_remote=False, trace_flags=TraceFlags(1))
            if position % 8 in (1, 2, 3, 4, 0):
                history = [_EXCHANGE.format(call) for call in range(max(0, calls - _HISTORY_CAP), calls)]
                name, attributes = "chat mock-gpt", {
                    "session.id": session_id,
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "mock-gpt",
                    "gen_ai.input.messages": "[" + ",".join([_SYSTEM_PROMPT, user, *history]) + "]",
                    "gen_ai.output.messages": f'[{{"role":"assistant","parts":[{{"type":"text","content":"Friday 19:00 for two, call {position}: booked as B{batch_index}T{trace_number}."}}],"finish_reason":"stop"}}]',
                    "gen_ai.usage.input_tokens": 40 + 30 * len(history),
                    "gen_ai.usage.output_tokens": 12,
                }
                calls += 1
            elif position % 8 in (5, 6):
                name, attributes = "execute_tool check_availability", {
                    "session.id": session_id,
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "check_availability",
                    "gen_ai.tool.call.id": f"call_{calls}",
                    "gen_ai.tool.call.arguments": '{"day": "friday", "party_size": 2}',
                    "gen_ai.tool.call.result": "19:00 free",
                }
            else:
                name, attributes = "GET /slots", {"http.request.method": "GET", "url.path": "/slots"}
            spans.append(ReadableSpan(
                name=name, context=context, parent=root_ctx, resource=resource, attributes=attributes,
                kind=SpanKind.CLIENT, start_time=start + position * 100, end_time=start + position * 100 + 50,
                instrumentation_scope=scope,
            ))
        spans.append(ReadableSpan(
            name="invoke_agent booking", context=root_ctx, parent=None, resource=resource,
            attributes={"session.id": session_id, "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "booking"},
            kind=SpanKind.SERVER, start_time=start, end_time=start + per_trace * 100 + 100, instrumentation_scope=scope,
        ))
    return spans


def _drive(port: int, exporters: int, spans_per_exporter: int, batch: int, per_trace: int) -> float:
    """Export from ``exporters`` threads at once; return wall seconds for all of it."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    resource = Resource.create({"service.name": "bench-agent"})
    scope = InstrumentationScope("bench")
    batches = spans_per_exporter // batch
    prepared = [[_batch(e, b, batch, per_trace, resource, scope) for b in range(batches)] for e in range(exporters)]
    failures: list[str] = []
    elapsed = export_concurrently(port, prepared, lambda index, spans: failures.append(f"exporter {index} failed"))
    if failures:
        raise RuntimeError(f"{len(failures)} export(s) failed: {failures[:3]}")
    return elapsed


def export_concurrently(port: int, prepared: list[list[list]], on_failure: Callable[[int, list], None]) -> float:
    """One official gRPC exporter per entry of ``prepared`` exports its batches, all at once from a
    common start; ``on_failure(exporter index, spans)`` for each failed export. Returns wall seconds."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    barrier = threading.Barrier(len(prepared) + 1)

    def run(index: int) -> None:
        exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{port}", insecure=True, timeout=60)
        barrier.wait()
        for spans in prepared[index]:
            if exporter.export(spans) is not SpanExportResult.SUCCESS:
                on_failure(index, spans)
        exporter.shutdown()

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(prepared))]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def bundle_fs_floor_us(parent: str, bundles: int = 320, *, group: int = 64) -> float:
    """CPU µs per bundle spent in the system calls alone that one bundle needs, made by hand.

    A session directory and a run directory, the journal (locked, one append), ``run.json`` and
    ``capture.json``; then the seal as the writer does it (SPEC §5.3): with ``group`` > 1, ``group``
    bundles at once (``otel_session.bundle.seal``: each terminal capture written to a temporary file,
    one ``syncfs``, the renames, one more ``syncfs``); with ``group=1``, the previous writer's seal
    of each bundle alone (journal and manifest fsynced, the temporary capture fsynced and renamed,
    the directory fsynced: 4 fsyncs). No Python beyond the calls: what the file system costs on
    this machine, whatever the collector does. Nothing is deleted (see ``main``).
    """
    from otel_session.bundle.seal import libc_syncfs

    syncfs = libc_syncfs() if group > 1 else None
    if group > 1 and syncfs is None:
        return float("nan")
    root = tempfile.mkdtemp(dir=parent)
    started = time.thread_time()
    for first in range(0, bundles, group):
        opened = []
        for number in range(first, min(first + group, bundles)):
            run = Path(root, f"s{number}", "run")
            os.mkdir(run.parent, 0o700)
            os.mkdir(run, 0o700)
            journal = os.open(run / "events.ndjson", os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o600)
            fcntl.flock(journal, fcntl.LOCK_EX | fcntl.LOCK_NB)
            for name in ("run.json", "capture.json"):
                handle = os.open(run / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                os.write(handle, b"{}" * 256)
                os.close(handle)
            os.write(journal, b"x" * 2000)
            opened.append((run, journal))
        if syncfs is None:
            for run, journal in opened:
                os.fsync(journal)
                handle = os.open(run / "run.json", os.O_RDONLY)
                os.fsync(handle)
                os.close(handle)
                handle = os.open(run / ".capture.tmp", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                os.write(handle, b"{}" * 100)
                os.fsync(handle)
                os.close(handle)
                os.replace(run / ".capture.tmp", run / "capture.json")
                directory = os.open(run, os.O_RDONLY)
                os.fsync(directory)
                os.close(directory)
                os.close(journal)
            continue
        for run, _journal in opened:
            handle = os.open(run / ".capture.tmp", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(handle, b"{}" * 100)
            os.close(handle)
        syncfs(opened[0][1])
        for run, _journal in opened:
            os.replace(run / ".capture.tmp", run / "capture.json")
        syncfs(opened[0][1])
        for _run, journal in opened:
            os.close(journal)
    return (time.thread_time() - started) / bundles * 1e6


def _source_tree(ref: str) -> str:
    """The files of commit ``ref`` of this repository, extracted to a new temporary directory."""
    tree = tempfile.mkdtemp(prefix="bench-collector-against-")
    archive = subprocess.run(["git", "archive", ref], check=True, capture_output=True,
                             cwd=Path(__file__).resolve().parents[1]).stdout
    subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
    return tree


_VARIANTS = {
    "write-no-catalog": ("OTEL_SESSION_CATALOG", "off"),  # the collector without its run catalog
    "write-span-records": ("OTEL_SESSION_SPAN_RECORDS", "on"),  # a span record per span besides
}
"""Measurement modes that write with one setting changed: (variable, value)."""


def measure(mode: str, exporters: int, spans: int, batch: int, per_trace: int, parent: str,
            code: str | None = None) -> dict:
    """One collector run; its bundles stay under ``parent`` until the benchmark ends (see main).
    ``code``: a source tree the collector runs from instead of this one (``--against``)."""
    root = tempfile.mkdtemp(dir=parent)
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = code
    for variable, _ in _VARIANTS.values():
        env.pop(variable, None)
    if mode in _VARIANTS:  # writing with one setting changed: its cost is the difference
        env[_VARIANTS[mode][0]] = _VARIANTS[mode][1]
    child = subprocess.Popen(
        [sys.executable, "-m", "bench.collector", "--serve", "write" if mode in _VARIANTS else mode,
         "--dir", root],
        stdout=subprocess.PIPE, text=True, env=env, cwd=code,
    )
    port = int(child.stdout.readline())
    per_exporter = spans // exporters // batch * batch
    wall_s = _drive(port, exporters, per_exporter, batch, per_trace)
    child.send_signal(signal.SIGTERM)
    report = json.loads(child.stdout.readline())
    child.wait(60)
    sent = per_exporter * exporters
    counters = report["counters"]
    # ``received`` also counts requests refused retryably (writer behind) and sent again.
    if counters["received"] < sent or (mode.startswith("write") and counters["bundled"] != sent):
        raise RuntimeError(f"{mode}: sent {sent}, collector counted {counters}")
    bundle_bytes = sum(path.stat().st_size for path in Path(root).rglob("*") if path.is_file())
    cpu_s = report["cpu_s"]
    return {
        "mode": mode,
        "sys_cpu_s": round(report["sys_s"], 3),
        "spans_per_trace": per_trace,
        "spans": sent,
        "wall_s": round(wall_s, 3),
        "spans_per_s_wall": round(sent / wall_s),
        "collector_cpu_s": round(cpu_s, 3),
        "cpu_ms_per_1k_spans": round(cpu_s / sent * 1e6, 2),
        "spans_per_core_s": round(sent / cpu_s),
        "bundle_bytes": bundle_bytes,
        "hooks_cpu_us_per_run": (round(report["hooks_cpu_s"] / (sent / per_trace) * 1e6, 1)
                                 if report.get("hooks_cpu_s") is not None else None),
        "counters": counters,
    }


def _median_round(rounds: list[dict]) -> dict:
    """The round with the median CPU per span (its wall-clock figures stay with it)."""
    return sorted(rounds, key=lambda measured: measured["cpu_ms_per_1k_spans"])[len(rounds) // 2]


def _spread(rounds: list[dict]) -> str:
    per_core = sorted(measured["spans_per_core_s"] for measured in rounds)
    return f"median of {len(rounds)} rounds (spread {per_core[0]:,}–{per_core[-1]:,} spans/s per core)"


def split_per_bundle(us_per_span: dict[int, float]) -> tuple[float, float] | None:
    """(per-span µs, per-bundle µs) from the CPU per span of two run sizes, or None with fewer.

    CPU per span = per-span + per-bundle ÷ spans-per-run, solved for the smallest and largest size.
    """
    if len(us_per_span) < 2:
        return None
    small, large = min(us_per_span), max(us_per_span)
    per_bundle = (us_per_span[small] - us_per_span[large]) / (1 / small - 1 / large)
    return us_per_span[large] - per_bundle / large, per_bundle


def _per_bundle_figures(workloads: list[dict], parents: dict[str, str], floors: dict[str, float]) -> list[Figure]:
    figures = []
    for name in parents:
        split = split_per_bundle({workload["spans_per_trace"]: workload[f"writing_on_{name}"]["cpu_ms_per_1k_spans"]
                                  for workload in workloads})
        if split is None:
            continue
        per_span, per_bundle = split
        figures += [
            Figure(f"collector.{name}.write_cpu_us_per_bundle", round(per_bundle), "us/bundle", baseline=round(floors[name]),
                   note="the collector's CPU per bundle (open, seal, files), split from the per-span CPU by the two "
                   "run sizes of this run; baseline: the file-system floor"),
            Figure(f"collector.{name}.write_cpu_us_per_span", round(per_span, 1), "us/span",
                   note="the per-span rest of that split (decode, normalize, redact, encode, append)"),
        ]
    return figures


def _span_records_figures(prefix: str, name: str, off: dict, rounds: dict[str, list[dict]], workload: dict) -> list[Figure]:
    """Writing with span records on against off (the default, ``off``), alternating rounds of one run."""
    on = workload[f"writing_on_{name}_span_records"] = _median_round(rounds[f"{name}_span_records"])
    return [
        Figure(f"{prefix}.{name}.write_spans_per_core_s_span_records_on_vs_off", on["spans_per_core_s"], "spans/s",
               baseline=off["spans_per_core_s"],
               note=f"OTEL_SESSION_SPAN_RECORDS=on against off, alternating rounds; CPU per span "
               f"{on['cpu_ms_per_1k_spans'] / off['cpu_ms_per_1k_spans']:.2f}x; on: " + _spread(rounds[f"{name}_span_records"])),
        Figure(f"{prefix}.{name}.bundle_bytes_span_records_on_vs_off", on["bundle_bytes"], "bytes",
               baseline=off["bundle_bytes"], note=f"{on['bundle_bytes'] / off['bundle_bytes']:.2f}x the bytes on disk"),
    ]


def main(argv: list[str] | None = None) -> dict:
    """Measure and write ``bench/results-collector.json`` (``python -m bench`` calls this with no arguments)."""
    parser = argparse.ArgumentParser(prog="python -m bench.collector", description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=30_000, help="spans per measurement (all exporters together)")
    parser.add_argument("--exporters", type=int, default=4, help="concurrent official gRPC exporters")
    parser.add_argument("--batch", type=int, default=512, help="spans per export (BatchSpanProcessor default)")
    parser.add_argument("--spans-per-trace", default="8,64", help="trace (= run) sizes to measure, comma-separated")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of every measurement, alternating; figures are the median round's (CPU time "
                        "on a shared VM drifts by ±25 %% from minute to minute)")
    parser.add_argument("--no-tmpfs", dest="tmpfs", action="store_false",
                        help="skip the second measurement with bundles on /dev/shm (the collector's CPU without disk)")
    parser.add_argument("--catalog-off", action="store_true",
                        help="also measure writing with the run catalog off (OTEL_SESSION_CATALOG=off), alternating "
                        "with it on: the catalog's cost as a ratio in the same run, and the CPU of the hooks' "
                        "thread per run beside the whole collector's")
    parser.add_argument("--span-records", action="store_true",
                        help="also measure writing with span records on (OTEL_SESSION_SPAN_RECORDS=on), alternating "
                        "with them off (the default): their cost in spans per CPU-second and bundle bytes, same run")
    parser.add_argument("--against", metavar="GIT_REF",
                        help="also measure the collector of that commit (git archive), alternating with this tree's "
                        "in every round: its figures get the suffix _against (and its catalog-off ones with "
                        "--catalog-off)")
    parser.add_argument("--serve", choices=["write", "write-ack-early", "receive"], help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv or [])
    if args.serve:
        serve(args.serve, args.dir)
        return {}
    # Bundles of every measurement are kept until the end: on an ext4 without a journal (this
    # machine's) creating files right after deleting thousands scans the recently deleted inodes,
    # which would charge one measurement for the previous one's clean-up.
    file_systems = {"disk": tempfile.gettempdir()}
    if args.tmpfs and os.path.isdir("/dev/shm"):
        file_systems["tmpfs"] = "/dev/shm"
    parents = {name: tempfile.mkdtemp(prefix="bench-collector-", dir=path) for name, path in file_systems.items()}
    against = _source_tree(args.against) if args.against else None
    figures = []
    workloads = []
    floors = {}
    try:
        for name, parent in parents.items():
            floors[name] = floor_us = bundle_fs_floor_us(parent)
            floors[f"{name}_fsync_each"] = each_us = bundle_fs_floor_us(parent, group=1)
            figures.append(Figure(
                f"collector.{name}.bundle_fs_floor_us", round(floor_us), "us/bundle", baseline=round(each_us),
                note=f"system calls alone per bundle on {file_systems[name]} (dirs, files, the capture replaced "
                "atomically; sealed 64 at a time, two syncfs a group; baseline: each bundle sealed alone with 4 "
                "fsyncs, the seal before issue 21); caps spans/s/core at " + ", ".join(
                    f"{int(size) * 1e6 / floor_us:,.0f} for {size}-span runs" for size in args.spans_per_trace.split(",")),
            ))
        for per_trace in (int(size) for size in args.spans_per_trace.split(",")):
            no_catalog = [f"{name}_no_catalog" for name in parents] if args.catalog_off else []
            rounds: dict[str, list[dict]] = {mode: [] for mode in ("receive", *parents, *no_catalog)}
            for _ in range(args.rounds):  # alternating, so that a slow minute spreads over every mode
                sizes = (args.exporters, args.spans, args.batch, per_trace)
                rounds["receive"].append(measure("receive", *sizes, parents["disk"]))
                for name, parent in parents.items():
                    for suffix, code in (("", None), ("_against", against)) if against else (("", None),):
                        rounds.setdefault(name + suffix, []).append(measure("write", *sizes, parent, code))
                        if args.catalog_off:
                            rounds.setdefault(f"{name}_no_catalog{suffix}", []).append(
                                measure("write-no-catalog", *sizes, parent, code))
                        if args.span_records and not suffix:
                            rounds.setdefault(f"{name}_span_records", []).append(
                                measure("write-span-records", *sizes, parent))
            receive = _median_round(rounds["receive"])
            workload = {"spans_per_trace": per_trace, "receiver_only": receive, "rounds": rounds}
            prefix = f"collector.{per_trace}_spans_per_run"
            figures.append(Figure(f"{prefix}.receive_spans_per_core_s", receive["spans_per_core_s"], "spans/s",
                                  note="decode + count only, the baseline; " + _spread(rounds["receive"])))
            for name in [*parents, *(f"{name}_against" for name in parents if against)]:
                write = _median_round(rounds[name])
                workload[f"writing_on_{name}"] = write
                figures += [
                    Figure(f"{prefix}.{name}.write_spans_per_core_s", write["spans_per_core_s"], "spans/s",
                           baseline=receive["spans_per_core_s"],
                           target=f">= {TARGETS[per_trace, name]:,}" if (per_trace, name) in TARGETS else None,
                           ok=write["spans_per_core_s"] >= TARGETS[per_trace, name] if (per_trace, name) in TARGETS else None,
                           note=f"decode, normalize, redact, write, seal; bundles on {file_systems[name.removesuffix('_against')]}; "
                           f"kernel time {write['sys_cpu_s'] / write['collector_cpu_s']:.0%} of it; "
                           + _spread(rounds[name])),
                    Figure(f"{prefix}.{name}.write_cpu_ms_per_1k_spans", write["cpu_ms_per_1k_spans"], "ms",
                           baseline=receive["cpu_ms_per_1k_spans"]),
                    Figure(f"{prefix}.{name}.write_spans_per_s_wall", write["spans_per_s_wall"], "spans/s",
                           baseline=receive["spans_per_s_wall"], note=f"{args.exporters} exporters on the same machine"),
                ]
                if args.catalog_off:
                    off_name = name.replace("_against", "_no_catalog_against") if name.endswith("_against") \
                        else f"{name}_no_catalog"
                    off = _median_round(rounds[off_name])
                    workload[f"writing_on_{off_name}"] = off
                    hooks = sorted(measured["hooks_cpu_us_per_run"] or 0.0 for measured in rounds[name])
                    figures.append(Figure(
                        f"{prefix}.{name}.catalog_hooks_cpu_us_per_run", hooks[len(hooks) // 2], "us/run",
                        baseline=round(off["cpu_ms_per_1k_spans"] * per_trace, 1),
                        note="CPU of the writer's hooks thread (the catalog's rows) per run, median of the rounds; "
                        "baseline: the collector's whole CPU per run with the catalog off"))
                    figures.append(Figure(
                        f"{prefix}.{name}.write_spans_per_core_s_catalog_on_vs_off", write["spans_per_core_s"],
                        "spans/s", baseline=off["spans_per_core_s"],
                        note="with the run catalog (the default) against OTEL_SESSION_CATALOG=off, alternating rounds; "
                        "off: " + _spread(rounds[off_name])))
                if args.span_records and not name.endswith("_against"):
                    figures += _span_records_figures(prefix, name, write, rounds, workload)
            workloads.append(workload)
        figures += _per_bundle_figures(workloads, parents, floors)
    finally:
        for parent in parents.values():
            shutil.rmtree(parent, ignore_errors=True)
        if against:
            shutil.rmtree(against, ignore_errors=True)
    details = {"exporters": args.exporters, "batch": args.batch, "load_average_at_end": os.getloadavg(),
               "file_systems": file_systems, "bundle_fs_floor_us": floors, "workloads": workloads}
    return write_results("collector", figures, details)


if __name__ == "__main__":
    main(sys.argv[1:])
