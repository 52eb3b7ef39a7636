"""A real OTLP backend: the demo's spans, shipped with the standard OTLP/HTTP exporter, in Arize Phoenix.

Phoenix runs on loopback from its own virtualenv (``make test`` installs ``arize-phoenix`` into
``.venv-phoenix`` and passes its ``phoenix`` executable as ``$OTEL_SESSION_PHOENIX_BIN``, so its
~850 MB of dependencies and its pytest plugin stay out of the project's venv). The spans are read
back through Phoenix's own REST and GraphQL APIs: every run's spans carry ``session.id`` (the
openai-v2 ``chat`` spans too, stamped by otel_session), and Phoenix groups them into the demo's
sessions. Measured here: install 53–145 s once per checkout, Phoenix ready in ≈ 18 s, this test ≈ 45 s.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

import orjson
import pytest

from otel_session.demo.driver import PII_CANARIES
from otel_session.demo.stack import free_port
from otel_session.bundle.read import iter_runs

from .conftest import otel_session_cli

pytestmark = [pytest.mark.otlp_backend, pytest.mark.slow]

_PHOENIX = (
    os.environ.get("OTEL_SESSION_PHOENIX_BIN")
    or shutil.which("phoenix", path=str(Path(sys.executable).parent))
    or shutil.which("phoenix")
)


def _get(url: str, *, data: bytes | None = None) -> dict:
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return orjson.loads(response.read())


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    if _PHOENIX is None:
        pytest.skip("arize-phoenix is not installed: `make test` puts it in .venv-phoenix "
                    "(set OTEL_SESSION_PHOENIX_BIN to a phoenix executable to run this alone)")
    port = free_port()
    grpc_port = free_port(exclude=[port])
    workdir = tmp_path_factory.mktemp("phoenix")
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(workdir), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(grpc_port)}
    log = open(workdir / "phoenix.log", "wb")
    process = subprocess.Popen([_PHOENIX, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300  # ≈20 s idle; a loaded machine may take many times that
        while True:
            assert process.poll() is None, (workdir / "phoenix.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(base + "/healthz", timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, "Phoenix was not ready in 300 s"
                time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _spans(base: str) -> list[dict]:
    spans, cursor = [], None
    while True:
        url = f"{base}/v1/projects/default/spans?limit=1000" + (f"&cursor={cursor}" if cursor else "")
        page = _get(url)
        spans += page["data"]
        cursor = page.get("next_cursor")
        if not cursor:
            return spans


def test_phoenix_has_the_demo_spans_grouped_into_its_sessions(phoenix, tmp_path):
    root = tmp_path / "bundles"
    ports = ["--log-dir", str(tmp_path / "logs"), "--viewer-port", "0", "--collector-grpc-port", "0", "--collector-http-port", "0",
             "--agent-port", "0", "--llm-port", "0"]
    done = subprocess.run(
        otel_session_cli("demo", "--once", "--dir", str(root), *ports, "--export-to", f"{phoenix}/v1/traces"),
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    runs = list(iter_runs(root, include_evals=True))
    expected = {(run.session_id, run.run_id) for run in runs}
    assert len(expected) == 7

    deadline = time.monotonic() + 120  # Phoenix ingests asynchronously (generous under load)
    while True:
        spans = _spans(phoenix)
        roots = {(s["attributes"].get("session.id"), s["attributes"].get("otel_session.run.id"))
                 for s in spans if s["parent_id"] is None}
        if expected <= roots or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert expected <= roots

    by_session: dict[str, set[str]] = defaultdict(set)
    for span in spans:
        session_id = span["attributes"].get("session.id")
        assert session_id, f"span {span['name']} has no session.id"
        by_session[session_id].add(span["context"]["trace_id"])
    chat = [s for s in spans if s["attributes"].get("gen_ai.operation.name") == "chat"]
    assert chat and all(s["attributes"]["session.id"] and s["attributes"]["otel_session.run.id"] for s in chat)
    assert {s["attributes"]["gen_ai.provider.name"] for s in chat} == {"openai"}  # openai-v2's own spans

    query = "{ projects { edges { node { name sessions(first: 100) { edges { node { sessionId numTraces } } } } } } }"
    answer = _get(f"{phoenix}/graphql", data=orjson.dumps({"query": query}))
    [project] = [edge["node"] for edge in answer["data"]["projects"]["edges"] if edge["node"]["name"] == "default"]
    sessions = {edge["node"]["sessionId"]: edge["node"]["numTraces"] for edge in project["sessions"]["edges"]}
    runs_per_session: dict[str, int] = defaultdict(int)
    for session_id, _ in expected:
        runs_per_session[session_id] += 1
    assert sessions == dict(runs_per_session)

    exported = orjson.dumps(spans)
    assert PII_CANARIES[0].encode() not in exported  # redacted before it left the agent
