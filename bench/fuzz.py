"""The fuzz target: every hostile-input property with 10,000+ generated cases each (issue 8).

    python -m bench.fuzz [--examples 10000] [--jobs 2]

Runs the hypothesis properties of the journal reader and tail reader
(``tests/record/test_fuzz_reader.py``) and of OTLP protobuf/JSON decoding and the normalizer
(``tests/hostile/test_fuzz_otlp.py``) with ``OTEL_SESSION_FUZZ_EXAMPLES`` set, one pytest process
per property (``--jobs`` at a time), and reports for each the generated cases that ran, failures and
seconds. ``make test`` runs the same properties with a small sample. Writes
``bench/results-fuzz.json``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench import BENCH_DIR, Figure, write_results

REPOSITORY = BENCH_DIR.parent
PROPERTY_FILES = ("tests/record/test_fuzz_reader.py", "tests/hostile/test_fuzz_otlp.py")
TARGET_CASES = 10_000
_PASSING = re.compile(r"(\d+) passing, (\d+) failing,? (?:and )?(\d+) invalid")


def properties() -> list[str]:
    """Node ids of every property in ``PROPERTY_FILES``."""
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *PROPERTY_FILES],
        capture_output=True, text=True, cwd=REPOSITORY, check=True,
    )
    return [line for line in listed.stdout.splitlines() if "::" in line]


def run_property(node_id: str, examples: int) -> dict:
    """Run one property with ``examples`` cases; count what hypothesis actually ran."""
    started = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", node_id, "-q", "-p", "no:cacheprovider", "--hypothesis-show-statistics"],
        capture_output=True, text=True, cwd=REPOSITORY, check=False,
        env={**os.environ, "OTEL_SESSION_FUZZ_EXAMPLES": str(examples)},
    )
    phases = [tuple(map(int, match)) for match in _PASSING.findall(completed.stdout)]
    return {
        "property": node_id,
        "passed": completed.returncode == 0,
        "cases": sum(passing + failing for passing, failing, _ in phases),
        "invalid": sum(invalid for _, _, invalid in phases),
        "seconds": round(time.perf_counter() - started, 1),
        "output_tail": None if completed.returncode == 0 else completed.stdout[-3000:],
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=TARGET_CASES, help="cases per property")
    parser.add_argument("--jobs", type=int, default=2, help="properties run at once")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda node: run_property(node, args.examples), properties()))
    figures = [
        Figure(
            f"fuzz.{result['property'].split('::')[-1]}", result["cases"], "cases",
            target=f">= {TARGET_CASES:,}, no failure", ok=result["passed"] and result["cases"] >= TARGET_CASES,
            note=f"{result['seconds']} s ({Path(result['property'].split('::')[0]).name})",
        )
        for result in results
    ]
    details = {"examples": args.examples, "properties": results, "wall_s": time.perf_counter() - started,
               "load_average_after": os.getloadavg()}
    return write_results("fuzz", figures, details)


if __name__ == "__main__":
    main(sys.argv[1:])
