"""A framework's state read from its own spans as slots: pydantic-ai's structured output.

pydantic-ai's instrumentation (scope ``pydantic-ai``) ends each agent run's ``invoke_agent`` span
with ``final_result``: the run's output, text or the JSON of a structured output (its
``output_type``, which the model fills through the ``final_result`` tool). The fields of a
structured output are the run's slots: each is a ``slot_write`` with ``source`` ``output`` at the
span's end. When required slots are declared for the agent (``OTEL_SESSION_REQUIRED_SLOTS``,
``core.config``), a ``turn_finished`` at the same instant closes the turn the run served (the one its
user message opened) with ``required_slots`` and ``missing_required_slots``: those absent or None in
the output (all of them when the run gave no structured output); inside a turn the app records
itself (the span carries its ``otel_session.turn.index``) the writes are that turn's, and the turn
says what it requires. The rest of the span is read by
the shared GenAI mapping (``genai``). pydantic-ai puts no ``deps`` on its spans: they are not read.
"""

from __future__ import annotations

from typing import Any

from otel_session.core.config import required_slots_for
from otel_session.core.journal import EventType
from otel_session.core.semconv import TURN_INDEX
from otel_session.normalize import genai
from otel_session.normalize.spans import JournalEvent, json_value
from otel_session.normalize.view import SpanView

__all__ = ["OUTPUT_SOURCE", "SCOPE", "map_span"]

SCOPE = "pydantic-ai"
OUTPUT_SOURCE = "output"

_RUN_FINISHED = EventType.RUN_FINISHED.value
_SLOT_WRITE = EventType.SLOT_WRITE.value
_TURN_FINISHED = EventType.TURN_FINISHED.value


def map_span(span: SpanView) -> list[JournalEvent]:
    """The GenAI mapping's records of a pydantic-ai span, with an agent run's output as slots."""
    events = genai.map_span(span)
    if span.attributes.get("gen_ai.operation.name") != "invoke_agent":
        return events
    slots = output_slots(span)
    if slots:
        # Before the run's end when the agent run is the trace's root.
        at = len(events) - 1 if events and events[-1].type == _RUN_FINISHED else len(events)
        events[at:at] = slots
    return events


def output_slots(span: SpanView) -> list[JournalEvent]:
    """The ``slot_write`` records of an ``invoke_agent`` span's structured output, and its
    ``turn_finished`` when the agent has required slots declared."""
    attributes = span.attributes
    output = json_value(attributes.get("final_result"))
    fields = output if isinstance(output, dict) else {}
    turn_index = attributes.get(TURN_INDEX)
    turn_index = turn_index if isinstance(turn_index, int) else None
    ids = {"turn_index": turn_index, "trace_id": span.trace_id_hex, "span_id": span.span_id_hex}
    events = [
        JournalEvent(_SLOT_WRITE, span.end_time_ns,
                     {"slot": str(slot), "value": value, "previous": None, "source": OUTPUT_SOURCE}, **ids)
        for slot, value in fields.items()
    ]
    agent = attributes.get("gen_ai.agent.name") or attributes.get("agent_name")
    required = required_slots_for(agent if isinstance(agent, str) else None)
    if required and turn_index is None:  # inside an app's own turn, that turn says what it requires
        missing = [slot for slot in required if fields.get(slot) is None]
        payload: dict[str, Any] = {"required_slots": required, "missing_required_slots": missing}
        events.append(JournalEvent(_TURN_FINISHED, span.end_time_ns, payload, **ids))
    return events
