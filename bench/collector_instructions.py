"""Collector work per span in instructions, stage by stage: a figure machine noise cannot move.

    python -m bench.collector_instructions [--spans-per-trace 64] [--requests 2,6] [--baseline FILE]

CPU time on a shared 2-vCPU VM drifts by ±25 % from one minute to the next (docs/performance.md),
more than most changes to the per-span path. Instructions do not drift: valgrind's ``callgrind``
counts them, the same for the same code and input. The pre-encoded export requests of
``bench.collector`` (its agent-loop spans) go through a prefix of the collector's pipeline on one
thread, under ``valgrind --tool=callgrind``, once with N1 requests and once with N2; the difference
÷ the spans between them is the prefix's instructions a span, start-up and imports excluded:

* ``parse``: the protobuf parse and id checks (``parse_protobuf``);
* ``decode``: + ``spans_of`` (protobuf → ``SpanData``);
* ``normalize``: + ``normalize_span``;
* ``redact``: + ``Redactor.redact_events``;
* ``write``: the whole in-process path instead (``Receiver.export`` into a ``BundleWriter`` on
  tmpfs, routing, ordering, stamping, encoding, appending and sealing included).

Single-threaded: the gRPC transport and the hand-offs between threads are not in it
(``bench.collector`` measures those, in CPU time). The cyclic garbage collector is off while the
requests replay (``gc.disable()`` after a collection and ``gc.freeze()``): a collection runs when
allocations cross a threshold, so whether one more falls between the N1 and the N2 run moved the
figure by up to 5 % from one code change to the next; with it off, the figure is the code's alone
(reference counting still frees everything; cycles are rare on this path). Needs valgrind (``apt-get install valgrind``);
without it, no figures. Writes ``bench/results-collector_instructions.json``.

Each stage is reported before and after: ``--baseline FILE`` (default
``bench/baseline-collector_instructions.json``, the figures of the collector before its one-pass
decode, issue 21) gives every figure its "before" value, printed with the ratio and kept in the
JSON (``baseline``, ``ratio``). ``--save-baseline`` writes this run's figures as that file.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import BENCH_DIR, Figure, write_results

BASELINE = BENCH_DIR / "baseline-collector_instructions.json"
STAGES = ("parse", "decode", "normalize", "redact", "write")
SPANS_PER_REQUEST = 512
_COLLECTED = re.compile(r"Collected : (\d+)")


def encode_requests(path: str, count: int, per_trace: int) -> None:
    """``count`` export requests of ``bench.collector``'s agent-loop spans, length-prefixed."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    from bench.collector import _batch

    resource = Resource.create({"service.name": "bench-agent"})
    scope = InstrumentationScope("bench")
    with open(path, "wb") as out:
        for number in range(count):
            body = encode_spans(_batch(number % 4, number, SPANS_PER_REQUEST, per_trace, resource, scope))
            data = body.SerializeToString()
            out.write(struct.pack("<I", len(data)) + data)


def replay(path: str, stage: str, count: int) -> int:
    """The child: the first ``count`` requests of ``path`` through ``stage``'s prefix. Returns the
    spans that went through it (bundled, for ``write``)."""
    from otel_session.collector.otlp import parse_protobuf, spans_of
    from otel_session.normalize import normalize_span
    from otel_session.redact import RedactionPolicy, Redactor

    with open(path, "rb") as handle:
        data = handle.read()
    bodies, offset = [], 0
    while offset < len(data) and len(bodies) < count:
        (size,) = struct.unpack_from("<I", data, offset)
        bodies.append(data[offset + 4 : offset + 4 + size])
        offset += 4 + size
    redactor = Redactor(RedactionPolicy(), key=b"bench")
    gc.collect()
    gc.freeze()
    gc.disable()
    if stage == "write":
        return _replay_into_a_collector(bodies, redactor)
    through = 0
    for body in bodies:
        request = parse_protobuf(body)
        if stage == "parse":
            through += sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans)
            continue
        spans = list(spans_of(request))
        if stage != "decode":
            events = [event for span in spans for event in normalize_span(span)]
            if stage == "redact":
                redactor.redact_events(events)
        through += len(spans)
    return through


