"""Fixtures for the fault tests: a tiny real filesystem, the agent app as a process, the viewer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from otel_session.bundle.read import BundleRead
from otel_session.viewer import create_app
from otel_session.testing import bundles, wait_for  # noqa: F401 - shared with this area's tests

AGENT_APP = Path(__file__).with_name("agent_app.py")


@dataclass
class AgentResult:
    returncode: int
    runs: list[dict[str, Any]]
    done: dict[str, Any] | None
    stderr: str


def agent_command(root: Path, *options: str) -> list[str]:
    return [sys.executable, str(AGENT_APP), "--dir", str(root), *options]


def agent_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "OTEL_SESSION_REDACTION_KEY": "fault-tests", "OTEL_BSP_SCHEDULE_DELAY": "200", **extra}


def parse_agent_output(returncode: int, stdout: str, stderr: str) -> AgentResult:
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    done = next((line for line in lines if line.get("done")), None)
    return AgentResult(returncode, [line for line in lines if "run_id" in line], done, stderr)


def run_agent(root: Path, *options: str, timeout: float = 60, **env: str) -> AgentResult:
    """Run the agent app to the end; the caller asserts it finished normally."""
    completed = subprocess.run(
        agent_command(root, *options), capture_output=True, text=True, timeout=timeout, env=agent_env(**env)
    )
    return parse_agent_output(completed.returncode, completed.stdout, completed.stderr)


def assert_finished_normally(result: AgentResult, runs: int) -> None:
    """The app's turns, tools and runs all succeeded, whatever happened to the recording."""
    assert result.returncode == 0, result.stderr
    assert result.done == {"done": True, "errors": 0}, result.stderr
    assert len(result.runs) == runs
    for run in result.runs:
        assert run["error"] is None, run["error"]
        assert run["tool_result"] == {"date": "2026-12-04", "free": True}


def bundle_of(root: Path, run_id: str) -> BundleRead:
    (found,) = [bundle for bundle in bundles(root) if bundle.path.name == run_id]
    return found


def viewer_verdict(root: Path, session_id: str, run_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the viewer says about a run: its entry in the runs list and its integrity answer."""
    client = create_app({"BUNDLE_DIR": str(root), "TESTING": True}).test_client()
    listed = client.get(f"/api/sessions/{session_id}/runs")
    assert listed.status_code == 200, listed.get_data(as_text=True)
    (entry,) = [run for run in listed.get_json()["runs"] if run["run_id"] == run_id]
    integrity = client.get(f"/api/sessions/{session_id}/runs/{run_id}/integrity")
    assert integrity.status_code == 200, integrity.get_data(as_text=True)
    return entry, integrity.get_json()


def complete_lines(path: Path) -> tuple[int, int]:
    """(complete lines, bytes of a torn final line) of a journal."""
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    return data[:end].count(b"\n"), len(data) - end


class FailingAppends:
    """The writer's append seam: the target journal's next append writes half, then fails.

    The target is a file (device and inode), not a descriptor number: once the failed run is sealed
    its descriptor number is free, and another run's journal may get it.
    """

    def __init__(self, writer, error: int) -> None:
        self.real = writer._write
        self.error = error
        self._target: tuple[int, int] | None = None
        self.calls = 0

    def target(self, recorder) -> None:
        """Fail the appends to ``recorder``'s journal."""
        info = os.stat(recorder.journal_path)
        self._target = (info.st_dev, info.st_ino)

    def __call__(self, fd: int, data: memoryview) -> int:
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) != self._target:
            return self.real(fd, data)
        self.calls += 1
        if self.calls == 1 and len(data) > 1:
            return self.real(fd, data[: len(data) // 2])  # a torn write: the kernel took half
        raise OSError(self.error, os.strerror(self.error))


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Callable[[int], Path]]:
    """Mount a real tmpfs of a given size (KiB), and inodes if given: ENOSPC without any injection. Needs root."""
    mounted: list[Path] = []

    def mount(size_kib: int, nr_inodes: int | None = None) -> Path:
        point = tmp_path / f"fs-{uuid.uuid4().hex[:8]}"
        point.mkdir()
        inodes = f",nr_inodes={nr_inodes}" if nr_inodes else ""
        completed = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_kib}k,mode=0700{inodes}", "tmpfs", str(point)],
            capture_output=True, text=True,
        )
        if completed.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (needs root): {completed.stderr.strip()}")
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        subprocess.run(["umount", "-l", str(point)], check=False)
