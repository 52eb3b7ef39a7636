"""Instrument an agent service: sessions, runs, turns, messages, slots, guards, verdicts and tools.

Usage::

    import otel_session

    recorder = otel_session.configure(redaction=otel_session.RedactionPolicy(keep_slots={"party_size"}))
    with otel_session.session("call-42"):
        with otel_session.run(agent="booking") as run:
            with otel_session.turn(0, state="ask_date", required_slots=["date"], slots=slots) as turn:
                with otel_session.message("user") as m:
                    m.text("table for 2 on Friday")
                otel_session.slot_write("party_size", 2, source="nlu")
                with otel_session.message("assistant") as m:
                    for chunk in stream:
                        m.delta(chunk)
                turn.finish(state="confirm")
    recorder.shutdown()

Each call becomes OpenTelemetry spans and span events (``docs/conventions.md``) and, at the same
moment, redacted records in the run's bundle. Zero-code: ``opentelemetry-instrument`` loads
``instrumentor.OtelSessionInstrumentor`` (entry point ``otel_session``);
``OTEL_TRACES_EXPORTER=otel_session`` selects ``exporter.SessionBundleExporter``;
``flask.FlaskOtelSession`` opens a session and a run per request.
"""

from otel_session.instrument._context import current_run, current_session_id, session
from otel_session.instrument._message import MessageHandle, message
from otel_session.instrument._run import RunHandle, run
from otel_session.instrument._tool import ToolHandle, tool, tool_execution
from otel_session.instrument._turn import TurnHandle, guard, slot_write, transition, turn
from otel_session.instrument._runtime import Recorder, configure, current_recorder
from otel_session.instrument.processor import SessionSpanProcessor

__all__ = [
    "MessageHandle",
    "Recorder",
    "RunHandle",
    "SessionSpanProcessor",
    "ToolHandle",
    "TurnHandle",
    "configure",
    "current_recorder",
    "current_run",
    "current_session_id",
    "guard",
    "message",
    "run",
    "session",
    "slot_write",
    "tool",
    "tool_execution",
    "transition",
    "turn",
]
