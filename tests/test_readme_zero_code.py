"""The README's zero-code block, run as written: a real ``openai`` app under ``opentelemetry-instrument``.

The block is read from README.md (so the doc cannot drift from what is tested) and run by bash in
a directory holding ``app.py``, twice: with this checkout's virtualenv on ``PATH`` (as after
``. .venv/bin/activate``), and with a new virtualenv made by the README's install line, as printed
(``/path/to/otel-session`` being this checkout), so the line works with today's releases. Two things are adapted, each checked to be in the block: the collector
listens on a free port instead of 4318 (tests never bind fixed ports; ``--grpc off`` likewise), and
the app reaches a loopback mock LLM through the ``openai`` client's own ``OPENAI_BASE_URL``.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from otel_session.demo.mock_llm import MockLLMServer
from otel_session.bundle.read import BundleStatus, find_bundles, read_bundle

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[1] / "README.md"
MARKER = "<!-- zero-code:"
INSTALL_MARKER = "<!-- zero-code-install:"
CHECKOUT = "/path/to/otel-session"
ROOT = README.parent
HTTP_ADDRESS = "127.0.0.1:4318"
APP = '''
from openai import OpenAI

client = OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY from the environment
reply = client.chat.completions.create(model="mock-gpt", messages=[{"role": "user", "content": "A table for two?"}])
print(reply.choices[0].message.content)
stream = client.chat.completions.create(
    model="mock-gpt", messages=[{"role": "user", "content": "On Friday, please."}], stream=True
)
print("".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices))
'''


def zero_code_block(marker: str = MARKER) -> list[str]:
    """The block's commands, continuation lines joined, comments and blank lines dropped."""
    text = README.read_text()
    start = text.index(marker)
    body = re.search(r"```sh\n(.*?)```", text[start:], re.S)
    assert body is not None, "the zero-code block follows its marker"
    commands, current = [], ""
    for line in body.group(1).splitlines():
        line = re.sub(r"\s+#.*$", "", line).rstrip()
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        if current.strip():
            commands.append(current.strip())
        current = ""
    return commands


def _tree_digest() -> str:
    """A digest of what a non-editable install of this checkout copies (the code and its metadata)."""
    digest = hashlib.sha256()
    for folder in ("otel_session", "collector", "viewer"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    digest.update((ROOT / "pyproject.toml").read_bytes())
    return digest.hexdigest()


def installed_as_printed() -> Path:
    """The bin directory of a virtualenv made by the README's install line, as printed (built once
    per line; this checkout reinstalled when its code changed)."""
    (line,) = zero_code_block(INSTALL_MARKER)
    assert line.startswith("pip install ") and CHECKOUT in line.split(), line
    venv = Path(os.environ.get("OTEL_SESSION_ZERO_CODE_VENV") or ROOT / ".venv-zero-code")
    python, stamp = venv / "bin" / "python", venv / ".installed"
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    wanted, tree = "\n".join([line, *dependencies]) + "\n", _tree_digest()
    pip = [str(python), "-m", "pip", "--disable-pip-version-check", "--quiet"]
    if not (stamp.is_file() and stamp.read_text().startswith(wanted) and python.exists()):
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=300)
        arguments = line.replace(CHECKOUT, str(ROOT)).split()[2:]
        done = subprocess.run([*pip, "install", *arguments], capture_output=True, text=True, timeout=1200)
        assert done.returncode == 0, done.stderr[-3000:]
    elif stamp.read_text() != wanted + tree:  # the code changed (its dependencies did not: they are in ``wanted``)
        done = subprocess.run([*pip, "install", "--no-deps", "--force-reinstall", str(ROOT)],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
    stamp.write_text(wanted + tree)
    return python.parent


@pytest.fixture(params=["checkout venv", "installed as printed"])
def bin_dir(request) -> str:
    return str(Path(sys.executable).parent if request.param == "checkout venv" else installed_as_printed())


def test_the_block_records_the_conversation(tmp_path, bin_dir):
    commands = zero_code_block()
    collect = [command for command in commands if command.startswith("otel-session collect")]
    app = [command for command in commands if "opentelemetry-instrument" in command]
    listing = [command for command in commands if command.startswith("otel-session sessions")]
    assert len(collect) == 1 and collect[0].endswith("&") and len(app) == 1 and HTTP_ADDRESS in app[0]
    assert len(listing) == 1 and len(commands) == 3, commands  # every command of the block is run here
    (tmp_path / "app.py").write_text(APP)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    for name in [name for name in env if name.startswith(("OTEL_", "OPENAI_"))]:
        del env[name]  # the block sets what it needs; nothing of the test's own environment helps it

    collector = subprocess.Popen(
        ["bash", "-c", f"exec {collect[0].rstrip('&').strip()} --grpc off --http 127.0.0.1:0"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        banner = collector.stdout.readline()
        port = re.search(r"http=127\.0\.0\.1:(\d+)", banner)
        assert port, banner + collector.stderr.read()
        with MockLLMServer(port=0) as llm:
            ran = subprocess.run(
                ["bash", "-c", app[0].replace(HTTP_ADDRESS, f"127.0.0.1:{port.group(1)}")],
                cwd=tmp_path, env={**env, "OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "unused"},
                capture_output=True, text=True, timeout=120,
            )
        assert ran.returncode == 0, ran.stderr
        assert "You said: A table for two?" in ran.stdout
        assert "Failed to export" not in ran.stderr, ran.stderr
    finally:
        collector.send_signal(signal.SIGTERM)  # seals every open run
        _, collector_log = collector.communicate(timeout=300)
    assert collector.returncode == 0, collector_log
    listed = subprocess.run(["bash", "-c", listing[0]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0, listed.stderr
    assert "first-try" in listed.stdout, listed.stdout
    # With no code in the app, the facts still have a turn per user message: the ask and the reply.
    facts = subprocess.run(["bash", "-c", "otel-session facts first-try --all-runs --dir ./bundles"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
    assert facts.returncode == 0, facts.stderr
    assert "A table for two?" in facts.stdout and "You said: On Friday, please." in facts.stdout, facts.stdout

    found = [read_bundle(path) for path in find_bundles([tmp_path / "bundles"])]
    assert len(found) == 2, collector_log  # one run per model call: each is a trace of its own
    conversation = []
    for bundle in sorted(found, key=lambda bundle: bundle.manifest["created_at"]):
        assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
        assert bundle.session_id == "first-try"
        roles = {event["message_id"]: event["payload"]["role"] for event in bundle.events if event["type"] == "message_started"}
        conversation += [
            (roles[event["message_id"]], "".join(block["text"] for block in event["payload"]["content"]))
            for event in bundle.events
            if event["type"] == "message_finished"
        ]
    assert conversation == [
        ("user", "A table for two?"),
        ("assistant", "You said: A table for two?"),
        ("user", "On Friday, please."),
        ("assistant", "You said: On Friday, please."),
    ]
