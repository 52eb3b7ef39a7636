"""Peers side by side: otel-session, Finchvox and Arize Phoenix storing the same OTLP stream.

    python -m bench.peers [--spans 20480] [--exporters 4] [--batch 512] [--spans-per-trace 64,8]
                          [--rounds 3] [--peer-rounds 1] [--systems receive-only,otel-session,finchvox,phoenix]
    python -m bench.peers --install      # only build the peers' virtualenvs (``make peers``)

Each system runs as a server process on loopback (free ports, a data directory of its own under a
temporary parent); ``--exporters`` official OTLP/gRPC exporters (every system here takes gRPC)
send it the same prepared stream of realistic agent spans (``bench.collector``'s generator: random
64-bit span ids as SDKs draw them); the bench then polls what the system has *stored* (its own
files or database, read from this process so the polling costs the peer nothing) until the count
reaches what was sent or stops moving, and charges the system the CPU seconds (user + system) of
its whole process tree from just before the first export to the first poll that saw the final
count. Per system: spans sent, spans stored, stored spans per CPU-second; otel-session's ratio to
each peer and to the fastest (target: >= 10). Rounds alternate the systems (the first
``--peer-rounds`` of them include the peers: one Phoenix measurement takes minutes of CPU);
figures are the median round's, notes give the spread. A system that cannot be installed or
started is reported as such, and the others are still measured.

What each system stores, and how it is counted:

- ``receive-only``: otel-session's collector decoding and counting, nothing stored (the baseline;
  "stored" = acknowledged).
- ``otel-session``: the collector writing bundles (``bench.collector --serve write``: seal after
  1 s quiet); stored = distinct span ids in the journals of sealed (``complete``) bundles. A plain
  HTTP span (1 in 8 of this stream) leaves no record in a conversation's bundle, so it is not
  counted: otel-session is credited with 7/8 of what it was sent.
- ``finchvox`` 0.0.17 (PyPI, in ``.venv-peers/finchvox``: it pulls Pipecat): ``finchvox start``;
  one JSONL line per span in ``<data>/sessions/<trace id>/trace_<trace id>.jsonl``; stored =
  complete lines.
- ``phoenix`` (``.venv-phoenix``, ``make phoenix``): ``phoenix serve`` on SQLite under
  ``PHOENIX_WORKING_DIR``; stored = rows of its ``spans`` table (unique by span id).

The harness's pure parts, tested in ``tests/test_bench_peers.py``:

- ``tree_cpu_s(pid, proc=Path("/proc")) -> float``: CPU seconds of a process and all its
  descendants (waited-for children included, through the kernel's ``cutime``/``cstime``).
- ``settle(poll, expected, quiet_s, timeout_s, clock=, sleep=) -> Settled``: polls
  ``poll() -> (count, sample)`` until ``count >= expected`` or it has not moved for ``quiet_s``;
  returns the final count and the sample taken when that count was first seen.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import BENCH_DIR, Figure, fmt, write_results
from bench.collector import _batch as agent_batch
from bench.collector import export_concurrently
from otel_session.demo.stack import free_port, http_ready, tcp_ready

REPO = BENCH_DIR.parent
PEERS_VENVS = REPO / ".venv-peers"
FINCHVOX_VERSION = "0.0.17"
TARGET_RATIO = 10.0
_HOST = "127.0.0.1"
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# -- CPU of a process tree ---------------------------------------------------------------------


def parse_stat(text: str) -> tuple[int, int]:
    """``(ppid, clock ticks)`` from a ``/proc/<pid>/stat`` line: utime + stime + cutime + cstime.

    The command name (field 2) may hold spaces and parentheses: fields are counted after its last ``)``.
    """
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), sum(int(value) for value in fields[11:15])


def tree_cpu_s(pid: int, proc: Path = Path("/proc")) -> float:
    """CPU seconds so far of ``pid`` and every live descendant (children reaped count in their parent)."""
    stats: dict[int, tuple[int, int]] = {}
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                stats[int(entry.name)] = parse_stat((entry / "stat").read_text())
            except (OSError, ValueError):  # gone between listing and reading
                continue
    children: dict[int, list[int]] = {}
    for child, (parent, _) in stats.items():
        children.setdefault(parent, []).append(child)
    ticks, todo = 0, [pid]
    while todo:
        current = todo.pop()
        if current in stats:
            ticks += stats[current][1]
            todo += children.get(current, [])
    return ticks / _CLOCK_TICKS


# -- waiting until the store is settled -----------------------------------------------------------


@dataclass
class Settled:
    count: int
    sample: Any  # what ``poll`` returned beside the count when this count was first seen
    waited_s: float
    reason: str  # "all" (count reached what was expected), "stable" or "timeout"


def settle(
    poll: Callable[[], tuple[int, Any]],
    expected: int,
    *,
    quiet_s: float,
    timeout_s: float,
    interval_s: float = 0.25,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Settled:
    """Poll until the count reaches ``expected``, or has not changed for ``quiet_s``, or ``timeout_s``."""
    started = clock()
    count, sample = poll()
    changed_at = started
    while True:
        now = clock()
        if count >= expected:
            return Settled(count, sample, now - started, "all")
        if now - changed_at >= quiet_s:
            return Settled(count, sample, now - started, "stable")
        if now - started >= timeout_s:
            return Settled(count, sample, now - started, "timeout")
        sleep(interval_s)
        latest, latest_sample = poll()
        if latest != count:
            count, sample, changed_at = latest, latest_sample, clock()


# -- counting what each system stored --------------------------------------------------------------


class BundleSpans:
    """Distinct span ids in the journals of sealed bundles under ``root`` (a sealed bundle is read once)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._sealed: dict[Path, set[str]] = {}

    def __call__(self) -> int:
        from otel_session.bundle.read import iter_runs, read_bundle

        for info in iter_runs(self.root):
            if info.capture_status == "complete" and info.path not in self._sealed:
                events = read_bundle(info.path).events
                self._sealed[info.path] = {event["span_id"] for event in events if "span_id" in event}
        return sum(len(spans) for spans in self._sealed.values())


