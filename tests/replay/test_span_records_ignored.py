"""Readers that do not use ``span`` records are not changed by them: facts, turn summaries, replay
states, the catalog's row and integrity read a run recorded with them as the same run without."""

from __future__ import annotations

import dataclasses

import otel_session
from otel_session.bundle.read import BundleStatus
from otel_session.catalog.rows import row_of, sealed_row
from otel_session.replay.facts import build_session_facts
from otel_session.replay.fold import replay_state
from otel_session.replay.turns import turn_summaries
from otel_session.testing import capture_bundle


def _record(root) -> object:
    with capture_bundle(root) as captured:
        with otel_session.session("ignored"), otel_session.run(agent="booking"):
            for index in range(2):
                with otel_session.turn(index, state="ask", required_slots=["email"]) as turn:
                    with otel_session.message("user") as message:
                        message.text("hi")
                    otel_session.slot_write("email", "x")
                    otel_session.guard("has_email", passed=index == 1)
                    with otel_session.tool_execution("lookup", arguments={}) as tool:
                        tool.finish({"ok": 1})
                    with otel_session.message("assistant") as message:
                        message.delta("ok")
                    turn.finish(state="done" if index else "ask")
    return captured.bundle


def test_readers_read_a_run_with_span_records_as_the_run_without(monkeypatch, tmp_path):
    monkeypatch.setenv("OTEL_SESSION_SPAN_RECORDS", "on")
    bundle = _record(tmp_path / "root")
    assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
    spans = [event for event in bundle.events if event["type"] == "span"]
    assert len(spans) == 9  # the run, and each turn with its 2 messages and its tool
    without = dataclasses.replace(bundle, events=[event for event in bundle.events if event["type"] != "span"])
    facts, facts_without = build_session_facts(bundle), build_session_facts(without)
    assert facts.pop("event_count") == len(bundle.events)
    facts_without.pop("event_count")
    assert facts == facts_without
    assert turn_summaries(bundle.events) == turn_summaries(without.events)
    for span in spans:  # the state after a span record is the state before it
        before = replay_state(bundle.events, span["seq"] - 1)
        after = replay_state(bundle.events, span["seq"])
        assert {**after, "seq": before["seq"]} == before
    for row in (row_of(tmp_path / "root", bundle.path), sealed_row(tmp_path / "root", bundle.path)):
        assert (row.turns, row.messages, row.tool_calls, row.status, row.integrity) == (2, 4, 2, "ok", "complete"), row
