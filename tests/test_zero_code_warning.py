"""Zero code never fails silently: ``opentelemetry-instrument`` with an instrumentor that cannot load
(openai-v2 without ``httpx``, which openai 3.x no longer installs) says so once, naming what to install.
Run in a virtualenv of its own holding exactly that (tests/collector/thirdparty_venv.py builds it once)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.collector.thirdparty_venv import cached_venv

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
APP_LIBRARIES = (
    "openai==3.57.0",
    "opentelemetry-distro>=0.51b0",
    "opentelemetry-instrumentation-openai-v2==2.4b0",
    "opentelemetry-util-genai==1.1b0",
)


def _run(python: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "VIRTUAL_ENV"))}
    env.update(OTEL_TRACES_EXPORTER="none", OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none",
               OTEL_SESSION_DIR=str(tmp_path / "bundles"))
    return subprocess.run([str(python.parent / "opentelemetry-instrument"), str(python), "-c", "import openai"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)


def test_an_instrumentor_that_cannot_load_is_one_warning_naming_the_fix(tmp_path):
    ours = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    python = cached_venv("OTEL_SESSION_NO_HTTPX_VENV", ".venv-no-httpx", (*APP_LIBRARIES, *ours),
                         "openai-v2 without httpx")
    missing = subprocess.run([str(python), "-c", "import httpx"], capture_output=True)
    assert missing.returncode != 0, "the venv must lack httpx, as openai 3.x leaves it"
    ran = _run(python, tmp_path)
    assert ran.returncode == 0, ran.stderr
    warnings = [line for line in ran.stderr.splitlines() if "could not load" in line]
    assert len(warnings) == 1, ran.stderr
    assert "openai (no module named 'httpx': pip install httpx)" in warnings[0]


def test_with_every_dependency_there_is_no_such_warning(tmp_path):
    ran = _run(Path(sys.executable), tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "could not load" not in ran.stderr
