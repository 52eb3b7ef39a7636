"""Reading at scale (issue 30): the run catalog's lists at 1k, 10k and 100k runs.

    python -m bench.scale [--sizes 1000,10000,100000] [--rounds 3] [--cache DIR] [--catalog postgresql]

Roots are written through the real ``BundleWriter`` with the catalog hook (every run a small
booking-like run of 11 records, about 3 KB: a user and an assistant message with a model call and
tokens, a tool, a turn), 500 runs a writer pass, and kept under ``--cache``
(default ``$TMPDIR/otel-session-scale``) keyed by size, so a rerun measures at once. Each figure
is the median of ``--rounds``, each round a fresh process:

(a) the home page's first list in a fresh viewer: ``create_app`` then ``GET /api/runs?limit=50``
    through Flask's test client; the CPU of the request's thread, and the wall time from before
    ``create_app`` to the answer (the viewer's start, its catalog keeper running meanwhile);
(b) ``otel-session sessions --json`` (a fresh process: its CPU, interpreter and imports included)
    beside ``otel-session --version`` in the same round (the floor any command pays);
(c) ``GET /api/sessions``: the default answer's bytes;
(d) ``otel-session reindex``: runs indexed per second (wall), in a fresh process;
(e) the viewer's peak memory (max RSS) once the first list is answered and its catalog keeper has
    ended its first pass, and when that pass ended (it stats every bundle's files, in the background).

With ``--catalog postgresql`` (issue 32) a private PostgreSQL server is started (``tests/pg_server``),
each root is indexed into a database of its own (``otel-session reindex --catalog``), and (a) is
measured again from it beside the SQLite figure of the same run: the request's wall time (the
query runs in the server, outside the request thread's CPU) and its thread CPU; and a filtered list
(``problem=tool_error``: one run in 17, counted exactly) the same way.
Target: the PostgreSQL list ≤ 2× SQLite's wall time at the largest size.

Targets (issue 30): (a) ≤ 1.5× the 1k CPU and ≤ 50 ms at 100k, start to first page ≤ 1 s;
(b) ≤ 300 ms CPU and ≤ 1.5× the 1k figure at 100k; (c) ≤ 256 KiB; (d) ≥ 5,000 runs/s at 100k.
Writes ``bench/results-scale.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench import Figure, write_results

BASE_NS = 1_764_450_000_000_000_000
_PASS = 500
_TODAY = {
    "first_list_cpu_s": {1_000: 0.92, 10_000: 8.9, 50_000: 49.6},
    "sessions_cli_cpu_s": {1_000: 1.06, 10_000: 5.2, 50_000: 25.4},
    "api_sessions_bytes": {1_000: 0.55e6, 10_000: 5.6e6},
}
"""The issue's figures for the code before the catalog (median of 3, this machine)."""


def _write_run(writer, number: int) -> object:
    at_ns = BASE_NS + number * 10**9
    run = writer.open_run(session_id=f"call-{number // 3}", run_id=f"run-{uuid.UUID(int=number + 1)}",
                          agent=("booking", "support", "sales")[number % 3], service="scale", created_at_ns=at_ns)
    steps = iter(range(100))

    def put(kind: str, payload: dict, **ids) -> None:
        run.append(kind, payload, at_ns=at_ns + next(steps) * 10**7, **ids)

    put("run_started", {"kind": "live", "agent": "booking"})
    put("turn_started", {"state": "ask_date", "required_slots": ["date"]}, turn_index=0)
    put("message_started", {"role": "user"}, turn_index=0, message_id="u0")
    put("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": f"a table for {number % 7 + 1} on Friday please"}]},
        turn_index=0, message_id="u0")
    put("message_started", {"role": "assistant"}, turn_index=0, message_id="a0")
    put("tool_execution_started", {"name": "check_availability", "arguments": {"day": "friday"}}, turn_index=0, tool_call_id="t0")
    put("tool_execution_finished", {"status": "error" if number % 17 == 0 else "ok", "result": {"free": True}},
        turn_index=0, tool_call_id="t0")
    put("message_finished", {"settled": True, "model": "gpt-4o-mini", "usage": {"input_tokens": 400 + number % 50, "output_tokens": 20},
                             "content": [{"index": 0, "kind": "text", "text": "Friday is free. Shall I book it?"}]},
        turn_index=0, message_id="a0")
    put("turn_finished", {"state": "confirm", "required_slots": ["date"], "missing_required_slots": [],
                          "latency": {"user_to_agent_ms": 600 + number % 900}}, turn_index=0)
    put("guard_evaluated", {"name": "date_present", "passed": True}, turn_index=0)
    put("run_finished", {"status": "ok"})
    return run


