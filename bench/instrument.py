"""App-thread cost of the instrumentation API against a bare ``span.add_event`` (issue 3).

``python -m bench.instrument [--ops N] [--repeats R]`` measures, in one process on one machine:

- ``bare_add_event_delta``: ``span.add_event("otel_session.delta", {index, kind, text})`` per chunk;
- ``message_delta``: ``message.delta(chunk)`` through the full in-process path (redaction, span
  event, journal record enqueued to the running bundle writer);
- ``bare_add_event_slot`` and ``slot_write``: the same for slot writes (a hashed value);
- the redactor's share of each (issue 15): the same API rounds again, recording under a policy that
  redacts nothing (``text=keep``, ``slot_values=keep``), their paired ratio beside the default's.

``--instructions`` counts instead, under valgrind's callgrind, the instructions one delta and one
slot write cost, the app's and the writer thread's together (a figure machine noise cannot move,
as ``bench.collector_instructions``): a child records N1, then N2 operations with the cyclic garbage
collector off; the difference ÷ (N2 − N1), start-up and imports excluded.

Bare and API rounds of N operations alternate R times (so load drift hits both alike); each figure is
the median µs per operation, and the target applies to the median of the per-round ratios. Time is
the app thread's own CPU time (``time.thread_time``: the cost the app thread pays; the writer thread's work
runs beside it) and as wall time (which also counts waits for the GIL while the writer thread
appends; noisy on a loaded machine). The target is an app-thread cost of at most 1.5× the bare
``add_event``. Every recorded bundle is verified complete, so a run that
hit a writer bound (and stopped recording) cannot pass as fast. Writes ``bench/results-instrument.json``
(the ``bench`` harness format) and prints one line per figure.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider

import otel_session
from bench import Figure, write_results
from otel_session.bundle.read import find_bundles, read_bundle

TARGET_RATIO = 1.5
CHUNKS = ["Sure", ", I can", " book a", " table for", " two on", " Friday", " evening", "."]


class _Clock:
    """Wall time and the app thread's own CPU time (what the app thread spends, not GIL waits)."""

    def __enter__(self) -> _Clock:
        self._wall, self._cpu = time.perf_counter(), time.thread_time()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.wall = time.perf_counter() - self._wall
        self.cpu = time.thread_time() - self._cpu


def _median(values: list[float]) -> float:
    return statistics.median(values)


def _paired(bare, api, rounds: int, ops: int) -> dict[str, float]:
    """Alternate bare and API rounds of ``ops`` operations; medians of µs/op and of per-round ratios.

    Pairing adjacent rounds keeps the ratio meaningful when the machine's load drifts.
    """
    samples: dict[str, list[float]] = {"bare_cpu": [], "api_cpu": [], "bare_wall": [], "api_wall": [], "ratio_cpu": [],
                                       "ratio_wall": []}
    for _ in range(rounds):
        bare_clock, api_clock = bare(ops), api(ops)
        samples["bare_cpu"].append(bare_clock.cpu / ops * 1e6)
        samples["api_cpu"].append(api_clock.cpu / ops * 1e6)
        samples["bare_wall"].append(bare_clock.wall / ops * 1e6)
        samples["api_wall"].append(api_clock.wall / ops * 1e6)
        if bare_clock.cpu > 0:
            samples["ratio_cpu"].append(api_clock.cpu / bare_clock.cpu)
        samples["ratio_wall"].append(api_clock.wall / bare_clock.wall)
    return {name: _median(values) for name, values in samples.items()}


def _figure(name: str, paired: dict[str, float], clock: str, **fields: object) -> Figure:
    """A figure of the API's µs per operation beside the bare ``add_event``'s, on ``clock`` (cpu, wall)."""
    return Figure(name, round(paired[f"api_{clock}"], 3), "us/op", baseline=round(paired[f"bare_{clock}"], 3),
                  **fields)  # type: ignore[arg-type]


def _measure(policy: otel_session.RedactionPolicy, ops: int, rounds: int) -> dict:
    """Paired figures of ``message.delta()`` and ``slot_write()`` recording under ``policy``, and
    what the bundles hold (every one complete, every record there)."""
    root = Path(tempfile.mkdtemp(prefix="bench-instrument-"))
    provider = TracerProvider()
    tracer = provider.get_tracer("bench")
    recorder = otel_session.configure(root, policy, provider)
    chunks = [CHUNKS[number % len(CHUNKS)] for number in range(ops)]
    dates = [f"2026-12-{number % 28 + 1:02d}" for number in range(ops)]
    bare_message = tracer.start_span("message assistant")
    bare_turn = tracer.start_span("turn 0")

    def bare_delta(n: int) -> _Clock:
        add_event = bare_message.add_event
        with _Clock() as clock:
            for chunk in chunks[:n]:
                add_event(
                    "otel_session.delta",
                    {"otel_session.delta.index": 0, "otel_session.delta.kind": "text", "otel_session.delta.text": chunk},
                )
        return clock

    def bare_slot(n: int) -> _Clock:
        add_event = bare_turn.add_event
        with _Clock() as clock:
            for date in dates[:n]:
                add_event(
                    "otel_session.slot_write",
                    {
                        "otel_session.slot.name": "date",
                        "otel_session.slot.value": date,
                        "otel_session.slot.previous": "null",
                        "otel_session.slot.source": "nlu",
                    },
                )
        return clock

    slots: dict = {}
    with otel_session.session("bench"), otel_session.run(agent="bench"):
        with otel_session.message("assistant") as message:
            delta = message.delta

            def api_delta(n: int) -> _Clock:
                with _Clock() as clock:
                    for chunk in chunks[:n]:
                        delta(chunk)
                return clock

            delta_figures = _paired(bare_delta, api_delta, rounds, ops)
        with otel_session.turn(0, slots=slots):
            slot_write = otel_session.slot_write

            def api_slot(n: int) -> _Clock:
                with _Clock() as clock:
                    for date in dates[:n]:
                        slot_write("date", date, source="nlu")
                return clock

            slot_figures = _paired(bare_slot, api_slot, rounds, ops)
    bare_message.end()
    bare_turn.end()
    recorder.shutdown()
    bundles = [read_bundle(path) for path in find_bundles([root])]
    shutil.rmtree(root)
    return {
        "delta": delta_figures,
        "slot_write": slot_figures,
        "journal_events": sum(len(bundle.events) for bundle in bundles),
        "bundles_incomplete": [str(bundle.path) for bundle in bundles if bundle.status.value != "complete"],
    }