class JsonlLines:
    """Complete lines of the ``*.jsonl`` files under ``root`` (a file is re-read only when it grew)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._files: dict[Path, tuple[int, int]] = {}

    def __call__(self) -> int:
        for path in self.root.rglob("*.jsonl"):
            size = path.stat().st_size
            if self._files.get(path, (-1, 0))[0] != size:
                self._files[path] = (size, path.read_bytes().count(b"\n"))
        return sum(lines for _, lines in self._files.values())


def sqlite_rows(database: Path, table: str) -> Callable[[], int]:
    """Rows of ``table`` in the SQLite file ``database``, read-only (0 until the table exists)."""

    def count() -> int:
        try:
            with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=5) as connection:
                return connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        except sqlite3.Error:
            return 0

    return count


# -- the systems -------------------------------------------------------------------------------------


class Unavailable(Exception):
    """A system that cannot be installed or started here (reported, not raised)."""


@dataclass
class Server:
    """A system's server process on loopback, its OTLP/gRPC port and its stored-span counter."""

    process: subprocess.Popen
    grpc_port: int
    stored: Callable[[], int]
    log: Path

    def stop(self) -> dict:
        """SIGTERM the server's process group (its own session), SIGKILL it if it lingers; return
        the JSON report it printed last on a piped stdout (the collector's counters), else ``{}``."""
        for sig, wait_s in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        lines = self.process.stdout.read().splitlines() if self.process.stdout else []
        try:
            return json.loads(lines[-1]) if lines else {}
        except ValueError:
            return {}


def _spawn(command: list[str], data: Path, env: dict[str, str] | None = None, **popen: Any) -> tuple[subprocess.Popen, Path]:
    log = data / "server.log"
    with log.open("wb") as handle:
        process = subprocess.Popen(command, cwd=REPO, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL,
                                   stderr=handle, start_new_session=True, **({"stdout": handle} | popen))
    return process, log


