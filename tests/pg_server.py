"""A private PostgreSQL server for tests: Debian's server binaries, a cluster ``initdb``-ed in a
temp directory, on a free loopback port (a new one when another process took it first), stopped after.

Contract::

    server = PostgresServer.start()     # PostgresUnavailable (the reason) when it cannot run here
    url = server.create_database("t1")  # postgresql+psycopg://otel@127.0.0.1:PORT/t1
    server.halt(); server.restart()     # the server goes away (pg_ctl stop), then comes back on its port
    server.stop()                       # idempotent; removes the cluster

The binaries are found under ``/usr/lib/postgresql/*/bin`` (newest version); when none are there
and we are root, Debian's ``postgresql`` package is installed with apt-get. ``initdb`` refuses to
run as root: as root the cluster belongs to the ``postgres`` user (or ``nobody``) and every server
command runs through ``runuser``. The server trusts local connections (a throwaway cluster that
listens on 127.0.0.1 only, its socket in its own directory) and skips fsync.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PostgresServer", "PostgresUnavailable"]

_USER = "otel"
_START_TIMEOUT_S = 120
_PORT_ATTEMPTS = 5


class PostgresUnavailable(RuntimeError):
    """The server cannot be started on this machine (the message says why)."""


def _binaries() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda path: int(Path(path).parts[-3]))
    if not found and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "-q", "postgresql"], check=False, capture_output=True,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}, timeout=600)
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda path: int(Path(path).parts[-3]))
    if not found:
        raise PostgresUnavailable("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin "
                                  "(install Debian's postgresql package)")
    return Path(found[-1]).parent


def _owner() -> str | None:
    """The unprivileged user that runs the server when we are root; None when we are not."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise PostgresUnavailable("running as root with neither a postgres nor a nobody user to run initdb as")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _read_from(path: Path, offset: int) -> bytes:
    try:
        with open(path, "rb") as file:
            file.seek(offset)
            return file.read()
    except FileNotFoundError:
        return b""


@dataclass
class PostgresServer:
    bin: Path
    home: Path
    port: int
    owner: str | None
    running: bool = True

    @classmethod
    def start(cls) -> PostgresServer:
        binaries = _binaries()
        owner = _owner()
        home = Path(tempfile.mkdtemp(prefix="otel-session-pg-"))
        if owner is not None:
            shutil.chown(home, user=owner)
        server = cls(binaries, home, _free_port(), owner)
        try:
            server._run("initdb", "-D", str(home / "data"), "-U", _USER, "--auth=trust", "-E", "UTF8", "--no-sync")
            server._start_on_a_free_port()
        except PostgresUnavailable:
            server.running = False
            server._remove()
            raise
        return server

    def _start_on_a_free_port(self) -> None:
        """Start on the port picked free; again on a new one while another process took it first
        (PostgreSQL cannot bind port 0 and say which it got: its socket file is named by the port)."""
        log = self.home / "server.log"
        for attempt in range(_PORT_ATTEMPTS):
            logged = log.stat().st_size if log.exists() else 0
            try:
                self.restart()
                return
            except PostgresUnavailable:
                if attempt == _PORT_ATTEMPTS - 1 or b"Address already in use" not in _read_from(log, logged):
                    raise
            self.port = _free_port()

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.bin / program), *args]
        if self.owner is not None:
            command = ["runuser", "-u", self.owner, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, cwd=self.home, timeout=_START_TIMEOUT_S + 30)
        if done.returncode != 0:
            log = self.home / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise PostgresUnavailable(f"{program} failed ({done.returncode}): {(done.stderr or done.stdout)[-2000:]}{tail}")

    def restart(self) -> None:
        self._run("pg_ctl", "-D", str(self.home / "data"), "-l", str(self.home / "server.log"), "-w",
                  "-t", str(_START_TIMEOUT_S), "-o", f"-p {self.port} -k {self.home} -c listen_addresses=127.0.0.1 -F",
                  "start")

    def halt(self) -> None:
        self._run("pg_ctl", "-D", str(self.home / "data"), "-m", "fast", "-w", "stop")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{_USER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new empty database in the cluster; its URL."""
        import psycopg

        with psycopg.connect(self.url().replace("+psycopg", ""), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        if self.running:
            self.running = False
            try:
                self._run("pg_ctl", "-D", str(self.home / "data"), "-m", "immediate", "-w", "stop")
            finally:
                self._remove()

    def _remove(self) -> None:
        shutil.rmtree(self.home, ignore_errors=True)
