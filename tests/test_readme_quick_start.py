"""The README's quick start, run as written: its Python block in a fresh directory, then the
``otel-session facts`` line printed after it (the blocks are read from README.md, so the doc cannot
drift from what is tested)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from otel_session.bundle.read import BundleStatus, find_bundles, read_bundle

README = Path(__file__).resolve().parents[1] / "README.md"


def _quick_start() -> tuple[str, list[str]]:
    """The section's Python block and the ``otel-session`` commands of its shell blocks."""
    text = README.read_text()
    section = text[text.index("## Quick start"):]
    section = section[: section.index("\n## ", 4) if "\n## " in section[4:] else len(section)]
    section = section[: section.index("### ")]  # up to its first sub-section (zero code)
    (python,) = re.findall(r"```python\n(.*?)```", section, re.S)
    commands = [re.sub(r"\s+#.*$", "", line).strip() for block in re.findall(r"```sh\n(.*?)```", section, re.S)
                for line in block.splitlines() if line.startswith("otel-session ")]
    return python, commands


def test_the_quick_start_records_a_redacted_bundle_and_its_facts(tmp_path):
    python, commands = _quick_start()
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    ran = subprocess.run([sys.executable, "-c", python], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    (bundle,) = [read_bundle(path) for path in find_bundles([tmp_path / "otel-session-data"])]
    assert bundle.status is BundleStatus.COMPLETE and bundle.session_id == "call-42"
    journal = (bundle.path / "events.ndjson").read_text()
    assert "jane@example.com" not in journal and "[email]" in journal  # as the comment in the block says
    facts = [command for command in commands if command.startswith("otel-session facts")]
    assert facts == ["otel-session facts call-42"]
    shown = subprocess.run(["bash", "-c", facts[0]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "ask_date → confirm" in shown.stdout and "date" in shown.stdout
