"""Context: threads and asyncio tasks keep their sessions apart; ids reach other instrumentors' spans."""

from __future__ import annotations

import asyncio
import contextvars
import threading

from opentelemetry import baggage, context

import otel_session
from otel_session.normalize import JournalEvent
from otel_session.testing import capture_bundle


def _conversation(session_id: str, turns: int = 3) -> None:
    slots: dict = {}
    with otel_session.session(session_id):
        with otel_session.run(agent="a"):
            for index in range(turns):
                with otel_session.turn(index, slots=slots):
                    otel_session.slot_write("owner", session_id, source="test")
                    with otel_session.message("assistant") as m:
                        for _ in range(20):
                            m.delta(session_id)


def _assert_unmixed(captured, sessions):
    assert sorted(bundle.session_id for bundle in captured.bundles) == sorted(sessions)
    for bundle in captured.bundles:
        assert bundle.status.value == "complete", bundle.diagnostics
        deltas = [e["payload"]["delta"] for e in bundle.events if e["type"] == "assistant_delta"]
        streamed = "".join(deltas)  # deltas release whole words: compare what they stream
        assert streamed and streamed.replace(bundle.session_id, "") == ""
    for span in captured.spans:
        if span.name.startswith("message"):
            streamed = "".join(e.attributes["otel_session.delta.text"] for e in span.events)
            assert streamed and streamed.replace(span.attributes["session.id"], "") == ""


def test_threads_with_copied_context_never_mix():
    sessions = [f"thread-{number}" for number in range(8)]
    keep = otel_session.RedactionPolicy(keep_slots={"owner"})
    with capture_bundle(redaction=keep) as captured:
        threads = [threading.Thread(target=_conversation, args=(sid,)) for sid in sessions]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    _assert_unmixed(captured, sessions)


def test_work_in_a_thread_started_with_the_run_context_lands_in_the_run():
    with capture_bundle() as captured:
        with otel_session.session("s"), otel_session.run(agent="a"):
            with otel_session.turn(0):
                ctx = contextvars.copy_context()
                worker = threading.Thread(target=ctx.run, args=(otel_session.guard, "from_thread", True))
                worker.start()
                worker.join()
    guards = captured.events("guard_evaluated")
    assert [(g["payload"]["name"], g["turn_index"]) for g in guards] == [("from_thread", 0)]


def test_asyncio_tasks_never_mix():
    sessions = [f"task-{number}" for number in range(8)]

    async def conversation(session_id):
        with otel_session.session(session_id), otel_session.run(agent="a"):
            for index in range(3):
                with otel_session.turn(index):
                    with otel_session.message("assistant") as m:
                        for _ in range(10):
                            m.delta(session_id)
                            await asyncio.sleep(0)

    async def main():
        await asyncio.gather(*(conversation(sid) for sid in sessions))

    with capture_bundle() as captured:
        asyncio.run(main())
    _assert_unmixed(captured, sessions)


def test_processor_stamps_other_instrumentors_spans(provider):
    with capture_bundle(tracer_provider=provider) as captured:
        other = provider.get_tracer("opentelemetry.instrumentation.openai_v2")
        with otel_session.session("call-9"):
            with other.start_as_current_span("before the run"):
                pass
            with otel_session.run(agent="a") as run, otel_session.turn(2):
                with other.start_as_current_span("chat gpt-4o"):
                    pass
    spans = {span.name: span for span in captured.spans}
    chat = spans["chat gpt-4o"]
    assert chat.attributes["session.id"] == "call-9"
    assert chat.attributes["gen_ai.conversation.id"] == "call-9"
    assert chat.attributes["otel_session.run.id"] == run.run_id
    assert chat.attributes["otel_session.turn.index"] == 2
    assert spans["before the run"].attributes["session.id"] == "call-9"
    assert "otel_session.run.id" not in spans["before the run"].attributes


def test_ids_travel_in_baggage(provider):
    with capture_bundle(tracer_provider=provider) as captured:
        with otel_session.session("call-b"), otel_session.run(agent="a") as run:
            assert baggage.get_baggage("session.id") == "call-b"
            assert baggage.get_baggage("otel_session.run.id") == run.run_id
            carried = baggage.get_all()
        # a downstream service in the same process space: only the baggage came along
        ctx = context.Context()
        for key, value in carried.items():
            ctx = baggage.set_baggage(key, value, ctx)
        token = context.attach(ctx)
        try:
            with provider.get_tracer("downstream").start_as_current_span("downstream work"):
                pass
        finally:
            context.detach(token)
    downstream = next(span for span in captured.spans if span.name == "downstream work")
    assert downstream.attributes["session.id"] == "call-b"
    assert downstream.attributes["otel_session.run.id"] == run.run_id


def test_foreign_spans_inside_a_run_are_journaled_once_when_they_end(monkeypatch, provider):
    """Other instrumentation's spans go through normalize → redact → the run's journal, on end."""
    from otel_session.normalize import genai

    def fake_genai(span):
        return [JournalEvent("message_started", span.start_time_ns, {"role": "assistant", "via": "a@b.co"},
                             trace_id=span.trace_id_hex, span_id=span.span_id_hex)]

    monkeypatch.setattr(genai, "map_span", fake_genai)
    with capture_bundle(tracer_provider=provider) as captured:
        other = provider.get_tracer("opentelemetry.instrumentation.openai_v2")
        with otel_session.session("s"), otel_session.run(agent="a"), otel_session.turn(4):
            with other.start_as_current_span("chat") as chat:
                chat.set_attribute("x", 1)
                for number in range(200):
                    chat.add_event("gen_ai.choice", {"n": number})
    foreign = [e for e in captured.bundle.events if e.get("span_id") == f"{chat.get_span_context().span_id:016x}"]
    assert [e["type"] for e in foreign] == ["message_started", "upstream_drop"]
    assert foreign[0]["payload"] == {"role": "assistant", "via": "[email]"}
    assert foreign[0]["turn_index"] == 4
    assert foreign[1]["payload"]["dropped_events"] == 72


def test_a_span_ending_after_its_run_is_reported(provider, caplog):
    with capture_bundle(tracer_provider=provider):
        other = provider.get_tracer("background")
        with otel_session.session("s"):
            with otel_session.run(agent="a"):
                straggler = other.start_span("still running")
            straggler.end()
    assert any("ended after its run finished" in record.getMessage() for record in caplog.records)
