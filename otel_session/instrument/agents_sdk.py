"""OpenAI Agents SDK runs recorded as sessions, runs, turns, messages, tools, guards and verdicts.

Usage::

    from otel_session.instrument.agents_sdk import AgentsSdkInstrumentor

    AgentsSdkInstrumentor().instrument()        # or, with no code: opentelemetry-instrument python app.py

then ``Runner.run`` / ``run_sync`` / ``run_streamed`` as usual. When the app imports ``agents`` (at
once if it has; ``instrument()`` never imports it: ``_on_import``), the instrumentor registers a
trace processor through the SDK's own tracing interface (``agents.add_trace_processor``; the SDK emits no
OpenTelemetry spans, so this works beside OpenInference or without it) and wraps
``AgentRunner.run`` and ``run_streamed`` to learn what the SDK's spans do not carry: the SDK
``Session``'s id, the user's input, the starting agent, and the streamed deltas (they are in no
span: the run's stream is observed as the SDK queues each event). Everything is recorded through
the public ``otel_session`` API, so it goes through the same codec, redactor and writer as any run.

What maps to what (``docs/frameworks.md``):

=====================================  ==========================================================
Agents SDK                             otel-session
=====================================  ==========================================================
``conversation_id``, else the          session id
``Session``'s ``session_id``, else
the trace's ``group_id``, else the
app's ``otel_session.session()``,
else the SDK trace id
one ``Runner.run*`` (its ``task``      one run (``agent`` = the starting agent)
span)
a ``turn`` span (agent loop turn)      a turn (index = the SDK's turn number, ``source`` = agent);
                                       it lasts until the next turn or the run's end, so an output
                                       guardrail lands in the last turn
the input of ``Runner.run*``           a ``user`` message in the first turn
``generation`` / ``response`` span     an ``assistant`` message: streamed text as deltas, tool
                                       calls as ``tool_call`` blocks; model and token usage as
                                       ``gen_ai.*`` attributes of its span
``function`` span                      a tool execution (call id and arguments from the model's
                                       tool call of that name)
``guardrail`` span                     a guard (``passed`` = tripwire not triggered)
``handoff`` span                       a transition verdict (from agent, to agent, reason
                                       ``handoff``, candidates = the handoffs the agent offered)
=====================================  ==========================================================

Tracing must be on (it is by default; ``RunConfig(tracing_disabled=True)`` or
``OPENAI_AGENTS_DISABLE_TRACING=1`` leave nothing to record), with the runner's task and turn spans
(``TracingConfig(include_task_and_turn_spans=True)``, the default). Capture failures are logged,
never raised into the run.
"""

from __future__ import annotations

import contextvars
import functools
import sys
import threading
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

import otel_session.instrument as api
from otel_session.core.config import required_slots_for
from otel_session.instrument._log import warn_once
from otel_session.instrument._state import INPUT_SOURCE, changed, fields_of
from otel_session.instrument._frameworks import Opened, replace_methods
from otel_session.instrument._on_import import PendingPatch, on_import
from otel_session.normalize.genai_messages import json_value, tool_call_text

__all__ = ["AgentsSdkInstrumentor", "SessionTraceProcessor"]

_instruments = ("openai-agents >= 0.24",)

_DELTA_KINDS = {
    "response.output_text.delta": "text",
    "response.refusal.delta": "text",
    "response.reasoning_text.delta": "thinking",
    "response.reasoning_summary_text.delta": "thinking",
}


@dataclass(frozen=True)
class _Request:
    """What a ``Runner.run*`` call knew that its spans do not carry."""

    session_id: str | None
    agent: str | None
    user_input: Any
    handling: BaseException | None = None
    """The exception the caller was handling when it called (not the run's: see ``_run_error``)."""
    context: Any = None
    """The run's context object (``Runner.run(context=…)``): its fields are the run's slots."""


_request: contextvars.ContextVar[_Request | None] = contextvars.ContextVar("otel_session_agents_request", default=None)


class AgentsRunError(Exception):
    """The error an SDK span reported (its ``error.message``), to mark the run or tool failed."""


