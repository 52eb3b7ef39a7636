"""``otel-session demo`` without ``--once``: serves until Ctrl-C, then stops every child cleanly."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.request

import orjson
import pytest

from .conftest import otel_session_cli

pytestmark = pytest.mark.slow


def _children_of(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.add(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_serves_until_ctrl_c_then_leaves_no_process(tmp_path):
    stack = subprocess.Popen(  # every port 0: the stack picks them (again, when one was taken meanwhile)
        otel_session_cli("demo", "--dir", str(tmp_path / "bundles"), "--log-dir", str(tmp_path / "logs"),
                         "--viewer-port", "0", "--collector-grpc-port", "0", "--collector-http-port", "0",
                         "--agent-port", "0", "--llm-port", "0"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )
    try:
        lines = []
        for line in stack.stdout:  # the summary ends with the Ctrl-C hint
            lines.append(line)
            if "Ctrl-C stops everything" in line:
                break
        summary = "".join(lines)
        viewer = int(re.search(r"viewer +http://127\.0\.0\.1:(\d+)/", summary)[1])
        agent = int(re.search(r"agent +http://127\.0\.0\.1:(\d+) ", summary)[1])
        children = _children_of(stack.pid)
        assert len(children) == 4  # collector, viewer, mock LLM, agent
        with urllib.request.urlopen(f"http://127.0.0.1:{viewer}/api/sessions", timeout=5) as response:
            assert len(orjson.loads(response.read())["sessions"]) == 4  # live sessions; the eval is apart
        call = urllib.request.Request(
            f"http://127.0.0.1:{agent}/calls", data=b'{"utterances": ["hi", "friday"]}',
            headers={"X-Session-Id": "me", "Content-Type": "application/json"}, method="POST",
        )
        with urllib.request.urlopen(call, timeout=10) as response:
            assert response.headers["X-Run-Id"].startswith("run-")
        stack.send_signal(signal.SIGINT)
        assert stack.wait(30) == 0, stack.stderr.read()
        deadline = time.monotonic() + 30  # generous: a loaded machine may take a while to reap them
        while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in children if _alive(pid)]
    finally:
        if stack.poll() is None:
            stack.kill()
            stack.wait()
