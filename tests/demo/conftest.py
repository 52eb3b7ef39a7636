"""Helpers for the demo tests: the stack's command line."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def otel_session_cli(*args: str) -> list[str]:
    """The installed command line, run by this interpreter (no PATH lookup)."""
    return [sys.executable, "-c", "from otel_session.cli import main; main(prog_name='otel-session')", *args]
