"""The Node.js packages of tests/node, installed once with npm into a directory of their own.

``tests/node/package.json`` pins the Vercel AI SDK (``ai``, ``@ai-sdk/otel``, its OpenAI providers),
``openai``, the OpenTelemetry Node SDK and both OTLP/HTTP exporters, and this repository's
``js/otel-session`` (``file:``); ``package-lock.json`` beside it locks the whole tree. They are
installed with ``npm ci --install-links`` (the local package copied in, as a published one would
be) into ``.node-thirdparty/`` at the repository's root (the lock's ``file:../js/otel-session``
is relative to it), and reinstalled only when the hash of the two files and of ``js/otel-session``
changes. A lock beside it makes a second test worker wait for the first one's install.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PACKAGE = ROOT / "js" / "otel-session"
INSTALL_DIR = ROOT / ".node-thirdparty"
_MANIFESTS = ("package.json", "package-lock.json")


def _pins() -> str:
    digest = hashlib.sha256()
    sources = [HERE / name for name in _MANIFESTS]
    sources += sorted(path for path in PACKAGE.rglob("*") if path.is_file() and "node_modules" not in path.parts)
    for path in sources:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def node_modules() -> Path:
    """The installed ``node_modules`` (installing it first when its pins changed)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail("node and npm are needed (make test installs Debian's nodejs and npm)")
    stamp = INSTALL_DIR / ".installed"
    pins = _pins()
    with open(ROOT / ".node-thirdparty.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker installing: wait for it
        if stamp.is_file() and stamp.read_text().strip() == pins and (INSTALL_DIR / "node_modules").is_dir():
            return INSTALL_DIR / "node_modules"
        shutil.rmtree(INSTALL_DIR, ignore_errors=True)
        INSTALL_DIR.mkdir()
        for name in _MANIFESTS:
            shutil.copyfile(HERE / name, INSTALL_DIR / name)
        done = subprocess.run(["npm", "ci", "--install-links", "--no-audit", "--no-fund", "--loglevel=error"],
                              cwd=INSTALL_DIR, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            pytest.fail(f"npm ci in {INSTALL_DIR} failed: {done.stderr[-3000:]}")
        stamp.write_text(pins + "\n")
        return INSTALL_DIR / "node_modules"
