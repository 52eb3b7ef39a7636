"""The public API: span shapes and attributes (in-memory exporter) and the journal (capture_bundle)."""

from __future__ import annotations

import logging
import uuid

import pytest
from opentelemetry import trace
from opentelemetry.trace import StatusCode

import otel_session
from otel_session.bundle.read import BundleStatus
from otel_session.testing import capture_bundle

from .conftest import spans_by_name

POLICY = otel_session.RedactionPolicy(keep_slots={"party_size"})


def booking_run(stream=("Hel", "lo!")):
    """The issue's example conversation; returns the run id."""
    slots = {}
    with otel_session.session("call-42"):
        with otel_session.run(agent="booking") as run:
            with otel_session.turn(
                0, state="ask_date", required_slots=["date", "party_size"], slots=slots
            ) as turn:
                with otel_session.message("user") as m:
                    m.text("table for 2 on Friday")
                otel_session.slot_write("party_size", 2, source="nlu")
                slots["date"] = "2026-12-04"
                otel_session.guard("date_present", passed=True)
                with otel_session.tool_execution(
                    "check_availability", call_id="c1", arguments={"date": "2026-12-04"}
                ) as tool:
                    tool.update()
                    tool.finish(result={"free": True})
                with otel_session.message("assistant") as m:
                    for chunk in stream:
                        m.delta(chunk)
                otel_session.transition("ask_date", "confirm", reason="slots filled", candidates=["confirm"])
                turn.finish(state="confirm")
            return run.run_id


def test_span_tree_and_attributes(recorder, exporter):
    run_id = booking_run()
    spans = spans_by_name(exporter)
    assert set(spans) == {
        "invoke_agent booking",
        "turn 0",
        "message user",
        "message assistant",
        "execute_tool check_availability",
    }
    root = spans["invoke_agent booking"]
    assert root.parent is None
    assert run_id == "run-" + str(uuid.UUID(int=root.context.trace_id))
    assert {span.context.trace_id for span in spans.values()} == {root.context.trace_id}
    assert spans["turn 0"].parent.span_id == root.context.span_id
    for name in ("message user", "message assistant", "execute_tool check_availability"):
        assert spans[name].parent.span_id == spans["turn 0"].context.span_id
    for span in spans.values():
        assert span.attributes["session.id"] == "call-42"
        assert span.attributes["gen_ai.conversation.id"] == "call-42"
        assert span.attributes["otel_session.run.id"] == run_id
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == "booking"
    assert root.attributes["otel_session.run.kind"] == "live"
    turn = spans["turn 0"]
    assert turn.attributes["otel_session.state.previous"] == "ask_date"
    assert turn.attributes["otel_session.state"] == "confirm"
    assert list(turn.attributes["otel_session.required_slots"]) == ["date", "party_size"]
    assert list(turn.attributes["otel_session.missing_required_slots"]) == []
    assert [event.name for event in turn.events] == [
        "otel_session.slot_write",
        "otel_session.guard",
        "otel_session.transition_verdict",
        "otel_session.slot_diff",
    ]
    tool = spans["execute_tool check_availability"]
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "check_availability"
    assert tool.attributes["gen_ai.tool.call.id"] == "c1"
    assert tool.attributes["gen_ai.tool.call.arguments"] == '{"date":"2026-12-04"}'
    assert tool.attributes["gen_ai.tool.call.result"] == '{"free":true}'
    assert [event.name for event in tool.events] == ["otel_session.tool_update"]
    assistant = spans["message assistant"]
    # One event per delta, each with its own (redacted) text, released once a later delta or the
    # message's end shows the word is whole.
    assert [dict(event.attributes) for event in assistant.events] == [
        {"otel_session.delta.index": 0, "otel_session.delta.kind": "text", "otel_session.delta.text": "Hel"},
        {"otel_session.delta.index": 0, "otel_session.delta.kind": "text", "otel_session.delta.text": "lo!"},
    ]
    assert assistant.attributes["otel_session.message.content"] == '[{"index":0,"kind":"text","text":"Hello!"}]'