def main(ops: int = 500, rounds: int = 60) -> dict:
    redacted = _measure(otel_session.RedactionPolicy(), ops, rounds)
    kept = _measure(otel_session.RedactionPolicy(text="keep", slot_values="keep"), ops, rounds)
    expected_events = rounds * ops * 2
    complete = all(not run["bundles_incomplete"] and run["journal_events"] >= expected_events for run in (redacted, kept))

    target = f"<= {TARGET_RATIO}x bare add_event (app-thread CPU, median paired ratio)"
    figure_list = []
    for label, key in (("message.delta()", "delta"), ("slot_write()", "slot_write")):
        paired, unredacted = redacted[key], kept[key]
        figure_list += [
            _figure(f"{label} app-thread CPU", paired, "cpu", target=target,
                    ok=paired["ratio_cpu"] <= TARGET_RATIO and complete,
                    note=f"median paired ratio {paired['ratio_cpu']:.2f}; baseline: bare span.add_event, same attributes"),
            _figure(f"{label} wall", paired, "wall",
                    note=f"median paired ratio {paired['ratio_wall']:.2f}; wall also counts GIL waits while the writer "
                    "thread appends (noisy under load)"),
            _figure(f"{label} app-thread CPU, redacting nothing", unredacted, "cpu",
                    note=f"median paired ratio {unredacted['ratio_cpu']:.2f} (redacting: {paired['ratio_cpu']:.2f}); "
                    f"the redactor's share: {paired['ratio_cpu'] - unredacted['ratio_cpu']:.2f}x bare add_event"),
        ]
    details = {"ops_per_round": ops, "rounds": rounds, "load_average_1m": os.getloadavg()[0], **redacted,
               "redacting_nothing": kept}
    return write_results("instrument", figure_list, details)


def replay(what: str, count: int) -> None:
    """The child of ``--instructions``: ``count`` deltas (or slot writes) recorded, then the writer drained."""
    root = tempfile.mkdtemp(prefix="bench-instrument-")
    recorder = otel_session.configure(root, otel_session.RedactionPolicy(), TracerProvider())
    chunks = [CHUNKS[number % len(CHUNKS)] for number in range(count)]
    dates = [f"2026-12-{number % 28 + 1:02d}" for number in range(count)]
    gc.collect()
    gc.freeze()
    gc.disable()
    with otel_session.session("bench"), otel_session.run(agent="bench"):
        if what == "delta":
            with otel_session.message("assistant") as message:
                for chunk in chunks:
                    message.delta(chunk)
        else:
            with otel_session.turn(0, slots={}):
                for date in dates:
                    otel_session.slot_write("date", date, source="nlu")
    recorder.shutdown()
    shutil.rmtree(root)


_COLLECTED = re.compile(r"Collected : (\d+)")


def instructions(first: int = 5_000, second: int = 25_000) -> dict:
    """Instructions a delta and a slot write cost (app and writer threads), from two callgrind runs each."""
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind): no instruction counts")
        return write_results("instrument_instructions", [], {"skipped": "valgrind not installed"})

    def count(what: str, operations: int) -> int:
        completed = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-m", "bench.instrument",
             "--replay", what, "--ops", str(operations)],
            capture_output=True, text=True, check=True,
        )
        found = _COLLECTED.search(completed.stderr)
        if found is None:
            raise RuntimeError(f"callgrind printed no instruction count: {completed.stderr[-500:]}")
        return int(found.group(1))

    per_op = {what: (count(what, second) - count(what, first)) / (second - first) for what in ("delta", "slot_write")}
    figures = [
        Figure(f"instrument_instructions.{what}", round(value), "instructions/op",
               note=f"{label}, the app's and the writer thread's together ({first:,} vs {second:,} operations)")
        for (what, value), label in zip(per_op.items(), ("message.delta() of a plain-word chunk", "slot_write() of a date"))
    ]
    return write_results("instrument_instructions", figures, {"operations": [first, second], "per_op": per_op})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.instrument", description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=500, help="operations per round")
    parser.add_argument("--rounds", type=int, default=60, help="paired rounds (bare, API) per figure")
    parser.add_argument("--instructions", action="store_true", help="count instructions under callgrind instead")
    parser.add_argument("--replay", choices=("delta", "slot_write"), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.replay:
        replay(arguments.replay, arguments.ops)
    elif arguments.instructions:
        instructions()
    else:
        main(arguments.ops, arguments.rounds)
