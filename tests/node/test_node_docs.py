"""docs/nodejs.md as printed: its install line in a new app folder, then its example app, exporting
to a real ``otel-session collect``, streams from the mock LLM and records the reply's deltas."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from .node_deps import ROOT

pytestmark = pytest.mark.slow

DOC = ROOT / "docs" / "nodejs.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_docs_install_line_and_example_record_the_deltas(collect, llm, tmp_path):
    install, run = _blocks("sh")[:2]
    example = DOC.read_text().split("<!-- the example: tests/node/test_node_docs.py runs it as printed -->\n```js\n")[1]
    example = example.split("```", 1)[0]
    app = tmp_path / "my-app"
    app.mkdir()
    (app / "js").symlink_to(ROOT / "js", target_is_directory=True)  # ./js/otel-session, as in the checkout
    done = subprocess.run(["bash", "-ec", install], cwd=app, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    (app / "app.mjs").write_text(example)

    assert run.strip() == "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 node app.mjs"
    env = {**os.environ, "OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "unused",
           "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collect.http_port}"}
    done = subprocess.run(["node", "app.mjs"], cwd=app, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == "You said: Where is my order?"

    (bundle,) = collect.sealed()
    assert bundle.session_id == "support-4711"
    deltas = [e["payload"]["delta"] for e in bundle.events if e["type"] == "assistant_delta"]
    assert deltas == ["You ", "said: ", "Where ", "is ", "my ", "order?"]
