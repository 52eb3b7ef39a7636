"""The whole demo on loopback: collector, viewer, mock LLM, booking agent, then the driver.

Contract::

    stack = DemoStack(bundle_dir, ports=DemoPorts(...), seal_after_s=1.0)
    stack.start()                            # every service up and ready (polled), or DemoError naming it
    conversations = stack.play()             # the driver (a subprocess) → session ids, run ids, states
    stack.flush_agent()                      # optional: stop the agent now so its spans are exported
    checks = stack.wait_sealed(conversations)  # RunCheck per run id, once the collector sealed them
    print(stack.summary(conversations, checks))
    stack.stop()                             # SIGTERM in dependency order, wait, SIGKILL stragglers
    stack.verify_all()                       # every bundle under the root read back: the problems

Each service is a child process in its own process group, logging to ``<log_dir>/<name>.log``;
on Linux the children also die with the stack (``PR_SET_PDEATHSIG``), so nothing is orphaned.
Readiness is polled (a TCP connect or an HTTP GET), never guessed with sleeps.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any

import orjson

from otel_session.demo.booking import DEMO_KEEP_SLOTS
from otel_session.bundle.read import BundleStatus, iter_runs, read_bundle

__all__ = [
    "DemoError",
    "DemoPorts",
    "DemoStack",
    "RunCheck",
    "Service",
    "ServiceExited",
    "StackSummary",
    "free_port",
    "http_ready",
    "tcp_ready",
]

_HOST = "127.0.0.1"
_READY_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 10.0
_START_ATTEMPTS = 3


class DemoError(RuntimeError):
    """The stack could not start or finish; the message says which service and why."""


class ServiceExited(DemoError):
    """A service exited while it started (a port picked free and taken since, among other causes)."""


@dataclass
class DemoPorts:
    """Loopback ports of the stack's services (0 picks a free one at start)."""

    viewer: int = 8765
    collector_grpc: int = 4317
    collector_http: int = 4318
    agent: int = 8780
    llm: int = 8781

    def resolve(self) -> None:
        """Pick free ports for the zeros; refuse busy ones with the option that changes them."""
        taken: set[int] = set()
        for item in fields(self):
            port = getattr(self, item.name)
            if port == 0:
                port = free_port(exclude=taken)
                setattr(self, item.name, port)
            elif not _port_free(port):
                option = "--" + item.name.replace("_", "-") + "-port"
                raise DemoError(
                    f"port {port} on {_HOST} ({item.name.replace('_', ' ')}) is already in use; "
                    f"stop what holds it or choose another with {option} (0 picks a free one)"
                )
            taken.add(port)


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((_HOST, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def free_port(*, exclude: Iterable[int] = ()) -> int:
    """A port free on 127.0.0.1 right now (the OS picks it)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((_HOST, 0))
            port = probe.getsockname()[1]
        if port not in set(exclude):
            return port


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: SIGTERM the child when the stack dies, so a killed stack leaves no orphans."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def tcp_ready(port: int) -> Callable[[], bool]:
    """A readiness probe: something accepts connections on 127.0.0.1:``port``."""
    def probe() -> bool:
        try:
            with socket.create_connection((_HOST, port), timeout=0.5):
                return True
        except OSError:
            return False

    return probe


def http_ready(url: str) -> Callable[[], bool]:
    """A readiness probe: ``GET url`` answers 2xx."""
    def probe() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=1.0) as response:
                return 200 <= response.status < 300
        except (urllib.error.URLError, OSError):
            return False

    return probe


@dataclass
class Service:
    """One child process of the stack."""

    name: str
    argv: list[str]
    ready: Callable[[], bool]
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    def start(self, log_dir: Path) -> None:
        self.log_path = log_dir / f"{self.name}.log"
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env},
                start_new_session=True,  # Ctrl-C reaches the stack only; it stops children in order
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )

    def log_tail(self, lines: int = 15) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise ServiceExited(
                    f"{self.name} exited with code {self.process.returncode} while starting:\n{self.log_tail()}"
                )
            if self.ready():
                return
            time.sleep(0.05)
        raise DemoError(f"{self.name} was not ready after {timeout_s:.0f} s:\n{self.log_tail()}")

    def stop(self, timeout_s: float = _STOP_TIMEOUT_S) -> int | None:
        """SIGTERM, wait, SIGKILL if it lingers; the exit code (None if it never started)."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        return process.returncode


class RunCheck(str, Enum):
    """What became of one run the driver made."""

    COMPLETE = "complete"
    NOT_SEALED = "not sealed"
    MISSING = "missing"
    INVALID = "invalid"


@dataclass
class StackSummary:
    """What the demo shows on one screen, and whether every bundle verified."""

    lines: list[str]
    ok: bool

    def __str__(self) -> str:
        return "\n".join(self.lines)


class DemoStack:
    """Start, play, seal, summarise and stop the demo's services (see the module docstring)."""

    def __init__(
        self,
        bundle_dir: Path,
        *,
        ports: DemoPorts | None = None,
        seal_after_s: float = 1.0,
        log_dir: Path | None = None,
        export_to: Sequence[str] = (),
        python: str = sys.executable,
    ) -> None:
        self.bundle_dir = bundle_dir.resolve()
        self.ports = ports or DemoPorts()
        self.seal_after_s = seal_after_s
        self._log_dir = log_dir
        self.export_to = list(export_to)
        self.python = python
        self.services: dict[str, Service] = {}

    @property
    def log_dir(self) -> Path:
        """Where each process logs: the given directory, else a temporary one made on first use."""
        if self._log_dir is None:
            self._log_dir = Path(tempfile.mkdtemp(prefix="otel-session-demo-"))
        return self._log_dir

    @property
    def viewer_url(self) -> str:
        return f"http://{_HOST}:{self.ports.viewer}/"

    @property
    def agent_url(self) -> str:
        return f"http://{_HOST}:{self.ports.agent}"

    def _cli(self, *args: str) -> list[str]:
        return [self.python, "-c", "from otel_session.cli import main; main(prog_name='otel-session')", *args]

    def _plan(self) -> list[Service]:
        p = self.ports
        otlp_http = f"http://{_HOST}:{p.collector_http}/v1/traces"
        agent_argv = [
            self.python, "-m", "otel_session.demo.agent", "--port", str(p.agent),
            "--llm", f"http://{_HOST}:{p.llm}/v1", "--otlp-endpoint", otlp_http,
            "--journal-dir", str(self.log_dir / "agent-journal"),
        ]
        for endpoint in self.export_to:
            agent_argv += ["--otlp-endpoint", endpoint]
        return [
            Service(
                "collector",
                self._cli("collect", "--dir", str(self.bundle_dir), "--grpc", f"{_HOST}:{p.collector_grpc}",
                          "--http", f"{_HOST}:{p.collector_http}", "--seal-after", str(self.seal_after_s),
                          "--span-records"),  # the span tree shows every attribute the agent sent
                tcp_ready(p.collector_http),
                # The collector redacts again before disk: the same readable booking slots.
                env={"OTEL_SESSION_REDACT_KEEP_SLOTS": ",".join(DEMO_KEEP_SLOTS)},
            ),
            Service(
                "viewer",
                self._cli("view", "--dir", str(self.bundle_dir), "--host", _HOST, "--port", str(p.viewer)),
                http_ready(f"http://{_HOST}:{p.viewer}/api/sessions"),
            ),
            Service("llm", [self.python, "-m", "otel_session.demo.booking_llm", "--port", str(p.llm)],
                    http_ready(f"http://{_HOST}:{p.llm}/v1/models")),
            Service(
                "agent",
                agent_argv,
                http_ready(f"{self.agent_url}/healthz"),
                # Export within a fraction of a second so the viewer shows runs while they happen.
                env={"OTEL_BSP_SCHEDULE_DELAY": "200", "OTEL_SERVICE_NAME": "booking-agent"},
            ),
        ]

    def start(self) -> None:
        """Start every service and wait until each is ready; on failure stop what started.

        Ports given as 0 are picked free here and passed to the services, which start at once (the
        agent is told the LLM's and the collector's ports before they bind): another process may
        take one in between, and its service exits. Then every picked port is picked again and the
        stack started again, ``_START_ATTEMPTS`` times at most."""
        picked = [item.name for item in fields(self.ports) if getattr(self.ports, item.name) == 0]
        self.bundle_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, _START_ATTEMPTS + 1):
            self.ports.resolve()
            try:
                self.services = {}
                for service in self._plan():
                    self.services[service.name] = service
                    service.start(self.log_dir)
                for service in self.services.values():
                    service.wait_ready(_READY_TIMEOUT_S)
                return
            except ServiceExited:
                self.stop()
                if not picked or attempt == _START_ATTEMPTS:
                    raise
                for name in picked:
                    setattr(self.ports, name, 0)
            except BaseException:
                self.stop()
                raise

    def play(self, tag: str | None = None) -> list[dict[str, Any]]:
        """Run the driver as a process; its conversations (session ids, run ids, final states)."""
        argv = [self.python, "-m", "otel_session.demo.driver", "--agent", self.agent_url, "--json"]
        if tag:
            argv += ["--tag", tag]
        driver = subprocess.run(argv, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
        try:
            conversations = orjson.loads(driver.stdout)["conversations"]
        except (ValueError, KeyError, TypeError):
            stderr = driver.stderr.decode(errors="replace")
            raise DemoError(f"the driver failed (exit {driver.returncode}):\n{stderr}") from None
        failed = [c for c in conversations if c.get("error")]
        if failed:
            raise DemoError("; ".join(f"{c['name']}: {c['error']}" for c in failed))
        return conversations

    def flush_agent(self) -> None:
        """Stop the agent so its exporter flushes every span to the collector now."""
        agent = self.services.get("agent")
        if agent is not None and agent.stop() not in (0, None):
            raise DemoError(f"the agent exited with code {agent.process.returncode}:\n{agent.log_tail()}")

    def run_checks(self, conversations: list[dict[str, Any]]) -> dict[str, RunCheck]:
        """Each run the driver made, by run id: sealed complete, still recording, missing, invalid."""
        found = {run.run_id: run for run in iter_runs(self.bundle_dir, include_evals=True)}
        checks: dict[str, RunCheck] = {}
        for conversation in conversations:
            for run_id in conversation["run_ids"]:
                run = found.get(run_id)
                if run is None:
                    checks[run_id] = RunCheck.MISSING
                elif run.capture_status is None or run.capture_status == "recording":
                    checks[run_id] = RunCheck.NOT_SEALED
                else:
                    status = read_bundle(run.path).status
                    checks[run_id] = RunCheck.COMPLETE if status is BundleStatus.COMPLETE else RunCheck.INVALID
        return checks

    def wait_sealed(self, conversations: list[dict[str, Any]], timeout_s: float = 30.0) -> dict[str, RunCheck]:
        """Poll until the collector has sealed every run the driver made (or the timeout)."""
        deadline = time.monotonic() + timeout_s
        while True:
            checks = self.run_checks(conversations)
            pending = {RunCheck.MISSING, RunCheck.NOT_SEALED}
            if not any(check in pending for check in checks.values()) or time.monotonic() > deadline:
                return checks
            time.sleep(0.1)

    def summary(self, conversations: list[dict[str, Any]], checks: dict[str, RunCheck]) -> StackSummary:
        """The one-screen summary: where things are, then one line per session."""
        p = self.ports
        lines = [
            "otel-session demo — every service on 127.0.0.1",
            f"  viewer     {self.viewer_url}",
            f"  collector  OTLP/gRPC {_HOST}:{p.collector_grpc}   OTLP/HTTP http://{_HOST}:{p.collector_http}/v1/traces",
            f"  agent      {self.agent_url}   (mock LLM http://{_HOST}:{p.llm}/v1)",
            f"  bundles    {self.bundle_dir}",
            f"  logs       {self.log_dir}",
            "",
            f"  {'session':<34} {'kind':<4} {'runs':>4}  {'capture':<12} {'final state':<12}",
        ]
        for c in conversations:
            statuses = [checks.get(run_id, RunCheck.MISSING) for run_id in c["run_ids"]]
            capture = ", ".join(sorted({s.value for s in statuses})) or "no runs"
            where = f"  evals/{c['eval_id']}/" if c.get("eval_id") else ""
            lines.append(
                f"  {c['session_id']:<34} {c['kind']:<4} {len(c['run_ids']):>4}  {capture:<12} {c['final_state']!s:<12}{where}"
            )
        complete = sum(1 for check in checks.values() if check is RunCheck.COMPLETE)
        ok = bool(checks) and complete == len(checks)
        lines += ["", f"  {len(conversations)} sessions, {len(checks)} runs: {complete} complete"
                      + ("" if ok else f", {len(checks) - complete} NOT complete")]
        asked_twice = next((c["session_id"] for c in conversations if c["name"] == "unparseable-date"), None)
        if asked_twice:
            lines.append(f"  why did it ask twice?  {shell_command()} facts {shlex.quote(asked_twice)} --dir {shlex.quote(str(self.bundle_dir))}")
        return StackSummary([line.rstrip() for line in lines], ok)

    def verify_all(self) -> list[str]:
        """Every bundle under the root read by the tolerant reader; the problems, if any."""
        from otel_session.bundle.read import find_bundles

        problems = []
        for path in find_bundles([self.bundle_dir]):
            result = read_bundle(path)
            if result.status is not BundleStatus.COMPLETE:
                codes = ", ".join(d.code.value for d in result.diagnostics)
                problems.append(f"{result.status.value}: {path} ({codes})")
        return problems

    def stop(self) -> dict[str, int | None]:
        """Stop in dependency order: agent (flushes spans), LLM, collector (seals), viewer."""
        codes: dict[str, int | None] = {}
        for name in ("agent", "llm", "collector", "viewer"):
            service = self.services.get(name)
            if service is not None:
                codes[name] = service.stop()
        return codes


def shell_command() -> str:
    """How a shell in the working directory runs this installation's ``otel-session``, so that a
    command the demo prints works as printed: the bare name when ``PATH`` finds this very script
    (an activated virtualenv), else its path (``.venv/bin/otel-session`` after ``make demo``)."""
    script = Path(sys.executable).with_name("otel-session")
    if not script.is_file():
        return "otel-session"
    found = shutil.which("otel-session")
    if found and os.path.samefile(found, script):
        return "otel-session"
    try:
        return shlex.quote(str(script.absolute().relative_to(Path.cwd())))
    except ValueError:
        return shlex.quote(str(script.absolute()))
