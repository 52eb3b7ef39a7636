"""strands-agents' own tracing (scope ``strands.telemetry.tracer``) → journal events.

Contract: ``map_span(span) -> list[JournalEvent]`` for a span of ``SCOPE``; the GenAI mapping
(``genai``) does the rest, once each span is read as what it is:

* ``chat`` spans are the model calls. Their messages are Bedrock Converse content blocks
  (``[{"text": …}]``, ``[{"toolUse": …}]``, ``[{"toolResult": …}]``) in ``gen_ai.*.message`` /
  ``gen_ai.choice`` events, or, with ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``,
  in two ``gen_ai.client.inference.operation.details`` events (input, then output): both are read
  by ``genai_messages``.
* ``execute_tool`` spans are tool executions. In the older mode their arguments come as a
  ``gen_ai.tool.message`` event (``content``) and their result as a ``gen_ai.choice`` event
  (``message``, content blocks); those are read when the span has no ``gen_ai.tool.call.arguments``
  / ``gen_ai.tool.call.result``, and a result of content blocks becomes their text.
* ``invoke_agent`` and ``execute_event_loop_cycle`` spans repeat the messages of the model calls
  under them (the user's ask, the final reply): they only frame the run (when a root).
"""

from __future__ import annotations

from typing import Any

from otel_session.normalize import genai
from otel_session.normalize.genai_messages import converse_blocks, converse_text
from otel_session.normalize.spans import JournalEvent
from otel_session.normalize.view import SpanView

__all__ = ["SCOPE", "map_span"]

SCOPE = "strands.telemetry.tracer"
_ARGUMENTS = "gen_ai.tool.call.arguments"
_RESULT = "gen_ai.tool.call.result"


def map_span(span: SpanView) -> list[JournalEvent]:
    operation = span.attributes.get("gen_ai.operation.name")
    if operation == "execute_tool":
        return genai.map_span(_with_tool_io(span))
    if operation == "chat":
        return genai.map_span(span)
    return genai.map_frame(span)


def _with_tool_io(span: SpanView) -> SpanView:
    """The tool span with its arguments and result as attributes (from its events when needed)."""
    attributes = span.attributes
    found: dict[str, Any] = {}
    for event in span.events:
        if event.name == "gen_ai.tool.message" and _ARGUMENTS not in attributes and _ARGUMENTS not in found:
            found[_ARGUMENTS] = event.attributes.get("content")
        elif event.name == "gen_ai.choice" and _RESULT not in attributes and _RESULT not in found:
            found[_RESULT] = event.attributes.get("message")
    result = found.get(_RESULT, attributes.get(_RESULT))
    if converse_blocks(result):
        found[_RESULT] = converse_text(result)
    return span.replaced(attributes={**attributes, **found}) if found else span