def test_journal_of_the_example():
    with capture_bundle(redaction=POLICY) as captured:
        run_id = booking_run()
    bundle = captured.bundle
    assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
    assert bundle.run_id == run_id and bundle.session_id == "call-42"
    assert bundle.path.parent.name == "call-42" and bundle.path.parent.parent.name == "sessions"
    assert [event["type"] for event in bundle.events] == [
        "run_started",
        "turn_started",
        "message_started",
        "message_finished",
        "slot_write",
        "guard_evaluated",
        "tool_execution_started",
        "tool_execution_updated",
        "tool_execution_finished",
        "message_started",
        "assistant_delta",
        "assistant_delta",
        "message_finished",
        "transition_verdict",
        "slot_diff",
        "turn_finished",
        "run_finished",
    ]
    assert [event["seq"] for event in bundle.events] == list(range(1, 18))
    by_type = {event["type"]: event for event in bundle.events}
    assert by_type["run_started"]["payload"] == {"kind": "live", "agent": "booking"}
    assert by_type["turn_started"]["payload"] == {"state": "ask_date", "required_slots": ["date", "party_size"]}
    assert by_type["slot_write"]["payload"] == {"slot": "party_size", "value": 2, "previous": None, "source": "nlu"}
    diff = by_type["slot_diff"]["payload"]
    assert diff["slot"] == "date" and diff["value"].startswith("hmac-sha256:") and diff["previous"] is None
    assert by_type["turn_finished"]["payload"] == {
        "state": "confirm",
        "required_slots": ["date", "party_size"],
        "missing_required_slots": [],
    }
    assert by_type["message_finished"]["payload"]["content"] == [{"index": 0, "kind": "text", "text": "Hello!"}]
    assert by_type["tool_execution_finished"]["payload"] == {"status": "ok", "result": {"free": True}}
    assert by_type["tool_execution_finished"]["tool_call_id"] == "c1"
    assert by_type["run_finished"]["payload"] == {"status": "ok"}
    assert all(event.get("turn_index") == 0 for event in bundle.events[1:-1])
    assert {event["trace_id"] for event in bundle.events} == {run_id[4:].replace("-", "")}


def test_missing_required_slots_from_the_post_transition_snapshot():
    slots = {"date": None}
    with capture_bundle() as captured:
        with otel_session.session("s"), otel_session.run(agent="a"):
            with otel_session.turn(0, state="ask_date", required_slots=["date"], slots=slots) as turn:
                turn.finish(state="ask_party_size", required_slots=["date", "party_size"])
            with otel_session.turn(1, state="ask_party_size", required_slots=["party_size"]) as turn:
                turn.finish(state="ask_party_size")  # no snapshot, nothing said: not guessed
            with otel_session.turn(2, state="x", required_slots=["a"]) as turn:
                turn.finish(state="y", missing_required_slots=["a"])
    finished = captured.events("turn_finished")
    assert finished[0]["payload"]["missing_required_slots"] == ["date", "party_size"]
    assert "missing_required_slots" not in finished[1]["payload"]
    assert finished[2]["payload"]["missing_required_slots"] == ["a"]


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        ("direct", [("date", "2026-12-04", None)]),
        ("dict_deep", [("party", {"adults": 2, "kids": 1}, {"adults": 2})]),
        ("after_write", [("date", "2026-12-05", "2026-12-04")]),
        ("before_write", [("date", "2026-12-01", None)]),
        ("attributed_only", []),
        ("deleted", [("date", None, "2026-01-01")]),
    ],
)
def test_slot_reconciliation(scenario, expected):
    keep_all = otel_session.RedactionPolicy(slot_values="keep")
    slots = {"party": {"adults": 2}} if scenario == "dict_deep" else {}
    if scenario == "deleted":
        slots["date"] = "2026-01-01"
    with capture_bundle(redaction=keep_all) as captured:
        with otel_session.session("s"), otel_session.run(agent="a"):
            with otel_session.turn(0, slots=slots):
                if scenario == "direct":
                    slots["date"] = "2026-12-04"
                elif scenario == "dict_deep":
                    slots["party"]["kids"] = 1  # mutation inside a dict value
                elif scenario == "after_write":
                    otel_session.slot_write("date", "2026-12-04", source="nlu")
                    slots["date"] = "2026-12-05"
                elif scenario == "before_write":
                    slots["date"] = "2026-12-01"
                    otel_session.slot_write("date", "2026-12-04", source="nlu")
                elif scenario == "attributed_only":
                    otel_session.slot_write("date", "2026-12-04", source="nlu")
                elif scenario == "deleted":
                    del slots["date"]
    diffs = [(e["payload"]["slot"], e["payload"]["value"], e["payload"]["previous"]) for e in captured.events("slot_diff")]
    assert diffs == expected


def test_guards_and_candidates_are_capped_and_counted(recorder, exporter):
    with otel_session.session("s"), otel_session.run(agent="a"):
        with otel_session.turn(0):
            for number in range(30):
                otel_session.guard(f"g{number}", passed=number % 2 == 0)
            otel_session.transition("a", "b", candidates=[f"c{number}" for number in range(40)])
    recorder.force_flush()
    turn = spans_by_name(exporter)["turn 0"]
    assert sum(event.name == "otel_session.guard" for event in turn.events) == 24
    assert turn.attributes["otel_session.guards_truncated"] == 6
    verdict = next(event for event in turn.events if event.name == "otel_session.transition_verdict")
    assert verdict.attributes["otel_session.transition.candidates_truncated"] == 16


