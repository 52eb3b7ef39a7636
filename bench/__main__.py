"""Run every benchmark, then write ``bench/results.json`` and the table in ``docs/performance.md``.

Usage: ``python -m bench [NAME …]`` (default: all of ``BENCHMARKS``; naming some re-runs those and
keeps the other benchmarks' last results in the table).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys

from bench import BENCH_DIR, Figure, fmt, summary_line

BENCHMARKS = ("writer", "instrument", "startup", "replay", "replay_reads", "collector", "collector_instructions", "redact",
              "viewer", "load", "peers", "upload")
PERFORMANCE_DOC = BENCH_DIR.parent / "docs" / "performance.md"
TABLE_START, TABLE_END = "<!-- bench:start -->", "<!-- bench:end -->"


def _table(results: list[dict]) -> str:
    rows = ["| benchmark | figure | value | baseline (same run) | ratio | target | met |", "|---|---|---|---|---|---|---|"]
    for result in results:
        for raw in result["figures"]:
            figure = Figure(**{k: v for k, v in raw.items() if k != "ratio"})
            rows.append(
                "| {} | {} | {} {} | {} | {} | {} | {} |".format(
                    result["benchmark"],
                    figure.name,
                    fmt(figure.value),
                    figure.unit,
                    "" if figure.baseline is None else fmt(figure.baseline),
                    "" if figure.ratio is None else f"{figure.ratio:.2f}",
                    figure.target or "",
                    "" if figure.ok is None else ("yes" if figure.ok else "**no**"),
                )
            )
    machine = results[0]["machine"] if results else {}
    rows.append("")
    rows.append(f"Measured {machine.get('at', '?')} on {machine.get('cpus', '?')} CPUs, Python {machine.get('python', '?')}.")
    loads = [
        f"{r['benchmark']} {r['load_average'][0]:.1f}→{r['load_average'][1]:.1f} ({r['machine'].get('at', '?')})"
        for r in results if r.get("load_average")
    ]
    if loads:
        rows.append(f"1-minute load average before→after each benchmark (the machine is shared): {'; '.join(loads)}.")
    return "\n".join(rows)


def main(names: list[str]) -> int:
    results_path = BENCH_DIR / "results.json"
    # Naming benchmarks re-runs those and keeps the others' last results.
    previous = {r["benchmark"]: r for r in json.loads(results_path.read_text())} if names and results_path.exists() else {}
    sys.argv[1:] = []  # benchmarks that take options parse sys.argv: run each with its defaults
    for name in names or BENCHMARKS:
        print(f"== bench.{name}", flush=True)
        module = importlib.import_module(f"bench.{name}")
        load_before = os.getloadavg()[0]
        result = module.main()
        result["load_average"] = [load_before, os.getloadavg()[0]]
        previous[name] = result
    results = [previous[name] for name in BENCHMARKS if name in previous]
    results_path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    if PERFORMANCE_DOC.exists():
        text = PERFORMANCE_DOC.read_text()
        pattern = re.compile(re.escape(TABLE_START) + ".*?" + re.escape(TABLE_END), re.S)
        PERFORMANCE_DOC.write_text(pattern.sub(TABLE_START + "\n" + _table(results) + "\n" + TABLE_END, text))
    missed = [f for r in results for f in r["figures"] if f.get("ok") is False]
    print(f"\n{sum(len(r['figures']) for r in results)} figures, {len(missed)} targets missed")
    for figure in missed:
        print("  missed:", summary_line(Figure(**{k: v for k, v in figure.items() if k != "ratio"})))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