@dataclass
class _Run:
    """One ``Runner.run*`` being recorded: its sections and what its spans left pending."""

    session: Opened
    run: Opened
    request: _Request | None
    turn: Opened | None = None
    starting_agent: str | None = None
    turn_agent: str | None = None
    context: Any = None
    """The app's context object, which its tools and hooks change in place (``_state``)."""
    slots: dict[str, Any] | None = None
    """The context's fields as last recorded (None: the run has no context with fields)."""
    agents: dict[str, Any] = field(default_factory=dict)
    """Agent span id → its span data (the SDK fills in the handoffs it offers)."""
    agent: Any = None
    """The span data of the current turn's agent (a handoff's candidates are its handoffs)."""
    open: dict[str, Opened] = field(default_factory=dict)
    """SDK span id → the message or tool execution it opened."""
    streamed: set[str] = field(default_factory=set)
    """Generation span ids whose text arrived as deltas."""
    tool_calls: list[tuple[str | None, str | None, Any]] = field(default_factory=list)
    """The model's tool calls not yet executed: (call id, name, arguments)."""
    failure: AgentsRunError | None = None
    caller_handling: BaseException | None = None
    """The exception the app was handling when it called ``Runner.run*`` (never the run's error)."""
    """Why the run fails when a tripped guardrail said so: the SDK raises out of ``Runner.run*``
    (``run_streamed``: out of ``stream_events()``) after the run's task span ended."""

    def current(self) -> Opened:
        return self.turn if self.turn is not None else self.run

    def record_state(self, source: str | None) -> None:
        """Each field of the context that changed since last recorded: a ``slot_write`` of the turn."""
        if self.slots is None or self.turn is None:
            return
        for slot, value in list(changed(self.context, self.slots)):  # read whole before the writes apply
            self.turn.run(api.slot_write, slot, value, source=source)

    def close_turn(self) -> None:
        if self.turn is not None:
            self.record_state(self.turn_agent)
            turn, self.turn = self.turn, None
            turn.close()


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _output_blocks(data: Any) -> Iterator[tuple[str, Any, tuple[Any, Any, Any] | None]]:
    """``(kind, text, tool call)`` of a model call's output: a ``generation`` span's chat messages
    (or, streamed, the Responses-format response it was folded into), a ``response`` span's items."""
    if data.type == "response":
        yield from _response_items(getattr(data.response, "output", None))
        return
    for item in data.output or ():
        if _field(item, "object") == "response":
            yield from _response_items(_field(item, "output"))
            continue
        yield "text", _field(item, "content"), None
        for call in _field(item, "tool_calls") or ():
            function = _field(call, "function") or {}
            yield "tool_call", None, (_field(call, "id"), _field(function, "name"), _field(function, "arguments"))


def _response_items(items: Any) -> Iterator[tuple[str, Any, tuple[Any, Any, Any] | None]]:
    for item in items or ():
        kind = _field(item, "type")
        if kind == "message":
            for part in _field(item, "content") or ():
                yield "text", _field(part, "text") or _field(part, "refusal"), None
        elif kind == "function_call":
            yield "tool_call", None, (_field(item, "call_id"), _field(item, "name"), _field(item, "arguments"))
        elif kind == "reasoning":
            for part in _field(item, "summary") or ():
                yield "thinking", _field(part, "text"), None


def _record_model_call(handle: Any, data: Any) -> None:
    """The model call's response model and token usage, when known, on its reply ``handle``."""
    response = getattr(data, "response", None)
    usage = getattr(data, "usage", None) or getattr(response, "usage", None)
    handle.model_call(
        getattr(response, "model", None) or getattr(data, "model", None),
        input_tokens=_field(usage, "input_tokens") if usage is not None else None,
        output_tokens=_field(usage, "output_tokens") if usage is not None else None,
    )