def _replay_into_a_collector(bodies: list[bytes], redactor) -> int:
    from otel_session.collector.otlp import parse_protobuf
    from otel_session.collector.server import Collector
    from otel_session.collector.sink import Overloaded

    root = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    collector = Collector(root, grpc_address=None, http_address=None, seal_after_s=0.5, redactor=redactor)
    collector.start()
    try:
        for body in bodies:
            while True:
                try:
                    collector.receiver.export(parse_protobuf(body))
                    break
                except Overloaded:  # the writer is behind: as an exporter would, retry
                    time.sleep(0.01)
    finally:
        collector.stop()
        shutil.rmtree(root, ignore_errors=True)
    return collector.counters.snapshot()["bundled"]


def instructions(path: str, stage: str, count: int) -> int:
    """Instructions the child executes replaying ``count`` requests through ``stage``."""
    completed = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         sys.executable, "-m", "bench.collector_instructions", "--replay", path, "--stage", stage, "--count", str(count)],
        capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},  # str hashes (dict and set layouts) alike in every run
    )
    found = _COLLECTED.search(completed.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no instruction count: {completed.stderr[-500:]}")
    return int(found.group(1))


def read_baseline(path: Path) -> dict:
    """``{"figures": {name: instructions/span}, ...}`` of a baseline file; empty when there is none."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}


def save_baseline(path: Path, result: dict, measured_on: str) -> None:
    figures = {figure["name"]: figure["value"] for figure in result["figures"]}
    document = {"measured_on": measured_on, "at": result["machine"]["at"],
                "spans_per_trace": result["details"]["spans_per_trace"], "figures": figures}
    path.write_text(json.dumps(document, indent=2) + "\n")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.collector_instructions", description=__doc__.splitlines()[0])
    parser.add_argument("--spans-per-trace", type=int, default=64, help="run (trace) size of the requests")
    parser.add_argument("--requests", default="2,6", help="N1,N2: requests replayed in the two runs of a stage")
    parser.add_argument("--baseline", type=Path, default=BASELINE, help="the 'before' figures (default: %(default)s)")
    parser.add_argument("--save-baseline", metavar="DESCRIPTION",
                        help="write this run's figures as the --baseline file, described as DESCRIPTION")
    parser.add_argument("--replay", help=argparse.SUPPRESS)
    parser.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv or [])
    if args.replay:
        replay(args.replay, args.stage, args.count)
        return {}
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind): no instruction counts")
        return write_results("collector_instructions", [], {"skipped": "valgrind not installed"})
    first, second = (int(number) for number in args.requests.split(","))
    spans = (second - first) * SPANS_PER_REQUEST
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "requests.bin")
        encode_requests(path, second, args.spans_per_trace)
        per_span = {
            stage: (instructions(path, stage, second) - instructions(path, stage, first)) / spans for stage in STAGES
        }
    baseline = read_baseline(args.baseline)
    before = baseline.get("figures", {}) if baseline.get("spans_per_trace") == args.spans_per_trace else {}
    figures = []
    previous = 0.0
    for stage in STAGES[:-1]:
        name = f"collector_instructions.{stage}"
        figures.append(Figure(name, round(per_span[stage] - previous), "instructions/span", baseline=before.get(name),
                              note=f"this stage alone ({stage} prefix {per_span[stage]:,.0f} minus the one before)"))
        previous = per_span[stage]
    figures.append(Figure(
        "collector_instructions.route_stamp_write_seal", round(per_span["write"] - per_span["redact"]), "instructions/span",
        baseline=before.get("collector_instructions.route_stamp_write_seal"),
        note="the whole in-process path minus decode, normalize and redact: the sink, the records, the writer",
    ))
    figures.append(Figure(
        "collector_instructions.total", round(per_span["write"]), "instructions/span",
        baseline=before.get("collector_instructions.total"),
        note=f"{args.spans_per_trace}-span runs, one thread, no gRPC; at this machine's rate divide by "
        "about 4,000 for µs",
    ))
    details = {"spans_per_trace": args.spans_per_trace, "requests": [first, second], "prefix_per_span": per_span,
               "baseline": {"file": str(args.baseline), "measured_on": baseline.get("measured_on"),
                            "at": baseline.get("at")} if before else None}
    result = write_results("collector_instructions", figures, details)
    if args.save_baseline:
        save_baseline(args.baseline, result, args.save_baseline)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
