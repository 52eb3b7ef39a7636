"""A viewer following a collector run live learns when its seal re-sequenced the journal."""

from __future__ import annotations

import json

from otel_session.collector.sink import BundleSink
from otel_session.normalize import SpanData
from otel_session.viewer import create_app
from otel_session.bundle.write import BundleWriter

T0 = 1_764_453_121_000_000_000


def _span(span_id, parent, start, end, **attributes):
    return SpanData(trace_id=0xF011, span_id=span_id, parent_span_id=parent, name=f"span {span_id}",
                    start_time_ns=start, end_time_ns=end, attributes={"session.id": "follow", **attributes})


def _messages(chunks):
    """Parse SSE bytes into (event, data) pairs."""
    out = []
    for block in b"".join(chunks).decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(":"))
        if "data" in fields:
            out.append((fields.get("event", "message"), json.loads(fields["data"])))
    return out


def test_the_stream_says_resequenced_when_the_seal_renumbered_what_it_sent(tmp_path, redactor):
    writer = BundleWriter(tmp_path)
    sink = BundleSink(writer, redactor, seal_after_s=3600)
    late_tool = _span(3, 1, T0 + 5_000, T0 + 6_000, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "b"})
    early_tool = _span(2, 1, T0 + 1_000, T0 + 2_000, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "a"})
    assert sink.submit([late_tool]).rejected == 0  # arrives first, happened last
    assert writer.force_flush()
    (recorder,) = writer.open_runs

    app = create_app({"BUNDLE_DIR": str(tmp_path), "TESTING": True, "STREAM_POLL_SECONDS": 0.01})
    response = app.test_client().get(f"/api/sessions/follow/runs/{recorder.run_id}/stream")
    stream = iter(response.response)
    chunks = [next(stream), next(stream)]  # retry, then the journal so far and the capture
    live = _messages(chunks)
    assert [data["tool_call_id"] for event, data in live if event == "message"] == ["0000000000000003"] * 2

    assert sink.submit([early_tool, _span(1, None, T0, T0 + 10_000)]).rejected == 0
    sink.seal_all()
    writer.shutdown()
    rest = _messages(list(stream))
    events = [event for event, _ in rest]
    assert events[-2:] == ["resequenced", "end"], events


def test_a_run_sealed_in_append_order_is_not_announced_as_resequenced(tmp_path, redactor):
    writer = BundleWriter(tmp_path)
    sink = BundleSink(writer, redactor, seal_after_s=3600)
    assert sink.submit([_span(1, None, T0, T0 + 10_000)]).rejected == 0
    (recorder,) = sink.seal_all()
    writer.shutdown()
    app = create_app({"BUNDLE_DIR": str(tmp_path), "TESTING": True, "STREAM_POLL_SECONDS": 0.01})
    response = app.test_client().get(f"/api/sessions/follow/runs/{recorder.run_id}/stream")
    events = [event for event, _ in _messages(list(response.response))]
    assert "resequenced" not in events and events[-1] == "end"
