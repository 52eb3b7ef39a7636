"""normalize/codec.py: one table spells every own record both ways, and the API and the collector
path both go through it (the API's journal equals the decode of the spans it exported)."""

from __future__ import annotations

import pytest

import otel_session
from otel_session.core.journal import EventType
from otel_session.normalize import SdkSpan, normalize_span
from otel_session.normalize.codec import EVENT_NAMES, SPAN_EVENTS, decode, encode
from otel_session.testing import capture_bundle

# One payload per record type the codec spells, as the API journals it (every optional key set).
PAYLOADS = {
    "slot_write": {"slot": "date", "value": {"d": [1, "x"]}, "previous": None, "source": "nlu"},
    "slot_diff": {"slot": "date", "value": "Friday", "previous": "Thursday"},
    "guard_evaluated": {"name": "has_date", "passed": False, "state": "ask_date"},
    "transition_verdict": {"from": "a", "to": None, "reason": "why", "candidates": [{"to": "b"}],
                           "candidates_truncated": 3},
    "assistant_delta": {"index": 1, "kind": "thinking", "delta": "hm"},
    "tool_execution_updated": {"detail": "half way"},
    "run_started": {"kind": "eval", "agent": "booking", "eval_id": "e1"},
    "run_finished": {"status": "interrupted"},
    "turn_started": {"state": "greet", "required_slots": ["date"], "source": "voice"},
    "turn_finished": {"state": "done", "required_slots": [], "missing_required_slots": ["date"], "interrupted": True,
                      "guards_truncated": 2},
    "message_started": {"role": "assistant"},
    "message_finished": {"settled": False, "content": [{"index": 0, "kind": "text", "text": "hi"}],
                         "stop_reason": "length"},
    "tool_execution_started": {"name": "lookup", "arguments": {"q": [1, 2]}},
    "tool_execution_finished": {"status": "ok", "result": {"free": True}},
}


@pytest.mark.parametrize("event_type", sorted(EVENT_NAMES))
def test_every_record_type_round_trips(event_type):
    payload = PAYLOADS[event_type]
    attributes = encode(event_type, payload)
    assert all(value is not None for value in attributes.values())  # valid OpenTelemetry attribute values
    assert decode(event_type, attributes) == payload
    assert list(decode(event_type, attributes)) == list(payload)  # same key order: the same journal line


def test_the_table_covers_the_own_records_and_names_each_span_event_once():
    assert set(PAYLOADS) == set(EVENT_NAMES)
    assert {SPAN_EVENTS[name] for name in EVENT_NAMES.values() if name} == {t for t, n in EVENT_NAMES.items() if n}
    assert EVENT_NAMES[EventType.ASSISTANT_DELTA.value] == "otel_session.delta"


def test_optional_fields_are_left_out_both_ways():
    assert encode("guard_evaluated", {"name": "g", "passed": True}) == {
        "otel_session.guard.name": "g", "otel_session.guard.passed": True,
    }
    assert decode("guard_evaluated", {"otel_session.guard.name": "g", "otel_session.guard.passed": True}) == {
        "name": "g", "passed": True,
    }
    # a span that lacks a field decodes to its default, or to what the span itself says
    assert decode("assistant_delta", {}) == {"index": 0, "kind": "text", "delta": ""}
    assert decode("run_finished", {}, {"status": "error"}) == {"status": "error"}


def test_a_run_interrupted_by_shutdown_reads_interrupted_on_both_paths():
    """The run's status travels on its span: the collector's decode says ``interrupted`` like the
    journal (it said ``ok``, from the span status, before)."""
    with capture_bundle() as captured:
        with otel_session.session("s"), otel_session.run(agent="a"):
            captured.recorder.shutdown()  # recording stops with the run open
    journal = [event["payload"] for event in captured.bundle.events if event["type"] == "run_finished"]
    root = next(span for span in captured.spans if span.name == "invoke_agent a")
    decoded = [e.payload for e in normalize_span(SdkSpan(root)) if e.type == "run_finished"]
    assert journal == decoded == [{"status": "interrupted"}]
