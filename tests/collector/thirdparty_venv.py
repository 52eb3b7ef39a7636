"""A virtualenv of its own for the third-party GenAI instrumentations (built once, then cached).

OpenInference's and Traceloop's packages register ``opentelemetry_instrumentor`` entry points
(their openai instrumentors among them), which ``opentelemetry-instrument`` would load beside
openai-v2 in every other test: they live in ``.venv-thirdparty`` (``$OTEL_SESSION_THIRDPARTY_VENV``),
never in ``.venv``. otel_session is installed there from this tree (editable, so it runs the code
under test). The venv is built once and reused while the hash of its pins (``REQUIREMENTS`` and the
tree installed) is the one in its stamp; a change rebuilds it. A lock beside it lets parallel test
workers (pytest-xdist) wait for one build instead of building it twice at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

def _own_dependencies() -> tuple[str, ...]:
    """otel_session's dependencies but OpenTelemetry's (each venv pins its SDK): what installing this
    tree with ``--no-deps`` needs beside it, read from pyproject.toml so a new one is never missed."""
    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]
    return tuple(requirement for requirement in project["dependencies"] if not requirement.startswith("opentelemetry"))


OWN_DEPENDENCIES = _own_dependencies()

REQUIREMENTS = (
    "openai==3.57.0",
    "httpx>=0.27",
    "opentelemetry-sdk==1.45.1",
    "opentelemetry-exporter-otlp-proto-grpc==1.45.1",
    "openinference-instrumentation-openai==0.1.66",
    "openinference-instrumentation-openai-agents==2.6.0",
    "openai-agents==0.24.0",
    "openinference-instrumentation-langchain==0.1.80",
    "langchain-core==1.8.3",
    "langchain-openai==1.7.4",
    "traceloop-sdk==0.62.4",
    "opentelemetry-instrumentation-openai==0.62.4",
    *OWN_DEPENDENCIES,
)


# The agent frameworks of tests/frameworks (fixtures/frameworks), one venv each: their pins clash
# with ours and with each other's (openai 2 vs 3, the OTel SDK version). ``name → (variable, venv,
# requirements)``; the versions are those the fixtures were recorded with.
_FRAMEWORK_BASE = OWN_DEPENDENCIES
FRAMEWORK_VENVS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "smolagents": ("OTEL_SESSION_SMOLAGENTS_VENV", ".venv-fw-smolagents", (
        "smolagents[openai]==1.26.0",
        "openinference-instrumentation-smolagents==0.1.43",
        "openinference-instrumentation==0.1.72",
        "openai==3.57.0",
        "opentelemetry-sdk==1.45.2",
        "opentelemetry-exporter-otlp-proto-grpc==1.45.2",
        *_FRAMEWORK_BASE,
    )),
    "strands": ("OTEL_SESSION_STRANDS_VENV", ".venv-fw-strands", (
        "strands-agents[openai,otel]==1.62.0",
        "openai==2.54.0",
        "opentelemetry-sdk==1.45.1",
        "opentelemetry-exporter-otlp-proto-grpc==1.45.1",
        *_FRAMEWORK_BASE,
    )),
    "llamaindex": ("OTEL_SESSION_LLAMAINDEX_VENV", ".venv-fw-llamaindex", (
        "llama-index-core==0.14.25",
        "llama-index-llms-openai-like==0.8.1",
        "openinference-instrumentation-llama-index==4.6.1",
        "openinference-instrumentation==0.1.72",
        "openai==2.54.0",
        "opentelemetry-sdk==1.45.2",
        "opentelemetry-exporter-otlp-proto-grpc==1.45.2",
        *_FRAMEWORK_BASE,
    )),
    "autogen": ("OTEL_SESSION_AUTOGEN_VENV", ".venv-fw-autogen", (
        "autogen-agentchat==0.7.5",
        "autogen-ext[openai]==0.7.5",
        "openinference-instrumentation-autogen-agentchat==0.1.22",
        "openinference-instrumentation==0.1.72",
        "openai==3.57.0",
        "opentelemetry-sdk==1.45.2",
        "opentelemetry-exporter-otlp-proto-grpc==1.45.2",
        *_FRAMEWORK_BASE,
    )),
    "adk": ("OTEL_SESSION_ADK_VENV", ".venv-fw-adk", (
        "google-adk==2.13.0",
        "litellm==1.110.2",
        "openai==3.57.0",
        "opentelemetry-sdk==1.44.0",
        "opentelemetry-exporter-otlp-proto-grpc==1.44.0",
        *_FRAMEWORK_BASE,
    )),
    "pydanticai": ("OTEL_SESSION_PYDANTICAI_VENV", ".venv-fw-pydanticai", (
        "pydantic-ai-slim[openai]==2.68.0",
        "openai==3.57.0",
        "opentelemetry-sdk==1.45.2",
        "opentelemetry-exporter-otlp-proto-grpc==1.45.2",
        *_FRAMEWORK_BASE,
    )),
    # LiteLLM's streams (tests/instrument/test_litellm_streams.py), traced by OpenInference's LiteLLM
    # instrumentor under opentelemetry-instrument (its opentelemetry_instrumentor entry point).
    "litellm": ("OTEL_SESSION_LITELLM_VENV", ".venv-fw-litellm", (
        "litellm==1.110.2",
        "openinference-instrumentation-litellm==0.1.51",
        "openinference-instrumentation==0.1.72",
        "openai==3.57.0",
        "opentelemetry-sdk==1.45.2",
        "opentelemetry-exporter-otlp-proto-grpc==1.45.2",
        "opentelemetry-distro==0.66b2",
        *_FRAMEWORK_BASE,
    )),
}


def framework_python(name: str) -> Path:
    """The python of the venv of ``FRAMEWORK_VENVS[name]`` (built once; skips the test when it cannot be)."""
    variable, venv, requirements = FRAMEWORK_VENVS[name]
    return cached_venv(variable, venv, requirements, name)


def thirdparty_python() -> Path:
    """The venv's python, installing it first if needed (skips the test when that fails)."""
    return cached_venv("OTEL_SESSION_THIRDPARTY_VENV", ".venv-thirdparty", REQUIREMENTS,
                       "the third-party instrumentations")


def cached_venv(variable: str, name: str, requirements: tuple[str, ...], purpose: str) -> Path:
    """The python of a venv of its own (``$variable``, else ``name`` at the repository's root) with
    ``requirements`` and otel_session from this tree, built once (skips the test when that fails)."""
    root = Path(__file__).resolve().parents[2]
    venv = Path(os.environ.get(variable) or root / name)
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    pins = hashlib.sha256("\n".join([*requirements, f"-e {root}"]).encode()).hexdigest()
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker building it: wait for its build
        if stamp.is_file() and stamp.read_text().strip() == pins and python.exists():
            return python
        steps = [[sys.executable, "-m", "venv", "--clear", str(venv)],
                 [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirements],
                 [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "-e", str(root)]]
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, timeout=900)
            if done.returncode != 0:
                pytest.skip(f"could not build {venv} for {purpose}: {done.stderr[-2000:]}")
        stamp.write_text(pins + "\n")
        return python