def test_exceptions_mark_spans_and_records_and_propagate():
    with capture_bundle() as captured:
        with pytest.raises(KeyError):
            with otel_session.session("s"), otel_session.run(agent="a"):
                with otel_session.turn(0):
                    with pytest.raises(ValueError):
                        with otel_session.tool_execution("lookup", arguments={"q": 1}):
                            raise ValueError("card 4111 1111 1111 1111 declined")
                    raise KeyError("x")
    finished = captured.events("tool_execution_finished")[0]["payload"]
    assert finished == {"status": "error", "error": "ValueError: card [card] declined"}
    assert captured.events("turn_finished")[0]["payload"]["interrupted"] is True
    assert captured.events("run_finished")[0]["payload"] == {"status": "error"}
    spans = {span.name: span for span in captured.spans}
    assert spans["execute_tool lookup"].status.status_code is StatusCode.ERROR
    assert spans["execute_tool lookup"].attributes["error.type"] == "ValueError"
    assert spans["invoke_agent a"].attributes["error.type"] == "KeyError"


def test_calls_outside_a_run_do_nothing_and_say_so_once(caplog, recorder, exporter):
    caplog.set_level(logging.WARNING, logger="otel_session.instrument")
    for _ in range(3):
        otel_session.slot_write("date", "x", apply=False)
        otel_session.guard("g", passed=True)
        with otel_session.message("user") as m:
            m.text("hi")
        with otel_session.tool_execution("t") as tool:
            tool.finish(result=1)
        with otel_session.turn(0) as turn:
            turn.finish(state="x")
    messages = [record.getMessage() for record in caplog.records]
    for api in ("slot_write", "guard", "message", "tool_execution", "turn"):
        assert sum(f"otel_session.{api} called outside a run" in message for message in messages) == 1
    assert exporter.get_finished_spans() == ()


def test_eval_runs_land_under_evals():
    with capture_bundle() as captured:
        with otel_session.session("episode-1"), otel_session.run(agent="a", kind="eval", eval_id="nightly"):
            pass
    bundle = captured.bundle
    assert bundle.path.relative_to(captured.root).parts[:3] == ("evals", "nightly", "sessions")
    assert bundle.manifest["kind"] == "eval" and bundle.manifest["eval_id"] == "nightly"
    assert not (captured.root / "sessions").exists()
    with pytest.raises(ValueError, match="eval_id"):
        otel_session.run(agent="a", kind="eval")


def test_two_runs_of_one_session_make_two_bundles():
    with capture_bundle() as captured:
        with otel_session.session("call-7"):
            with otel_session.run(agent="a") as first:
                pass
            with otel_session.run(agent="a") as second:
                pass
    assert first.run_id != second.run_id
    assert {bundle.run_id for bundle in captured.bundles} == {first.run_id, second.run_id}
    assert all(bundle.status is BundleStatus.COMPLETE for bundle in captured.bundles)
    assert len({bundle.path.parent for bundle in captured.bundles}) == 1


def test_ten_thousand_deltas_are_journaled_while_the_span_keeps_128():
    with capture_bundle() as captured:
        with otel_session.session("s"), otel_session.run(agent="a"):
            with otel_session.message("assistant") as m:
                for number in range(10_000):
                    m.delta(f"w{number} ")
    deltas = captured.events("assistant_delta")
    assert len(deltas) == 10_000
    assert [event["payload"]["delta"] for event in deltas[:2]] == ["w0 ", "w1 "]
    assert captured.bundle.status is BundleStatus.COMPLETE
    span = next(span for span in captured.spans if span.name == "message assistant")
    assert len(span.events) == 128 and span.dropped_events == 10_000 - 128
    assert span.attributes["otel_session.message.delta_count"] == 10_000
    final = captured.events("message_finished")[0]["payload"]["content"][0]["text"]
    assert final == "".join(f"w{number} " for number in range(10_000))