def make_root(cache: Path, size: int) -> Path:
    """A root of ``size`` runs (and its catalog), written once and kept under ``cache``."""
    from otel_session.bundle.write import BundleWriter
    from otel_session.catalog import CatalogHook

    root = cache / f"runs-{size}"
    done = root / ".scale-complete"
    if done.exists():
        return root
    if root.exists():
        import shutil

        shutil.rmtree(root)
    started = time.perf_counter()
    root.mkdir(mode=0o700, parents=True)
    hook = CatalogHook(root)
    hook.wait_ready(60)
    writer = BundleWriter(root, hooks=hook)
    try:
        for first in range(0, size, _PASS):
            runs = [_write_run(writer, number) for number in range(first, min(size, first + _PASS))]
            for run in runs:
                run.close()
            assert writer.force_flush(600_000)
    finally:
        writer.shutdown()
    done.write_text(f"{size} runs written in {time.perf_counter() - started:.1f} s\n")
    return root


_VIEWER_PROBE = """
import json, sys, time
started = time.perf_counter()
from otel_session.viewer import create_app
app = create_app({"BUNDLE_DIR": sys.argv[1], "TESTING": True})
client = app.test_client()
thread_cpu = time.thread_time()
request_started = time.perf_counter()
answer = client.get(sys.argv[2])
request_wall = time.perf_counter() - request_started
thread_cpu = time.thread_time() - thread_cpu
wall = time.perf_counter() - started
assert answer.status_code == 200, answer.data[:300]
keeper = app.extensions["otel_session_listing"].keeper
keeper.first_pass.wait(600)
import resource
print(json.dumps({"cpu_s": thread_cpu, "request_wall_s": request_wall, "start_to_answer_s": wall, "bytes": len(answer.data),
                  "runs": len(answer.get_json().get("runs") or answer.get_json().get("sessions")),
                  "first_pass_s": time.perf_counter() - started, "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
app.extensions["otel_session_listing"].close()
"""