class SessionTraceProcessor:
    """An Agents SDK ``TracingProcessor`` that records each ``Runner.run*`` as an otel_session run.

    The SDK has no way to remove a processor: uninstrumenting turns ``enabled`` off for good (the
    next ``instrument()`` registers a new one). Every callback catches its own failures: the run
    never sees them.
    """

    def __init__(self) -> None:
        self.enabled = True
        self._groups: dict[str, str | None] = {}
        self._spans: dict[str, _Run] = {}
        """SDK span id → the run it belongs to (its task span's: one SDK trace may hold several
        ``Runner.run``, one after another or nested, as an agent used as a tool)."""
        self._made_current: dict[str, object] = {}
        """SDK model-call span id → the token of its message's OTel context, made current while the
        SDK calls the model: the model client's own spans (openai-v2's ``chat``) are then the run's."""
        self._lock = threading.Lock()

    # -- the SDK's TracingProcessor interface ---------------------------------------------------

    def on_trace_start(self, trace: Any) -> None:
        if self.enabled:
            self._groups[trace.trace_id] = getattr(trace, "group_id", None)

    def on_trace_end(self, trace: Any) -> None:
        self._groups.pop(trace.trace_id, None)

    def on_span_start(self, span: Any) -> None:
        if not self.enabled:
            return
        try:
            self._start(span, span.span_data)
        except Exception:  # noqa: BLE001 - never into the SDK's run
            warn_once("agents:start", "otel_session: recording an Agents SDK span failed", exc_info=True)

    def on_span_end(self, span: Any) -> None:
        if not self.enabled:
            return
        try:
            self._end(span, span.span_data)
        except Exception:  # noqa: BLE001
            warn_once("agents:end", "otel_session: recording an Agents SDK span failed", exc_info=True)

    def shutdown(self) -> None:
        """Finish runs still open as interrupted (the SDK is shutting its tracing down)."""
        with self._lock:
            runs, self._spans = {id(run): run for run in self._spans.values()}, {}
        for run in runs.values():
            self._close_run(run, KeyboardInterrupt())

    def force_flush(self) -> None:
        recorder = api.current_recorder()
        if recorder is not None:
            recorder.force_flush()

    # -- the stream -----------------------------------------------------------------------------

    def observe(self, event: Any) -> None:
        """One event the SDK queued on a streamed run: a text or reasoning delta becomes a delta
        of the message of the model call streaming it (the SDK span current where it is queued)."""
        if not self.enabled or getattr(event, "type", None) != "raw_response_event":
            return
        data = getattr(event, "data", None)
        kind = _DELTA_KINDS.get(getattr(data, "type", None))  # type: ignore[arg-type]
        if kind is None:
            return
        try:
            from agents.tracing import get_current_span

            span = get_current_span()
            run = self._spans.get(span.span_id) if span is not None else None
            opened = run.open.get(span.span_id) if run is not None else None
            if opened is None:
                return
            run.streamed.add(span.span_id)
            index = 0 if kind == "text" else 1
            opened.handle.delta(str(getattr(data, "delta", "") or ""), kind=kind, index=index)
        except Exception:  # noqa: BLE001
            warn_once("agents:delta", "otel_session: recording a streamed Agents SDK delta failed", exc_info=True)

    # -- spans ------------------------------------------------------------------------------------

    def _start(self, span: Any, data: Any) -> None:
        kind = data.type
        if kind == "task":
            opened = self._open_run(span)
            with self._lock:
                self._spans[span.span_id] = opened
            return
        with self._lock:  # other threads' runs end (and iterate over _spans) meanwhile
            run = self._spans.get(span.parent_id)
            if run is None:
                return
            self._spans[span.span_id] = run
        if kind == "agent":
            run.agents[span.span_id] = data
        elif kind == "turn":
            run.agent = run.agents.get(span.parent_id)
            self._open_turn(run, data)
        elif kind in ("generation", "response"):
            opened = Opened(run.current().context, api.message("assistant"))
            run.open[span.span_id] = opened
            # The SDK calls the model between this span's start and end, in this same context.
            self._made_current[span.span_id] = otel_context.attach(opened.context.run(otel_context.get_current))
        elif kind == "function":
            call_id, arguments = self._pending_call(run, data.name)
            section = api.tool_execution(data.name, call_id=call_id, arguments=arguments)
            run.open[span.span_id] = Opened(run.current().context, section)

    def _end(self, span: Any, data: Any) -> None:
        token = self._made_current.pop(span.span_id, None)
        if token is not None:
            otel_context.detach(token)
        with self._lock:
            run = self._spans.pop(span.span_id, None)
        if run is None:
            return
        kind = data.type
        error = _error_of(span)
        if kind == "task":
            with self._lock:  # spans of the run that never ended (the SDK failed mid-span)
                for span_id in [key for key, owner in self._spans.items() if owner is run]:
                    del self._spans[span_id]
                    self._made_current.pop(span_id, None)
            self._close_run(run, error or _run_error(run) or run.failure)
        elif kind == "agent":
            run.agents.pop(span.span_id, None)
        elif kind in ("generation", "response"):
            opened = run.open.pop(span.span_id, None)
            if opened is not None:
                self._finish_message(run, opened, data, streamed=span.span_id in run.streamed, error=error)
                run.streamed.discard(span.span_id)
        elif kind == "function":
            opened = run.open.pop(span.span_id, None)
            if opened is not None:
                self._finish_tool(opened, data, error)
            run.record_state(data.name)  # what the tool did to the context
        elif kind == "guardrail":
            run.current().run(api.guard, data.name, not data.triggered)
            if data.triggered:
                run.failure = run.failure or AgentsRunError(f"guardrail {data.name} tripwire triggered")
        elif kind == "handoff":
            offered = getattr(run.agent, "handoffs", None) or []
            run.current().run(
                api.transition, data.from_agent, data.to_agent, reason="handoff", candidates=list(offered)
            )

    def _open_run(self, span: Any) -> _Run:
        request = _request.get()
        session_id = (
            (request.session_id if request else None)
            or self._groups.get(span.trace_id)
            or api.current_session_id()  # the app's own session around the run
            or span.trace_id
        )
        agent = request.agent if request else None
        context = request.context if request else None
        session = Opened(None, api.session(session_id))
        return _Run(session, Opened(session.context, api.run(agent=agent)), request,
                    caller_handling=request.handling if request else None, starting_agent=agent, context=context,
                    slots={} if fields_of(context) is not None else None)

    def _open_turn(self, run: _Run, data: Any) -> None:
        run.close_turn()
        run.turn_agent = data.agent_name
        required = required_slots_for(run.starting_agent, data.agent_name)
        run.turn = Opened(run.run.context, api.turn(int(data.turn), source=data.agent_name, required_slots=required,
                                                    slots=run.slots))
        request, run.request = run.request, None
        if request is not None and request.user_input is not None:
            run.turn.run(_record_user_input, request.user_input)
        run.record_state(INPUT_SOURCE if request is not None else data.agent_name)

    def _close_run(self, run: _Run, error: BaseException | None) -> None:
        for opened in list(run.open.values()):
            opened.close(error or KeyboardInterrupt())
        run.open.clear()
        run.close_turn()
        run.run.close(error)
        run.session.close()

    @staticmethod
    def _pending_call(run: _Run, name: str) -> tuple[str | None, Any]:
        """The call id and arguments of the model's first unexecuted call of tool ``name``."""
        for position, (call_id, call_name, arguments) in enumerate(run.tool_calls):
            if call_name == name:
                del run.tool_calls[position]
                return call_id, json_value(arguments)
        return None, None

    @staticmethod
    def _finish_message(run: _Run, opened: Opened, data: Any, *, streamed: bool, error: BaseException | None) -> None:
        handle = opened.handle
        index = 2 if streamed else 0  # a streamed reply's text and reasoning are blocks 0 and 1 (deltas)
        for kind, text, call in _output_blocks(data):
            if call is not None:
                run.tool_calls.append(call)
                handle.text(tool_call_text(*call), index=index, kind="tool_call")
                index += 1
            elif text and not streamed:
                handle.text(str(text), index=index, kind=kind)
                index += 1
        _record_model_call(handle, data)
        opened.close(error)

    @staticmethod
    def _finish_tool(opened: Opened, data: Any, error: BaseException | None) -> None:
        handle = opened.handle
        if error is not None:
            handle.finish(error=error)
        else:
            handle.finish(json_value(data.output))
        opened.close()


