"""Fixtures for the demo area: free loopback ports and the stack's command line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from otel_session.demo.stack import free_port

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def free_ports():
    """A function returning ``n`` distinct free loopback ports."""

    def pick(n: int) -> list[int]:
        ports: list[int] = []
        while len(ports) < n:
            ports.append(free_port(exclude=ports))
        return ports

    return pick


def otel_session_cli(*args: str) -> list[str]:
    """The installed command line, run by this interpreter (no PATH lookup)."""
    return [sys.executable, "-c", "from otel_session.cli import main; main(prog_name='otel-session')", *args]