def _viewer(root: Path, url: str, env: dict[str, str] | None = None) -> dict:
    out = subprocess.run([sys.executable, "-c", _VIEWER_PROBE, str(root), url], capture_output=True, text=True, check=True,
                         env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _child_cpu(args: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of a fresh ``otel-session`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "otel_session.cli", *args], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def measure(root: Path, size: int, rounds: int) -> dict:
    reindex_wall = _child_cpu(["reindex", "--dir", str(root)])[1]  # first: a cached root's catalog may be older
    first_list = [_viewer(root, "/api/runs?limit=50") for _ in range(rounds)]
    sessions_page = _viewer(root, "/api/sessions")
    floor = [_child_cpu(["--version"])[0] for _ in range(rounds)]
    cli = [_child_cpu(["sessions", "--dir", str(root), "--json"])[0] for _ in range(rounds)]
    return {
        "first_list_cpu_s": statistics.median(probe["cpu_s"] for probe in first_list),
        "start_to_first_list_s": statistics.median(probe["start_to_answer_s"] for probe in first_list),
        "keeper_first_pass_s": statistics.median(probe["first_pass_s"] for probe in first_list),
        "viewer_max_rss_mib": max(probe["max_rss_mib"] for probe in first_list),
        "sessions_cli_cpu_s": statistics.median(cli),
        "cli_floor_cpu_s": statistics.median(floor),
        "api_sessions_bytes": sessions_page["bytes"],
        "api_runs_bytes": first_list[0]["bytes"],
        "reindex_runs_per_s": size / reindex_wall,
    }


_FILTERED = "/api/runs?limit=50&problem=tool_error"
"""A filtered list (the dashboard's link): one run in 17, under the cap (catalog.TOTAL_CAP), so counted exactly."""


def on_postgres(server, root: Path, size: int, rounds: int) -> dict:
    """(a) from a PostgreSQL catalog holding ``root``'s runs, beside SQLite's in the same run."""
    url = server.create_database(f"scale_{size}")
    env = {**os.environ, "OTEL_SESSION_CATALOG": url}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "otel_session.cli", "reindex", "--dir", str(root)], env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    reindex_wall = time.perf_counter() - started
    found = {}
    for prefix, url_path in (("", "/api/runs?limit=50"), ("filtered_", _FILTERED)):
        engines = {"sqlite": [_viewer(root, url_path) for _ in range(rounds)],
                   "postgresql": [_viewer(root, url_path, env) for _ in range(rounds)]}
        found.update({f"{prefix}{engine}_{name}": statistics.median(probe[name] for probe in probes)
                      for engine, probes in engines.items() for name in ("request_wall_s", "cpu_s")})
    return {**found, "postgresql_reindex_runs_per_s": size / reindex_wall}


def _postgres_figures(results: dict[int, dict], largest: int) -> list[Figure]:
    figures = []
    for size, figure in results.items():
        figures += [
            Figure(f"scale.{size}.postgresql_first_list_wall_ms", figure["postgresql_request_wall_s"] * 1000, "ms",
                   baseline=figure["sqlite_request_wall_s"] * 1000, note="baseline: the SQLite catalog, same run",
                   **({"target": "<= 2x", "ok": figure["postgresql_request_wall_s"] <= 2 * figure["sqlite_request_wall_s"]}
                      if size == largest else {})),
            Figure(f"scale.{size}.postgresql_first_list_cpu_ms", figure["postgresql_cpu_s"] * 1000, "ms",
                   baseline=figure["sqlite_cpu_s"] * 1000, note="the request thread's CPU (the query runs in the server)"),
            Figure(f"scale.{size}.postgresql_filtered_list_wall_ms", figure["filtered_postgresql_request_wall_s"] * 1000, "ms",
                   baseline=figure["filtered_sqlite_request_wall_s"] * 1000,
                   note=f"{_FILTERED}; baseline: the SQLite catalog, same run"),
            Figure(f"scale.{size}.postgresql_reindex_runs_per_s", figure["postgresql_reindex_runs_per_s"], "runs/s"),
        ]
    return figures


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="run counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "otel-session-scale"))
    parser.add_argument("--catalog", choices=["postgresql"], help="also list from a private PostgreSQL server")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    results, on_pg = {}, {}
    server = None
    if args.catalog == "postgresql":
        from tests.pg_server import PostgresServer

        server = PostgresServer.start()
    try:
        for size in sizes:
            root = make_root(cache, size)
            results[size] = measure(root, size, args.rounds)
            print(f"{size:>7} runs: {json.dumps(results[size])}", file=sys.stderr)
            if server is not None:
                on_pg[size] = on_postgres(server, root, size, args.rounds)
                print(f"{size:>7} runs, PostgreSQL: {json.dumps(on_pg[size])}", file=sys.stderr)
    finally:
        if server is not None:
            server.stop()
    smallest, largest = min(sizes), max(sizes)
    small, large = results[smallest], results[largest]
    figures = []
    for size in sizes:
        figure = results[size]
        today = {name: values.get(size) for name, values in _TODAY.items()}
        figures += [
            Figure(f"scale.{size}.first_list_cpu_ms", figure["first_list_cpu_s"] * 1000, "ms",
                   baseline=small["first_list_cpu_s"] * 1000, note=f"today {today['first_list_cpu_s']} s" if today["first_list_cpu_s"] else None),
            Figure(f"scale.{size}.start_to_first_list_s", figure["start_to_first_list_s"], "s", target="<= 1 s",
                   ok=figure["start_to_first_list_s"] <= 1.0),
            Figure(f"scale.{size}.sessions_cli_cpu_ms", figure["sessions_cli_cpu_s"] * 1000, "ms",
                   baseline=figure["cli_floor_cpu_s"] * 1000,
                   note=f"baseline: otel-session --version; today {today['sessions_cli_cpu_s']} s" if today["sessions_cli_cpu_s"] else "baseline: otel-session --version"),
            Figure(f"scale.{size}.api_sessions_kib", figure["api_sessions_bytes"] / 1024, "KiB", target="<= 256 KiB",
                   ok=figure["api_sessions_bytes"] <= 256 * 1024,
                   note=f"today {today['api_sessions_bytes'] / 1e6} MB" if today["api_sessions_bytes"] else None),
            Figure(f"scale.{size}.reindex_runs_per_s", figure["reindex_runs_per_s"], "runs/s"),
            Figure(f"scale.{size}.viewer_max_rss_mib", figure["viewer_max_rss_mib"], "MiB", target="<= 300 MiB",
                   ok=figure["viewer_max_rss_mib"] <= 300, note="after the first list and the keeper's first pass"),
            Figure(f"scale.{size}.keeper_first_pass_s", figure["keeper_first_pass_s"], "s",
                   note="start to the end of the background catch-up (stats every bundle's files)"),
        ]
    figures += [
        Figure(f"scale.first_list_cpu_{largest}_vs_{smallest}", large["first_list_cpu_s"] / small["first_list_cpu_s"], "x",
               target="<= 1.5x and <= 50 ms", ok=large["first_list_cpu_s"] <= 1.5 * small["first_list_cpu_s"] and large["first_list_cpu_s"] <= 0.05),
        Figure(f"scale.sessions_cli_cpu_{largest}_vs_{smallest}", large["sessions_cli_cpu_s"] / small["sessions_cli_cpu_s"], "x",
               target="<= 1.5x and <= 300 ms", ok=large["sessions_cli_cpu_s"] <= 1.5 * small["sessions_cli_cpu_s"] and large["sessions_cli_cpu_s"] <= 0.3),
        Figure(f"scale.reindex_runs_per_s_at_{largest}", large["reindex_runs_per_s"], "runs/s", target=">= 5,000",
               ok=large["reindex_runs_per_s"] >= 5000),
    ]
    figures += _postgres_figures(on_pg, largest)
    return write_results("scale", figures, {"sizes": results, "postgresql": on_pg, "today": _TODAY})


if __name__ == "__main__":
    main()
