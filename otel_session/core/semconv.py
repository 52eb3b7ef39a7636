"""Attribute, span and span-event names (SPEC §4; the table in ``docs/conventions.md``).

Official OpenTelemetry names where they exist (``session.id``, ``gen_ai.*``, ``error.type``);
this project's own names under ``otel_session.*``. Structured values (slot values, tool arguments
and results, message content, verdict candidates) are attributes holding JSON text, already
redacted, so that a span maps back to the same journal records (``normalize/own.py``).
"""

from __future__ import annotations

__all__ = [
    "BAGGAGE_RUN_ID",
    "BAGGAGE_SESSION_ID",
    "CAP_PER_TURN",
    "EVENT_DELTA",
    "EVENT_GUARD",
    "EVENT_SLOT_DIFF",
    "EVENT_SLOT_WRITE",
    "EVENT_TOOL_UPDATE",
    "EVENT_TRANSITION_VERDICT",
    "SCOPE_NAME",
]

SCOPE_NAME = "otel_session"
"""Instrumentation scope of the spans this project makes (how ``normalize/own.py`` knows them)."""

CAP_PER_TURN = 24
"""Guards and verdict candidates recorded per turn; the overflow is counted (SPEC §4.3)."""

# -- official names ------------------------------------------------------------------------------
SESSION_ID = "session.id"
CONVERSATION_ID = "gen_ai.conversation.id"
OPERATION_NAME = "gen_ai.operation.name"
AGENT_NAME = "gen_ai.agent.name"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"
RESPONSE_MODEL = "gen_ai.response.model"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"

# -- this project's names --------------------------------------------------------------------------
RUN_ID = "otel_session.run.id"
RUN_KIND = "otel_session.run.kind"
RUN_STATUS = "otel_session.run.status"
EVAL_ID = "otel_session.eval.id"
RUN_TAGS = "otel_session.tags"
"""A run's tags: a string array on its root span or the resource (``normalize.labels``)."""
RUN_METADATA_PREFIX = "otel_session.metadata."
"""``otel_session.metadata.<key>``: one metadata entry of a run, on its root span or the resource."""
SCORE_PREFIX = "otel_session.score."
"""``otel_session.score.<name>``: an evaluation score the app set on a run's or a turn's span."""
RESOURCE_METADATA = ("service.version", "deployment.environment", "deployment.environment.name")
"""Resource attributes a run's metadata carries under their own names."""
TURN_INDEX = "otel_session.turn.index"
TURN_SOURCE = "otel_session.turn.source"
STATE = "otel_session.state"
STATE_PREVIOUS = "otel_session.state.previous"
REQUIRED_SLOTS = "otel_session.required_slots"
REQUIRED_SLOTS_AFTER = "otel_session.required_slots.after"
MISSING_REQUIRED_SLOTS = "otel_session.missing_required_slots"
TURN_INTERRUPTED = "otel_session.turn.interrupted"
GUARDS_TRUNCATED = "otel_session.guards_truncated"
MESSAGE_ID = "otel_session.message.id"
MESSAGE_ROLE = "otel_session.message.role"
MESSAGE_CONTENT = "otel_session.message.content"
MESSAGE_SETTLED = "otel_session.message.settled"
MESSAGE_STOP_REASON = "otel_session.message.stop_reason"
MESSAGE_USAGE = "otel_session.message.usage"
"""A model call's token usage as recorded in its ``message_finished`` (JSON ``{input_tokens, output_tokens}``)."""
DELTA_COUNT = "otel_session.message.delta_count"
TOOL_STATUS = "otel_session.tool.status"
TOOL_ERROR = "otel_session.tool.error"

EVENT_SLOT_WRITE = "otel_session.slot_write"
EVENT_SLOT_DIFF = "otel_session.slot_diff"
EVENT_GUARD = "otel_session.guard"
EVENT_TRANSITION_VERDICT = "otel_session.transition_verdict"
EVENT_DELTA = "otel_session.delta"
EVENT_TOOL_UPDATE = "otel_session.tool_update"

SLOT_NAME = "otel_session.slot.name"
SLOT_VALUE = "otel_session.slot.value"
SLOT_PREVIOUS = "otel_session.slot.previous"
SLOT_SOURCE = "otel_session.slot.source"
GUARD_NAME = "otel_session.guard.name"
GUARD_PASSED = "otel_session.guard.passed"
GUARD_STATE = "otel_session.guard.state"
TRANSITION_FROM = "otel_session.transition.from"
TRANSITION_TO = "otel_session.transition.to"
TRANSITION_REASON = "otel_session.transition.reason"
TRANSITION_CANDIDATES = "otel_session.transition.candidates"
TRANSITION_CANDIDATES_TRUNCATED = "otel_session.transition.candidates_truncated"
DELTA_INDEX = "otel_session.delta.index"
DELTA_KIND = "otel_session.delta.kind"
DELTA_TEXT = "otel_session.delta.text"
TOOL_UPDATE_DETAIL = "otel_session.tool.update.detail"

BAGGAGE_SESSION_ID = SESSION_ID
BAGGAGE_RUN_ID = RUN_ID
