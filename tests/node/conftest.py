"""Fixtures for tests/node: the npm packages, the mock LLM, a real ``otel-session collect`` and a
runner for the Node.js apps."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from otel_session.bundle.read import BundleRead
from otel_session.demo.mock_llm import MockLLMServer
from otel_session.testing import bundles, wait_for

from .node_deps import node_modules

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def installed_node_modules() -> Path:
    return node_modules()


@pytest.fixture(scope="module")
def llm() -> Iterator[MockLLMServer]:
    with MockLLMServer() as server:
        yield server


@dataclass
class Collect:
    """A running ``otel-session collect`` (OTLP/HTTP only) writing bundles under ``root``."""

    root: Path
    http_port: int

    @property
    def traces_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}/v1/traces"

    def sealed(self, count: int = 1) -> list[BundleRead]:
        """The bundles, once ``count`` of them are sealed."""

        def ready() -> list[BundleRead] | None:
            found = bundles(self.root)
            done = [b for b in found if b.capture and b.capture.get("status") != "recording"]
            return found if len(done) >= count else None

        return wait_for(ready)  # type: ignore[no-any-return]


@pytest.fixture
def collect(tmp_path: Path) -> Iterator[Collect]:
    root = tmp_path / "bundles"
    command = [str(Path(sys.executable).with_name("otel-session")), "collect", "--dir", str(root),
               "--grpc", "off", "--http", "127.0.0.1:0", "--seal-after", "0.2"]
    log = tmp_path / "collect.log"  # a file, never a pipe nobody drains
    with open(log, "w") as stderr:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        line = child.stdout.readline()  # type: ignore[union-attr]
        if not line.startswith("otel-session collector:"):
            child.kill()
            pytest.fail(f"otel-session collect did not start: {line}{log.read_text()[-2000:]}")
        http = line.split("http=", 1)[1].split()[0]
        yield Collect(root, int(http.rpartition(":")[2]))
    finally:
        child.send_signal(signal.SIGTERM)
        child.communicate(timeout=120)


@pytest.fixture
def run_node(installed_node_modules: Path, tmp_path: Path) -> Callable[..., dict[str, Any]]:
    """``run_node(script, *args, env={...})``: a script of tests/node (or a path) run by node in
    ``tmp_path`` beside the installed packages; its last stdout line as JSON (None if not JSON)."""
    workdir = tmp_path / "app"
    workdir.mkdir()
    (workdir / "node_modules").symlink_to(installed_node_modules, target_is_directory=True)

    def run(script: str | Path, *args: str, env: dict[str, str] | None = None) -> Any:
        source = Path(script) if isinstance(script, Path) else HERE / script
        shutil.copyfile(source, workdir / source.name)
        done = subprocess.run(["node", source.name, *args], cwd=workdir, env={**os.environ, **(env or {})},
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
        try:
            return json.loads(last)
        except json.JSONDecodeError:
            return None

    return run
