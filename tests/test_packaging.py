"""The package builds without warnings of our own making, and ships the viewer's files."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPOSITORY = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "otel_session", "collector", "viewer")


def test_the_wheel_builds_quietly_and_carries_the_viewer(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in SOURCES:  # a copy: the build writes build/ and *.egg-info beside the sources
        source = REPOSITORY / name
        if source.is_dir():
            shutil.copytree(source, tree / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(source, tree / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path / "dist"), str(tree)],
        capture_output=True, text=True, timeout=300,
    )
    assert built.returncode == 0, built.stderr
    ours = [line for line in (built.stdout + built.stderr).splitlines() if "BuildBackendWarning" in line or "Deprecat" in line]
    assert ours == []
    (wheel,) = (tmp_path / "dist").glob("otel_session-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for data in ("viewer/static/viewer.css", "viewer/static/reducer.js", "viewer/templates/base.html", "collector/gateway.yaml"):
        assert f"otel_session/{data}" in names
