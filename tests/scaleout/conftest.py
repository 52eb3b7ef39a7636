"""Fixtures for the tests of several collectors and viewers: one private PostgreSQL cluster and one
SeaweedFS S3 server for the session (started here, stopped after; skipped with the reason only
where they cannot run)."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.catalog.conftest import postgres  # noqa: F401 - the session's PostgreSQL server
from tests.pg_server import PostgresServer
from tests.store.conftest import bucket, s3, s3_server  # noqa: F401 - the session's SeaweedFS server

_databases = itertools.count()


@pytest.fixture
def catalog_url(postgres: PostgresServer | str) -> str:  # noqa: F811
    """A new empty PostgreSQL database: the catalog every process of the test shares."""
    if isinstance(postgres, str):
        pytest.skip(f"no PostgreSQL server here: {postgres}")
    return postgres.create_database(f"scaleout_{next(_databases)}")


class CollectorProcess:
    """``otel-session collect`` on a root of its own, OTLP/HTTP on a port it picked."""

    def __init__(self, root: Path, env: dict[str, str], *args: str) -> None:
        self.root = root
        self.process = subprocess.Popen(
            [sys.executable, "-m", "otel_session.cli", "collect", "--dir", str(root), "--grpc", "off",
             "--http", "127.0.0.1:0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **env})
        banner = self.process.stdout.readline()
        assert "otel-session collector:" in banner, self.process.stderr.read()
        self.port = int(banner.split("http=")[1].split()[0].rsplit(":", 1)[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/traces"

    def counter(self, name: str) -> float:
        """A counter of ``GET /metrics`` (``otel_session_collector_<name>_total``)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=30) as response:
            text = response.read().decode()
        found = re.search(rf"^otel_session_collector_{name}(?:_total)? (\S+)$", text, re.MULTILINE)
        return float(found.group(1)) if found else 0.0

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(60)

    def stop(self) -> str:
        if self.process.poll() is None:
            self.process.terminate()
        _, err = self.process.communicate(timeout=120)
        return err


@pytest.fixture
def collectors() -> Iterator[list[CollectorProcess]]:
    """Collector processes a test starts (appended); each stopped at the end."""
    started: list[CollectorProcess] = []
    yield started
    for collector in started:
        collector.stop()
