"""Start-up cost of ``opentelemetry-instrument`` with the project's instrumentors (issue 29).

``python -m bench.startup [--repeats N]`` measures, in one run, the CPU seconds (user + system) a
child process spends on ``python -c "import openai"`` (``resource.getrusage(RUSAGE_CHILDREN)``):

- ``plain``: no instrumentation (the baseline);
- ``instrumented_project``: under ``opentelemetry-instrument`` with the project's instrumentors
  (``otel_session``, ``otel_session_agents``, ``otel_session_langgraph``) and every other installed
  instrumentor disabled. Target: at most 1.3× plain, with every optional framework installed and
  none imported by the app;
- ``instrumented_all``: every installed instrumentor on (other projects' too: an instrumentor that
  imports its framework when it instruments, as OpenInference's anthropic one does, costs that
  import here);
- ``instrumented_none``: every instrumentor disabled and no exporter: OpenTelemetry's own start-up
  (the distro, the SDK, reading the entry points), the floor of the two above; what the project's
  instrumentors and exporter add is ``instrumented_project`` minus this.

The exporter is the project's (``OTEL_TRACES_EXPORTER=otel_session``, bundles in a temporary
directory; metrics and logs ``none``; ``instrumented_none``: ``none``): nothing tries the network. The variants alternate for N
rounds (default 5), so load drift hits all alike; each figure is the median. A last child per
variant lists the optional frameworks its start-up imported although the app imported none.
Writes ``bench/results-startup.json`` (the ``bench`` harness format) and prints one line per figure.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from importlib.metadata import entry_points
from pathlib import Path

from bench import Figure, write_results

TARGET_RATIO = 1.3
PROJECT_DISTRIBUTION = "otel-session"
FRAMEWORKS = ("openai", "anthropic", "agents", "langgraph", "langchain_core", "flask")
APP = "import openai"
IMPORTED = f"import json, sys; print(json.dumps([m for m in {FRAMEWORKS!r} if m in sys.modules]))"


def _instrumentors() -> dict[str, str]:
    """Installed ``opentelemetry_instrumentor`` entry points: name → distribution."""
    return {point.name: point.dist.name if point.dist else "?" for point in entry_points(group="opentelemetry_instrumentor")}


def _launcher() -> str:
    beside = Path(sys.executable).with_name("opentelemetry-instrument")
    found = str(beside) if beside.exists() else shutil.which("opentelemetry-instrument")
    if found is None:
        raise SystemExit("opentelemetry-instrument is not installed (make venv installs it with .[test])")
    return found


def _variants(bundle_dir: str) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Each variant's command prefix and environment."""
    instrumentors = _instrumentors()
    others = sorted(name for name, dist in instrumentors.items() if dist != PROJECT_DISTRIBUTION)
    base = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    otel = {**base, "OTEL_SESSION_DIR": bundle_dir, "OTEL_TRACES_EXPORTER": "otel_session",
            "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"}
    launcher = [_launcher(), sys.executable]
    return {
        "plain": ([sys.executable], base),
        "instrumented_project": (launcher, {**otel, "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": ",".join(others)}),
        "instrumented_all": (launcher, otel),
        "instrumented_none": (launcher, {**otel, "OTEL_TRACES_EXPORTER": "none",
                                         "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": ",".join(sorted(instrumentors))}),
    }


def _cpu_seconds(command: list[str], env: dict[str, str]) -> float:
    """User + system CPU seconds of one child running ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _imported(command: list[str], env: dict[str, str]) -> list[str]:
    done = subprocess.run([*command, "-c", IMPORTED], env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(repeats: int = 5) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as bundle_dir:
        variants = _variants(bundle_dir)
        samples: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(repeats):
            for name, (command, env) in variants.items():
                samples[name].append(_cpu_seconds([*command, "-c", APP], env))
        imported = {name: _imported(command, env) for name, (command, env) in variants.items()}
    medians = {name: round(statistics.median(values), 3) for name, values in samples.items()}
    plain = medians["plain"]
    project_ratio = medians["instrumented_project"] / plain
    figures = [
        Figure("startup.plain", plain, "s cpu", note=f"python -c {APP!r}, median of {repeats}"),
        Figure("startup.instrumented_project", medians["instrumented_project"], "s cpu", baseline=plain,
               target=f"<= {TARGET_RATIO}x plain", ok=project_ratio <= TARGET_RATIO,
               note="opentelemetry-instrument, the project's instrumentors only"),
        Figure("startup.instrumented_all", medians["instrumented_all"], "s cpu", baseline=plain,
               note="every installed instrumentor; imported at start-up: "
                    + (", ".join(imported["instrumented_all"]) or "none")),
        Figure("startup.instrumented_none", medians["instrumented_none"], "s cpu", baseline=plain,
               note="every instrumentor disabled, no exporter: OpenTelemetry's own start-up"),
    ]
    details = {
        "app": APP,
        "repeats": repeats,
        "samples_s_cpu": samples,
        "frameworks_imported_at_start_up": imported,
        "frameworks_installed": [name for name in FRAMEWORKS if importlib.util.find_spec(name) is not None],
        "instrumentors": _instrumentors(),
        "project_share_s_cpu": round(medians["instrumented_project"] - medians["instrumented_none"], 3),
    }
    result = write_results("startup", figures, details)
    print(f"frameworks imported at start-up (the app imports openai only): {imported}")
    print(f"the project's instrumentors and exporter over OpenTelemetry's own start-up: "
          f"{details['project_share_s_cpu']} s cpu")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    main(parser.parse_args().repeats)
