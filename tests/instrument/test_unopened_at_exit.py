"""A short script that records in process with only ``configure(tracer_provider=…)`` and exits
without ``shutdown()``: the spans no run opened, still in the unopened processor's batch at exit,
are bundled (the recorder drains them before the writer's own exit drain shuts the writer)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from otel_session.testing import bundles

SCRIPT = textwrap.dedent("""
    import sys
    from opentelemetry.sdk.trace import TracerProvider
    import otel_session

    provider = TracerProvider()   # the SDK shuts it down at exit, after the recorder
    otel_session.configure(sys.argv[1], tracer_provider=provider)
    attributes = {"session.id": "short-script", "gen_ai.operation.name": "chat",
                  "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]'}
    with provider.get_tracer("app").start_as_current_span("chat", attributes=attributes):
        pass
""")


def test_spans_still_batched_at_exit_are_bundled(tmp_path):
    root = tmp_path / "bundles"
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(root)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "spans not bundled" not in done.stderr
    (bundle,) = bundles(root)
    assert bundle.session_id == "short-script" and bundle.capture["status"] == "complete"
    assert [e["type"] for e in bundle.events] == ["run_started", "message_started", "message_finished", "run_finished"]
