"""The voice mapping's per-trace state ends with its conversation: the same trace mapped twice in one
process (two collectors, an import next to a collector) gives the same records."""

from __future__ import annotations

from otel_session.normalize import SpanData, normalize_span


def _livekit_trace(trace_id: int) -> list[SpanData]:
    def span(span_id: int, parent: int | None, name: str, attributes: dict) -> SpanData:
        return SpanData(trace_id, span_id, parent, name, 1_000 + span_id, 2_000 + span_id, attributes,
                        resource_attributes={"service.name": "lk"}, scope_name="livekit-agents")

    return [
        span(3, 2, "llm_request", {"gen_ai.operation.name": "chat",
                                   "gen_ai.output.messages": '[{"role": "assistant", "parts": []}]'}),
        span(2, 1, "agent_turn", {"lk.interrupted": False}),
        span(1, None, "agent_session", {"session.id": "room"}),
    ]


def _turn_indexes(trace_id: int) -> list[tuple[str, int | None]]:
    return [(event.type, event.turn_index) for span in _livekit_trace(trace_id) for event in normalize_span(span)]


def test_a_livekit_trace_mapped_again_numbers_its_turns_from_zero_again():
    first = _turn_indexes(0xFEED)
    assert ("turn_started", 0) in first and ("message_started", 0) in first
    assert _turn_indexes(0xFEED) == first