def test_decorators_sync_and_async():
    import asyncio

    @otel_session.tool()
    def check_availability(date, party_size=2):
        return {"free": date != "2026-12-25"}

    @otel_session.run(agent="decorated")
    def handle_request():
        with otel_session.turn(0):
            return check_availability("2026-12-04")

    @otel_session.tool("async_lookup")
    async def lookup(q):
        return q.upper()

    @otel_session.run(agent="async")
    async def handle_async():
        return await lookup("x")

    with capture_bundle() as captured:
        with otel_session.session("s"):
            assert handle_request() == {"free": True}
            assert handle_request() == {"free": True}
            assert asyncio.run(handle_async()) == "X"
    assert len(captured.bundles) == 3
    started = [e for b in captured.bundles for e in b.events if e["type"] == "tool_execution_started"]
    assert {e["payload"]["name"] for e in started} == {"check_availability", "async_lookup"}
    assert started[0]["payload"]["arguments"] == {"date": "2026-12-04", "party_size": 2} or started[0]["payload"][
        "arguments"
    ] == {"q": "x"}


def test_capture_failure_never_reaches_the_app(tmp_path, monkeypatch):
    """An unwritable bundle directory: the app's run completes, spans are still exported."""
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where a directory should be")
    with capture_bundle(blocked) as captured:
        with otel_session.session("s"), otel_session.run(agent="a"):
            with otel_session.turn(0):
                otel_session.slot_write("x", 1)
                with otel_session.message("assistant") as m:
                    m.delta("still fine")
    assert captured.bundles == []
    assert {span.name for span in captured.spans} >= {"invoke_agent a", "turn 0", "message assistant"}


def test_writer_bound_fails_the_capture_not_the_app():
    from otel_session.bundle.write import WriterLimits

    with capture_bundle(writer_limits=WriterLimits(max_event_bytes=400)) as captured:
        with otel_session.session("s"), otel_session.run(agent="a"):
            with otel_session.message("assistant") as m:
                m.delta("x" * 1000)
                m.delta("after")
    bundle = captured.bundle
    assert bundle.status is BundleStatus.FAILED
    assert bundle.capture["failure"]["code"] == "event_too_large"


def test_run_span_is_a_root_linked_to_the_current_span(recorder, exporter, provider):
    outer = provider.get_tracer("web")
    with outer.start_as_current_span("GET /chat") as http_span:
        with otel_session.session("s"), otel_session.run(agent="a"):
            pass
    root = spans_by_name(exporter)["invoke_agent a"]
    assert root.parent is None
    assert root.context.trace_id != http_span.get_span_context().trace_id
    assert root.links[0].context.span_id == http_span.get_span_context().span_id
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_odd_slot_values_are_recorded():
    keep = otel_session.RedactionPolicy(slot_values="keep")
    with capture_bundle(redaction=keep) as captured:
        with otel_session.session("s"), otel_session.run(agent="a"), otel_session.turn(0, slots={}):
            otel_session.slot_write("seats", {1: "window", 2: ("aisle",)})
            otel_session.slot_write("when", object())
    writes = [event["payload"]["value"] for event in captured.events("slot_write")]
    assert writes[0] == {"1": "window", "2": ["aisle"]}
    assert writes[1].startswith("<object object")


def test_enum_states_and_names_become_text(recorder, exporter):
    import enum

    class State(enum.Enum):
        ASK_DATE = "ask_date"
        CONFIRM = "confirm"

    class Source(enum.Enum):
        NLU = 1

    with otel_session.session("s"), otel_session.run(agent="a"):
        with otel_session.turn(0, state=State.ASK_DATE, required_slots=["date"], slots={}) as turn:
            otel_session.slot_write("date", "x", source=Source.NLU)
            otel_session.guard(State.CONFIRM, passed=True, state=State.ASK_DATE)
            otel_session.transition(State.ASK_DATE, State.CONFIRM, candidates=[State.CONFIRM])
            with otel_session.message("assistant") as m:
                m.delta(42, kind=State.CONFIRM)
            turn.finish(state=State.CONFIRM)
    recorder.force_flush()
    spans = spans_by_name(exporter)
    turn_span = spans["turn 0"]
    assert turn_span.attributes["otel_session.state.previous"] == "ask_date"
    assert turn_span.attributes["otel_session.state"] == "confirm"
    events = {event.name: dict(event.attributes) for event in turn_span.events}
    assert events["otel_session.slot_write"]["otel_session.slot.source"] == "1"
    assert events["otel_session.guard"] == {
        "otel_session.guard.name": "confirm",
        "otel_session.guard.passed": True,
        "otel_session.guard.state": "ask_date",
    }
    assert events["otel_session.transition_verdict"]["otel_session.transition.to"] == "confirm"
    deltas = [dict(event.attributes) for event in spans["message assistant"].events]
    assert {delta["otel_session.delta.kind"] for delta in deltas} == {"confirm"}
    assert "".join(delta["otel_session.delta.text"] for delta in deltas) == "42"  # held back, released at the end
