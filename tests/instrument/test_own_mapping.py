"""normalize/own.py: the project's own spans map back to the journal the API wrote live."""

from __future__ import annotations

import otel_session
from otel_session.normalize import SdkSpan, normalize_span
from otel_session.normalize.own import is_own_span
from otel_session.testing import capture_bundle

from .test_api import POLICY, booking_run

_COMPARED = ("type", "payload", "turn_index", "message_id", "tool_call_id", "trace_id", "span_id")


def _comparable(records):
    return sorted(
        (tuple(str(record.get(key)) for key in _COMPARED) for record in records),
    )


def _mapped(spans):
    events = []
    for span in spans:
        data = SdkSpan(span)
        assert is_own_span(data)
        events.extend(
            {"type": e.type, "payload": e.payload, **{k: v for k, v in e.correlation().items() if k != "at_ns"}}
            for e in normalize_span(data)
        )
    return events


def test_spans_map_to_the_same_journal():
    with capture_bundle(redaction=POLICY) as captured:
        booking_run(stream=["a", "b", "c"])
        with otel_session.session("s2"), otel_session.run(agent="x", kind="eval", eval_id="e"):
            with otel_session.turn(1, state="s", required_slots=["a"], source="voice"):
                for number in range(30):
                    otel_session.guard(f"g{number}", passed=True, state="s")
                otel_session.transition("s", None, reason="why", candidates=[{"to": "t"}] * 25)
                with otel_session.tool_execution("t", arguments=None) as tool:
                    tool.update("half way")
                    tool.finish(error="failed")
    journal = [event for bundle in captured.bundles for event in bundle.events]
    assert _comparable(_mapped(captured.spans)) == _comparable(journal)


def test_event_limit_loss_is_reported_as_upstream_drop():
    with capture_bundle() as captured:
        with otel_session.session("s"), otel_session.run(agent="a"):
            with otel_session.message("assistant") as m:
                for number in range(300):
                    m.delta("abcdefghij"[number % 10])
    span = next(span for span in captured.spans if span.name == "message assistant")
    events = normalize_span(SdkSpan(span))
    assert sum(e.type == "assistant_delta" for e in events) == 128
    drop = [e for e in events if e.type == "upstream_drop"]
    assert drop and drop[0].payload["dropped_events"] == 172  # 300 deltas, one event each
    # the final content is carried whole, whatever the event limit
    finished = next(e for e in events if e.type == "message_finished")
    assert len(finished.payload["content"][0]["text"]) == 300


def test_foreign_spans_are_not_own(provider, exporter):
    with provider.get_tracer("opentelemetry.instrumentation.openai_v2").start_as_current_span("chat gpt-4o"):
        pass
    data = SdkSpan(exporter.get_finished_spans()[0])
    assert not is_own_span(data)