def _error_of(span: Any) -> AgentsRunError | None:
    error = getattr(span, "error", None)
    if not error:
        return None
    detail = (error.get("data") or {}) if isinstance(error, dict) else {}
    message = error.get("message") if isinstance(error, dict) else str(error)
    reason = detail.get("error") if isinstance(detail, dict) else None
    return AgentsRunError(f"{message}: {reason}" if reason else str(message))


def _record_user_input(user_input: Any) -> None:
    """The run's input as user messages: a string, or the user items of an input list."""
    items = [{"role": "user", "content": user_input}] if isinstance(user_input, str) else list(user_input or ())
    for item in items:
        if _field(item, "role") != "user":
            continue
        content = _field(item, "content")
        if isinstance(content, list):
            content = " ".join(str(_field(part, "text") or "") for part in content)
        with api.message("user") as message:
            message.text(str(content or ""))


def _session_hint(kwargs: dict[str, Any]) -> str | None:
    """``conversation_id``, else the SDK ``Session``'s ``session_id`` (the trace's group id and
    trace id are read from the trace itself)."""
    conversation = kwargs.get("conversation_id")
    if isinstance(conversation, str) and conversation.strip():
        return conversation.strip()
    session = kwargs.get("session")
    session_id = getattr(session, "session_id", None) if session is not None else None
    return session_id.strip() if isinstance(session_id, str) and session_id.strip() else None


