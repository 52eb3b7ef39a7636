"""Benchmarks: each module measures against a baseline from the same run and writes its figures.

Every benchmark module has ``main() -> dict`` and runs alone as ``python -m bench.<name>``; it writes
``bench/results-<name>.json`` with a list of figures (name, value, unit, baseline, target, ok) and
prints a short summary. ``python -m bench`` (``make bench``) runs them all and writes
``bench/results.json`` and the table in ``docs/performance.md``.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent


@dataclass
class Figure:
    name: str
    value: float
    unit: str
    baseline: float | None = None
    target: str | None = None
    ok: bool | None = None
    note: str | None = None

    @property
    def ratio(self) -> float | None:
        return self.value / self.baseline if self.baseline else None


def _machine() -> dict:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": __import__("os").cpu_count(),
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def fmt(value: float) -> str:
    """A figure as people read it: thousands separators for large values, 3 digits for small."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def summary_line(figure: Figure) -> str:
    parts = [f"{figure.name}: {fmt(figure.value)} {figure.unit}"]
    if figure.ratio is not None:
        parts.append(f"(baseline {fmt(figure.baseline)}, ratio {figure.ratio:.2f})")
    if figure.target:
        parts.append(f"target {figure.target}: {'met' if figure.ok else 'MISSED'}")
    return " ".join(parts)


def write_results(name: str, figures: list[Figure], details: dict) -> dict:
    """Write ``bench/results-<name>.json`` and print one line per figure."""
    result = {
        "benchmark": name,
        "machine": _machine(),
        "figures": [asdict(f) | {"ratio": f.ratio} for f in figures],
        "details": details,
    }
    (BENCH_DIR / f"results-{name}.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    for figure in figures:
        print(summary_line(figure))
    return result