def _wait_ready(process: subprocess.Popen, log: Path, ready: Callable[[], bool], timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if process.poll() is not None:
            raise Unavailable(f"exited with {process.returncode} while starting: {log.read_text(errors='replace')[-600:]}")
        if time.monotonic() > deadline:
            raise Unavailable(f"not ready in {timeout_s:.0f} s")
        time.sleep(0.2)


@dataclass
class System:
    """One system of the comparison: how to find or install it, start it, and what it stores."""

    name: str
    start: Callable[[Path], Server]
    version: Callable[[], str]
    peer: bool = True  # False for otel-session's own two modes
    protocol: str = "OTLP/gRPC"
    problem: str | None = None  # why it cannot run here (set once, reported in every round)
    info: dict = field(default_factory=dict)


def _collector(mode: str) -> Callable[[Path], Server]:
    def start(data: Path) -> Server:
        process, log = _spawn([sys.executable, "-m", "bench.collector", "--serve", mode, "--dir", str(data / "bundles")],
                              data, stdout=subprocess.PIPE, text=True)
        line = process.stdout.readline()
        if not line.strip().isdigit():
            raise Unavailable(f"the collector did not start: {log.read_text(errors='replace')[-600:]}")
        stored = BundleSpans(data / "bundles") if mode == "write" else (lambda: 0)
        return Server(process, int(line), stored, log)
    return start


def _own_version() -> str:
    from otel_session._version import __version__
    return __version__


def _venv_version(python: Path, distribution: str) -> str:
    return subprocess.run([str(python), "-c", f"import importlib.metadata as m; print(m.version({distribution!r}))"],
                          capture_output=True, text=True, check=True).stdout.strip()


def finchvox_venv(install: bool = True) -> Path:
    """``.venv-peers/finchvox`` with Finchvox from PyPI, built once (a stamp file marks it done)."""
    venv = PEERS_VENVS / "finchvox"
    stamp = venv / ".installed"
    if stamp.exists():
        return venv
    if not install:
        raise Unavailable(f"not installed ({venv}; make peers builds it)")
    PEERS_VENVS.mkdir(exist_ok=True)
    log = PEERS_VENVS / "finchvox-install.log"
    print(f"installing finchvox=={FINCHVOX_VERSION} into {venv} (once, a few minutes; log: {log})", flush=True)
    with log.open("wb") as handle:
        for command in ([sys.executable, "-m", "venv", "--clear", str(venv)],
                        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", f"finchvox=={FINCHVOX_VERSION}"]):
            if subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, timeout=1800).returncode:
                raise Unavailable(f"could not install finchvox=={FINCHVOX_VERSION}; see {log}")
    stamp.touch()
    return venv


def _finchvox(data: Path) -> Server:
    venv = finchvox_venv()
    port = free_port()
    grpc_port = free_port(exclude=(port,))
    sessions = data / "finchvox"
    # Finchvox binds its gRPC port on every interface ([::]), whatever --host says (its own code).
    process, log = _spawn([str(venv / "bin" / "finchvox"), "start", "--host", _HOST, "--port", str(port),
                           "--grpc-port", str(grpc_port), "--data-dir", str(sessions), "--telemetry", "false"],
                          data, {"FINCHVOX_TELEMETRY": "false"})
    _wait_ready(process, log, lambda: tcp_ready(grpc_port)() and tcp_ready(port)())
    return Server(process, grpc_port, JsonlLines(sessions), log)


def phoenix_bin() -> Path:
    """``$OTEL_SESSION_PHOENIX_BIN``, else ``.venv-phoenix``'s ``phoenix`` once ``make phoenix`` finished it."""
    if os.environ.get("OTEL_SESSION_PHOENIX_BIN"):
        executable = Path(os.environ["OTEL_SESSION_PHOENIX_BIN"])
        if not os.access(executable, os.X_OK):
            raise Unavailable(f"OTEL_SESSION_PHOENIX_BIN={executable} is not an executable")
        return executable
    if (REPO / ".venv-phoenix" / ".installed").exists():
        return REPO / ".venv-phoenix" / "bin" / "phoenix"
    raise Unavailable("not installed (make phoenix puts it in .venv-phoenix, or set OTEL_SESSION_PHOENIX_BIN)")


def _phoenix(data: Path) -> Server:
    executable = phoenix_bin()
    port = free_port()
    grpc_port = free_port(exclude=(port,))
    workdir = data / "phoenix"
    workdir.mkdir()
    process, log = _spawn([str(executable), "serve"], data, {
        "PHOENIX_WORKING_DIR": str(workdir), "PHOENIX_HOST": _HOST, "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port), "PHOENIX_TELEMETRY_ENABLED": "false",
    })
    _wait_ready(process, log, lambda: http_ready(f"http://{_HOST}:{port}/healthz")() and tcp_ready(grpc_port)())
    return Server(process, grpc_port, sqlite_rows(workdir / "phoenix.db", "spans"), log)


def systems() -> dict[str, System]:
    return {
        "receive-only": System("receive-only", _collector("receive"), _own_version, peer=False),
        "otel-session": System("otel-session", _collector("write"), _own_version, peer=False),
        "finchvox": System("finchvox", _finchvox, lambda: _venv_version(finchvox_venv() / "bin" / "python", "finchvox")),
        "phoenix": System("phoenix", _phoenix, lambda: _venv_version(phoenix_bin().parent / "python", "arize-phoenix")),
    }


# -- one measurement --------------------------------------------------------------------------------


def measure(system: System, prepared: list[list[list]], parent: Path, *, quiet_s: float, timeout_s: float) -> dict:
    """Start ``system``, send it ``prepared``, wait until its store settles, charge its process tree's CPU."""
    data = Path(tempfile.mkdtemp(prefix=f"{system.name}-", dir=parent))
    server = system.start(data)
    try:
        sent = sum(len(spans) for batches in prepared for spans in batches)
        failed: list[int] = []
        cpu_before = tree_cpu_s(server.process.pid)
        wall_s = export_concurrently(server.grpc_port, prepared, lambda index, spans: failed.append(len(spans)))
        if server.process.poll() is not None:
            raise Unavailable(f"exited with {server.process.returncode} under load: {server.log.read_text(errors='replace')[-600:]}")
        if system.name == "receive-only":  # nothing stored: what was acknowledged, the CPU right now
            stored = Settled(sent - sum(failed), tree_cpu_s(server.process.pid), 0.0, "all")
        else:
            stored = settle(lambda: (server.stored(), tree_cpu_s(server.process.pid)), sent,
                            quiet_s=quiet_s, timeout_s=timeout_s)
    finally:
        report = server.stop()
    cpu_s = stored.sample - cpu_before
    return {
        "system": system.name,
        "spans_sent": sent,
        "spans_failed_export": sum(failed),
        "spans_stored": stored.count,
        "settled": stored.reason,
        "export_wall_s": round(wall_s, 3),
        "settle_wall_s": round(stored.waited_s, 3),
        "cpu_s": round(cpu_s, 3),
        "stored_per_cpu_s": round(stored.count / cpu_s) if cpu_s > 0 else None,
    } | ({"server_counters": report["counters"]} if "counters" in report else {})


def _median(rounds: list[dict]) -> dict:
    ranked = sorted(rounds, key=lambda measured: measured["stored_per_cpu_s"] or 0)
    return ranked[len(ranked) // 2]


def _spread(rounds: list[dict]) -> str:
    rates = sorted(measured["stored_per_cpu_s"] or 0 for measured in rounds)
    return f"median of {len(rounds)} rounds, spread {fmt(rates[0])}–{fmt(rates[-1])}"


def _figures(per_trace: int, medians: dict[str, dict], rounds: dict[str, list[dict]], problems: dict[str, str],
             peer_names: set[str]) -> list[Figure]:
    prefix = f"peers.{per_trace}_spans_per_trace"
    figures = []
    peers = {name: m["stored_per_cpu_s"] for name, m in medians.items() if name in peer_names}
    ours = medians.get("otel-session", {}).get("stored_per_cpu_s")
    for name, median in medians.items():
        note = f"stored {median['spans_stored']:,} of {median['spans_sent']:,} sent ({median['settled']}); " + _spread(rounds[name])
        if name in peers and ours and peers[name]:
            note += f"; otel-session ÷ {name} = {ours / peers[name]:.1f}"
        figures.append(Figure(f"{prefix}.{name}.stored_spans_per_cpu_s", median["stored_per_cpu_s"] or 0, "spans/s", note=note))
        figures.append(Figure(f"{prefix}.{name}.spans_stored", median["spans_stored"], "spans", baseline=median["spans_sent"]))
    if ours and peers:
        fastest = max(peers, key=peers.get)
        ratio = ours / peers[fastest]
        figures.append(Figure(f"{prefix}.otel_session_over_fastest_peer", round(ratio, 2), "x",
                              target=f">= {TARGET_RATIO:g}", ok=ratio >= TARGET_RATIO,
                              note=f"fastest peer: {fastest} ({fmt(peers[fastest])} stored spans/CPU-s)"))
    for name, problem in problems.items():
        figures.append(Figure(f"{prefix}.{name}.not_measured", 0, "", note=problem))
    return figures


def main(argv: list[str] | None = None) -> dict:
    """Measure and write ``bench/results-peers.json`` (``python -m bench`` calls this with no arguments)."""
    parser = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=20_480, help="spans per measurement (all exporters together)")
    parser.add_argument("--exporters", type=int, default=4, help="concurrent official OTLP/gRPC exporters")
    parser.add_argument("--batch", type=int, default=512, help="spans per export (BatchSpanProcessor default)")
    parser.add_argument("--spans-per-trace", default="64,8", help="trace (= run) sizes, comma-separated")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, the systems alternating in each")
    parser.add_argument("--peer-rounds", type=int, default=1,
                        help="how many of the rounds include the peers (Phoenix needs minutes of CPU per measurement, "
                        "which spreads it over the machine's slow and fast minutes alike)")
    parser.add_argument("--systems", default=",".join(systems()), help="which systems, comma-separated")
    parser.add_argument("--quiet-s", type=float, default=10.0,
                        help="a store whose count has not moved for this long is settled short of what was sent")
    parser.add_argument("--timeout-s", type=float, default=900.0, help="longest wait for one store to settle")
    parser.add_argument("--install", action="store_true", help="only build the peers' virtualenvs, then exit")
    args = parser.parse_args(argv or [])
    if args.install:
        try:
            finchvox_venv()
        except Unavailable as error:  # the bench reports the peer as not measured; everything else runs
            print(f"WARNING: finchvox: {error}", flush=True)
        return {}
    chosen = {name: system for name, system in systems().items() if name in args.systems.split(",")}
    for system in chosen.values():
        try:
            system.info = {"version": system.version(), "protocol": system.protocol}
        except (Unavailable, subprocess.SubprocessError, OSError) as error:
            system.problem = str(error)
            print(f"{system.name}: {system.problem}", flush=True)
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    resource, scope = Resource.create({"service.name": "bench-agent"}), InstrumentationScope("bench")
    batches = args.spans // args.exporters // args.batch
    parent = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    figures, workloads = [], []
    try:
        for per_trace in (int(size) for size in args.spans_per_trace.split(",")):
            prepared = [[agent_batch(e, b, args.batch, per_trace, resource, scope) for b in range(batches)]
                        for e in range(args.exporters)]
            rounds: dict[str, list[dict]] = {name: [] for name in chosen}
            for number in range(args.rounds):
                for system in chosen.values():
                    if system.problem or (system.peer and number >= args.peer_rounds):
                        continue
                    try:
                        measured = measure(system, prepared, parent, quiet_s=args.quiet_s, timeout_s=args.timeout_s)
                    except Unavailable as error:
                        system.problem = str(error)
                        print(f"{system.name}: {system.problem}", flush=True)
                        continue
                    rounds[system.name].append(measured)
                    print(f"  {per_trace} spans/trace, round {number + 1}: {system.name} stored {measured['spans_stored']:,} "
                          f"of {measured['spans_sent']:,} in {measured['cpu_s']:.2f} CPU-s "
                          f"({fmt(measured['stored_per_cpu_s'] or 0)}/CPU-s, {measured['settled']})", flush=True)
            medians = {name: _median(measured) for name, measured in rounds.items() if measured}
            problems = {name: system.problem for name, system in chosen.items() if system.problem and name not in medians}
            figures += _figures(per_trace, medians, rounds, problems, {name for name, system in chosen.items() if system.peer})
            workloads.append({"spans_per_trace": per_trace, "medians": medians, "rounds": rounds})
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    details = {
        "exporters": args.exporters, "batch": args.batch, "protocol": "OTLP/gRPC (official exporters)",
        "systems": {name: system.info | ({"problem": system.problem} if system.problem else {}) for name, system in chosen.items()},
        "workloads": workloads,
    }
    return write_results("peers", figures, details)


if __name__ == "__main__":
    main(sys.argv[1:])