def _run_error(run: _Run) -> BaseException | None:
    """The exception the SDK is handling as it ends a run's task span: it ends the span in an
    ``except`` block when the run fails. One the app was already handling when it called
    ``Runner.run*`` (a retry in an ``except`` block) is not the run's."""
    handling = sys.exc_info()[1]
    return None if handling is run.caller_handling else handling


def _request_of(starting_agent: Any, user_input: Any, kwargs: dict[str, Any]) -> _Request:
    resumed = not isinstance(user_input, (str, list))  # a RunState: its input was recorded before
    return _Request(_session_hint(kwargs), getattr(starting_agent, "name", None), None if resumed else user_input,
                    sys.exc_info()[1], kwargs.get("context"))


class AgentsSdkInstrumentor(BaseInstrumentor):
    """Records OpenAI Agents SDK runs (entry point ``otel_session_agents``).

    Recording itself is configured like any otel_session app (``otel_session.configure()``, or the
    ``otel_session`` instrumentor under ``opentelemetry-instrument``; else from the environment on
    the first run).
    """

    _patch: PendingPatch | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return _instruments

    def _instrument(self, **kwargs: Any) -> None:
        AgentsSdkInstrumentor._patch = on_import("agents", _patch_agents)  # when the app imports it

    def _uninstrument(self, **kwargs: Any) -> None:
        patch, AgentsSdkInstrumentor._patch = AgentsSdkInstrumentor._patch, None
        if patch is not None:
            patch.undo()


def _patch_agents(agents: ModuleType) -> Callable[[], None]:
    """Register a trace processor and wrap the runner; the function returned undoes both (the SDK
    cannot remove a processor: this one is turned off)."""
    from agents.run import AgentRunner  # imported with the package

    processor = SessionTraceProcessor()
    agents.add_trace_processor(processor)
    original_run, original_streamed = AgentRunner.run, AgentRunner.run_streamed

    @functools.wraps(original_run)
    async def run(self: Any, starting_agent: Any, input: Any, **options: Any) -> Any:  # noqa: A002
        token = _request.set(_request_of(starting_agent, input, options))
        try:
            return await original_run(self, starting_agent, input, **options)
        finally:
            _request.reset(token)

    @functools.wraps(original_streamed)
    def run_streamed(self: Any, starting_agent: Any, input: Any, **options: Any) -> Any:  # noqa: A002
        token = _request.set(_request_of(starting_agent, input, options))
        try:
            result = original_streamed(self, starting_agent, input, **options)
        finally:
            _request.reset(token)
        _observe_queue(result, processor.observe)
        return result

    restore = replace_methods(AgentRunner, {"run": run, "run_streamed": run_streamed})

    def undo() -> None:
        restore()
        processor.enabled = False

    return undo


def _observe_queue(result: Any, observe: Callable[[Any], None]) -> None:
    """Call ``observe`` on each event the run queues for ``stream_events()``, as it is queued."""
    queue = getattr(result, "_event_queue", None)
    put = getattr(queue, "put_nowait", None)
    if put is None:
        warn_once("agents:stream", "otel_session: this Agents SDK's stream cannot be observed; deltas are not recorded")
        return

    def put_nowait(event: Any) -> None:
        observe(event)
        put(event)

    queue.put_nowait = put_nowait  # type: ignore[union-attr]
