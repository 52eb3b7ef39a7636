"""Whatever values a voice framework's spans carry, mapping them never raises and loses nothing.

The span names, scopes and attribute keys are the ones Pipecat and LiveKit Agents emit
(``docs/conventions.md``, "Voice agents"); the values are anything OTLP can carry, and the spans
of a trace arrive in any order.
"""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_session.normalize import SpanData, normalize_span

_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=True),
    st.text(max_size=20), st.sampled_from(['[{"role": "assistant", "tool_calls": 5}]', '[{"role": "assistant", '
                                           '"tool_calls": [{"id": ["x"], "function": {"name": 1}}]}, {"role": "tool", '
                                           '"tool_call_id": ["x"]}]', "[1, 2]", "{}", "[", '{"a": 1}']),
    st.lists(st.integers(), max_size=3),
)
_KEYS = ["turn.number", "turn.was_interrupted", "turn.user_bot_latency_seconds", "metrics.ttfb", "input", "output",
         "conversation.id", "lk.interrupted", "lk.e2e_latency", "lk.end_of_turn_delay", "lk.response.ttft",
         "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.operation.name", "session.id"]
_SHAPES = [("pipecat.turn", "conversation"), ("pipecat.turn", "turn"), ("pipecat", "llm"), ("pipecat", "tts"),
           ("pipecat", "stt"), ("livekit-agents", "agent_session"), ("livekit-agents", "agent_turn"),
           ("livekit-agents", "llm_node"), ("livekit-agents", "llm_request"), ("livekit-agents", "function_tool")]


@st.composite
def _traces(draw):
    """One trace: a root (conversation or agent_session), turns under it, services under the turns."""
    trace_id = draw(st.integers(1, 2**128 - 1))
    spans = []
    for span_id in range(2, draw(st.integers(1, 8)) + 2):
        scope, name = draw(st.sampled_from(_SHAPES))
        parent = draw(st.sampled_from([1, *range(2, span_id)]))
        attributes = draw(st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=6))
        spans.append(SpanData(trace_id, span_id, parent, name, 10 * span_id, 10 * span_id + 5, attributes, scope_name=scope))
    root_scope, root_name = draw(st.sampled_from([("pipecat.turn", "conversation"), ("livekit-agents", "agent_session")]))
    root = SpanData(trace_id, 1, None, root_name, 0, 1000, {"conversation.id": "c"}, scope_name=root_scope)
    return draw(st.permutations(spans)), root


@settings(max_examples=300, deadline=None)
@given(_traces())
def test_any_values_in_any_order_map_without_error_and_every_record_is_released_by_the_root(trace):
    spans, root = trace
    records = [event for span in spans for event in normalize_span(span)]
    records += normalize_span(root)
    for event in records:
        orjson.dumps(event.payload)  # JSON-safe: NaN and infinities never reach a payload as latency
    assert [event.type for event in records].count("run_started") == 1
    # Nothing is left waiting: a second root of the same trace releases nothing more.
    assert [event.type for event in normalize_span(root)] == ["run_started", "run_finished"]


def test_a_malformed_tool_call_history_maps_to_no_tool_execution():
    """Pipecat's ``input`` is the app's context: tool calls that are not a list, ids that are not text."""
    for trace_id, history in enumerate(('[{"role": "assistant", "tool_calls": 5}]',
                    '[{"role": "assistant", "tool_calls": [{"id": ["x"], "function": {"name": 1}}]},'
                    ' {"role": "tool", "tool_call_id": ["x"], "content": "ok"}]'), start=70):
        llm = SpanData(trace_id, 3, 2, "llm", 10, 20, {"input": history, "metrics.ttfb": float("nan")}, scope_name="pipecat")
        turn = SpanData(trace_id, 2, 1, "turn", 5, 30, {"turn.number": 1, "turn.user_bot_latency_seconds": float("inf")},
                        scope_name="pipecat.turn")
        assert normalize_span(llm) == []  # held for its turn
        records = normalize_span(turn)
        finished = records[-1].payload
        assert finished == {"interrupted": False}  # NaN and infinity are no latency
        tools = [event.payload for event in records if event.type == "tool_execution_finished"]
        assert tools in ([], [{"status": "ok", "result": "ok"}])



def test_an_llm_span_with_integers_past_64_bits_maps():
    """An in-process SDK attribute can hold an integer past 64 bits: the ``llm`` span's history maps
    (as digits, JSON-safe) instead of failing the mapping."""
    root = SpanData(5, 1, None, "conversation", 0, 1000, {"conversation.id": "c"}, scope_name="pipecat.turn")
    turn = SpanData(5, 2, 1, "turn", 10, 900, {"turn.number": 1}, scope_name="pipecat.turn")
    llm = SpanData(5, 3, 2, "llm", 20, 25, {"input": [2**70], "output": "Booked for two."}, scope_name="pipecat")
    records = [event for span in (llm, turn, root) for event in normalize_span(span)]
    for event in records:
        orjson.dumps(event.payload)
    assert [event.type for event in records] == ["turn_started", "turn_finished", "run_started", "run_finished"]
