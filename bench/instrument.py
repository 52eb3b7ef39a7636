"""App-thread cost of the instrumentation API against a bare ``span.add_event`` (issue 3).

``python -m bench.instrument [--ops N] [--repeats R]`` measures, in one process on one machine:

- ``bare_add_event_delta``: ``span.add_event("otel_session.delta", {index, kind, text})`` per chunk;
- ``message_delta``: ``message.delta(chunk)`` through the full in-process path (redaction, span
  event, journal record enqueued to the running bundle writer);
- ``bare_add_event_slot`` and ``slot_write``: the same for slot writes (a hashed value).

Each figure is the best of R interleaved repeats of N operations, in µs per operation, as the app
thread's own CPU time (``time.thread_time``: the cost the app thread pays; the writer thread's work
runs beside it) and as wall time (which also counts waits for the GIL while the writer thread
appends; noisy on a loaded machine). The target is an app-thread cost of at most 1.5× the bare
``add_event``. Every recorded bundle is verified complete, so a run that
hit a writer bound (and stopped recording) cannot pass as fast. Writes ``bench/results-instrument.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider

import otel_session
from otel_session.read import find_bundles, read_bundle

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


def _best_interleaved(measures: dict, repeats: int, ops: int) -> dict[str, dict[str, float]]:
    """Best µs/op of each measure (wall and thread CPU); measures take turns so load drift hits all."""
    best = {name: {"wall": float("inf"), "cpu": float("inf")} for name in measures}
    for _ in range(repeats):
        for name, measure in measures.items():
            clock = measure(ops)
            best[name]["wall"] = min(best[name]["wall"], clock.wall)
            best[name]["cpu"] = min(best[name]["cpu"], clock.cpu)
    return {name: {kind: seconds / ops * 1e6 for kind, seconds in pair.items()} for name, pair in best.items()}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.instrument", description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=2_000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("results-instrument.json"))
    args = parser.parse_args(argv)
    ops, repeats = args.ops, args.repeats

    root = Path(tempfile.mkdtemp(prefix="bench-instrument-"))
    provider = TracerProvider()
    tracer = provider.get_tracer("bench")
    recorder = otel_session.configure(root, otel_session.RedactionPolicy(), provider)
    chunks = [CHUNKS[number % len(CHUNKS)] for number in range(ops)]
    dates = [f"2026-12-{number % 28 + 1:02d}" for number in range(ops)]

    def bare_delta(n: int) -> float:
        span = tracer.start_span("message assistant")
        with _Clock() as clock:
            for chunk in chunks[:n]:
                span.add_event(
                    "otel_session.delta",
                    {"otel_session.delta.index": 0, "otel_session.delta.kind": "text", "otel_session.delta.text": chunk},
                )
        span.end()
        return clock

    def api_delta(n: int) -> float:
        with otel_session.session("bench"), otel_session.run(agent="bench"):
            with otel_session.message("assistant") as m:
                delta = m.delta
                with _Clock() as clock:
                    for chunk in chunks[:n]:
                        delta(chunk)
        recorder.writer.force_flush()
        return clock

    def bare_slot(n: int) -> float:
        span = tracer.start_span("turn 0")
        with _Clock() as clock:
            for date in dates[:n]:
                span.add_event(
                    "otel_session.slot_write",
                    {
                        "otel_session.slot.name": "date",
                        "otel_session.slot.value": date,
                        "otel_session.slot.previous": "null",
                        "otel_session.slot.source": "nlu",
                    },
                )
        span.end()
        return clock

    def api_slot(n: int) -> float:
        slots: dict = {}
        with otel_session.session("bench"), otel_session.run(agent="bench"):
            with otel_session.turn(0, slots=slots):
                slot_write = otel_session.slot_write
                with _Clock() as clock:
                    for date in dates[:n]:
                        slot_write("date", date, source="nlu")
        recorder.writer.force_flush()
        return clock

    figures = _best_interleaved(
        {
            "bare_add_event_delta": bare_delta,
            "message_delta": api_delta,
            "bare_add_event_slot": bare_slot,
            "slot_write": api_slot,
        },
        repeats,
        ops,
    )
    recorder.shutdown()
    bundles = [read_bundle(path) for path in find_bundles([root])]
    incomplete = [str(bundle.path) for bundle in bundles if bundle.status.value != "complete"]

    def ratio(api: str, bare: str, kind: str) -> float:
        return round(figures[api][kind] / figures[bare][kind], 3)

    result = {
        "benchmark": "instrument",
        "python": platform.python_version(),
        "load_average_1m": os.getloadavg()[0],
        "ops_per_repeat": ops,
        "repeats": repeats,
        "us_per_op": {name: {kind: round(value, 3) for kind, value in pair.items()} for name, pair in figures.items()},
        "delta_ratio_cpu": ratio("message_delta", "bare_add_event_delta", "cpu"),
        "slot_write_ratio_cpu": ratio("slot_write", "bare_add_event_slot", "cpu"),
        "delta_ratio_wall": ratio("message_delta", "bare_add_event_delta", "wall"),
        "slot_write_ratio_wall": ratio("slot_write", "bare_add_event_slot", "wall"),
        "target_ratio": TARGET_RATIO,
        "bundles": len(bundles),
        "bundles_incomplete": incomplete,
    }
    result["meets_target"] = (
        result["delta_ratio_cpu"] <= TARGET_RATIO and result["slot_write_ratio_cpu"] <= TARGET_RATIO and not incomplete
    )
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    us = result["us_per_op"]
    print(
        f"app-thread CPU µs/op: delta {us['message_delta']['cpu']:.2f} vs bare add_event "
        f"{us['bare_add_event_delta']['cpu']:.2f} ({result['delta_ratio_cpu']}×), slot_write "
        f"{us['slot_write']['cpu']:.2f} vs {us['bare_add_event_slot']['cpu']:.2f} ({result['slot_write_ratio_cpu']}×); "
        f"wall ratios {result['delta_ratio_wall']}× / {result['slot_write_ratio_wall']}×; target ≤ {TARGET_RATIO}×; "
        f"{len(bundles)} bundles, {len(incomplete)} incomplete; load {result['load_average_1m']:.1f} → "
        f"{'OK' if result['meets_target'] else 'MISSED'}"
    )
    return result


if __name__ == "__main__":
    main()
