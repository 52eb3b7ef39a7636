"""LangGraph graphs recorded as sessions, runs and turns: state channels as slots, routing as verdicts.

Usage::

    from otel_session.instrument.langgraph import LangGraphInstrumentor

    LangGraphInstrumentor().instrument(required_slots={"booking": ["date", "party_size"]})
    # or, with no code:
    #   OTEL_SESSION_LANGGRAPH_REQUIRED_SLOTS='{"booking": ["date"]}' opentelemetry-instrument python app.py

then ``graph.invoke`` / ``stream`` / ``ainvoke`` / ``astream`` as usual. Nothing in the graph
changes: the instrumentor wraps ``Pregel.stream`` and ``Pregel.astream`` (``invoke`` and
``ainvoke`` run through them), and for each outermost invocation adds a LangChain callback handler
to its config. LangGraph's callbacks name every node run (``metadata["langgraph_node"]``) with
the update it returned, every conditional edge's path function with the destination it chose, a
node's ``GraphInterrupt`` and the chat models and tools run inside nodes. Everything is recorded
through the public ``otel_session`` API (same codec, redactor and writer as any run). LangGraph
emits no OpenTelemetry spans of its own; this needs no LangSmith.

What maps to what (``docs/frameworks.md``):

================================  ===============================================================
LangGraph                         otel-session
================================  ===============================================================
``configurable.thread_id``        session id (no thread id: the app's ``otel_session.session()``,
                                  else the run is a session of its own)
one ``invoke``/``stream`` call    one run (``agent`` = the graph's name) holding one turn: the
(``ainvoke``/``astream`` too)     user input handled, state before (the thread's checkpoint) and
                                  after; ``state`` = the node(s) the thread waits in, else the
                                  last node that ran; turn index = invocations of the thread seen
                                  by this process
a state channel                   a slot: the update a node returned is a ``slot_write`` with
                                  ``source`` = the node (the invocation's input: ``input``); a
                                  change no node returned (a reducer's merge) is a ``slot_diff``
a messages channel                messages, not slots (``add_messages`` channels, or lists of
(``add_messages``)                LangChain messages): human → user, ai → assistant, tool → tool
a conditional edge taken          a ``transition_verdict``: from the node, to the destination(s),
                                  reason ``conditional edge <path>``, candidates = its path map
                                  (else every node), at most 24 (the rest counted)
``Command(goto=…)`` from a node   a ``transition_verdict`` with reason ``command``
``interrupt()``                   a ``transition_verdict`` to ``__interrupt__`` whose reason is
                                  the interrupt's value (redacted); ``Command(resume=…)`` on the
                                  thread is the next run of the same session, its value the
                                  user's message
a chat model in a node            an assistant message (streamed tokens as deltas, tool calls as
                                  ``tool_call`` blocks, model and usage as ``gen_ai.*`` span
                                  attributes)
a LangChain tool                  a tool execution
================================  ===============================================================

**Required slots** are declared, not inferred: ``required_slots`` maps a graph's name (every turn
of that graph) or ``"<graph>.<node>"`` (turns that end waiting in, or after, that node) to slot
names; ``instrument(required_slots=…)`` or the environment variable
``OTEL_SESSION_LANGGRAPH_REQUIRED_SLOTS`` (the same mapping as JSON). A turn's missing required
slots are those absent or None in the state after it, so ``repeated_asks`` answers "why did it ask
for the date twice?" across the runs of a thread (``otel-session facts SESSION --all-runs``).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping, Sequence
from typing import Any
from uuid import UUID

import orjson
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

import otel_session.instrument as api
from otel_session.instrument._log import warn_once
from otel_session.instrument._frameworks import Opened, replace_methods
from otel_session.normalize.genai_messages import tool_call_text

__all__ = ["ENV_REQUIRED_SLOTS", "LangGraphInstrumentor"]

ENV_REQUIRED_SLOTS = "OTEL_SESSION_LANGGRAPH_REQUIRED_SLOTS"
INPUT_SOURCE = "input"
INTERRUPT = "__interrupt__"

_instruments = ("langgraph >= 1.0",)

_ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}
_MAX_THREADS_COUNTED = 65_536
"""Threads whose invocations are counted (turn indexes); the least recently used go first."""

_active: contextvars.ContextVar[_GraphRun | None] = contextvars.ContextVar("otel_session_langgraph_run", default=None)


def _required_slots_from_env() -> dict[str, list[str]]:
    raw = os.environ.get(ENV_REQUIRED_SLOTS)
    if not raw:
        return {}
    try:
        value = orjson.loads(raw)
        return {str(key): [str(slot) for slot in slots] for key, slots in value.items()}
    except (orjson.JSONDecodeError, AttributeError, TypeError):
        warn_once("langgraph:env", "otel_session: %s is not a JSON object of lists; ignored", ENV_REQUIRED_SLOTS)
        return {}


class _Settings:
    """What ``instrument()`` was given: the required slots per graph and per graph node."""

    def __init__(self, required_slots: Mapping[str, Sequence[str]]) -> None:
        self.required_slots = {key: list(slots) for key, slots in required_slots.items()}
        self.turns: OrderedDict[str, int] = OrderedDict()
        self.lock = threading.Lock()

    def required(self, graph: str, nodes: Sequence[str]) -> list[str]:
        names = [*self.required_slots.get(graph, ())]
        for node in nodes:
            names += self.required_slots.get(f"{graph}.{node}", ())
        return list(dict.fromkeys(names))

    def next_turn(self, thread_id: str | None) -> int:
        if thread_id is None:
            return 0
        with self.lock:
            index = self.turns.pop(thread_id, 0)
            self.turns[thread_id] = index + 1
            if len(self.turns) > _MAX_THREADS_COUNTED:
                self.turns.popitem(last=False)
            return index


def _is_message(value: Any) -> bool:
    from langchain_core.messages import BaseMessage

    return isinstance(value, BaseMessage)


def _messages_channels(graph: Any) -> set[str]:
    """The graph's channels whose reducer is ``add_messages``."""
    channels = getattr(getattr(graph, "builder", None), "channels", None) or {}
    return {
        name for name, channel in channels.items()
        if "add_messages" in getattr(getattr(channel, "operator", None), "__name__", "")
    }


def _node_names(graph: Any) -> list[str]:
    nodes = getattr(getattr(graph, "builder", None), "nodes", None) or {}
    return [*nodes, "__end__"]


class _GraphRun:
    """One outermost graph invocation being recorded: its context, session, run and turn."""

    def __init__(self, graph: Any, config: Mapping[str, Any] | None, settings: _Settings) -> None:
        self.graph = graph
        self.name = str(getattr(graph, "name", None) or "LangGraph")
        self.config = config
        self.settings = settings
        configurable = (config or {}).get("configurable") or {}
        thread = configurable.get("thread_id")
        self.thread_id = str(thread) if thread is not None else None
        self.messages_channels = _messages_channels(graph)
        self.nodes: dict[UUID, str] = {}
        self.branches: dict[UUID, tuple[UUID, str, str, Any]] = {}
        """A conditional edge's path run → (its node's run, the node, the path's name, its spec)."""
        self.routes: dict[UUID, list[tuple[str, str, Any, Any]]] = {}
        """A node run → the edges it took, recorded after the node's own update (they end first)."""
        self.open: dict[UUID, Opened] = {}
        self.recorded_messages: set[str] = set()
        self.left_to_genai_spans: set[UUID] = set()
        """Chat model runs whose GenAI spans record them (see ``_recorded_by_genai_spans``)."""
        self.last_node: str | None = None
        self.resumed_with: str | None = None
        """A ``Command(resume=…)`` value, recorded as the user's message: a node that puts it in
        a messages channel does not record it twice."""
        self.root_output: Any = None
        self.context = contextvars.copy_context()
        self.context.run(_active.set, self)
        self.session = Opened(self.context, api.session(self.thread_id)) if self.thread_id else None
        parent = self.session.context if self.session is not None else self.context
        self.run = Opened(parent, api.run(agent=self.name))
        before = self._snapshot()
        self.before_values = dict(getattr(before, "values", None) or {}) if before is not None else {}
        waiting = list(getattr(before, "next", None) or ()) if before is not None else []
        # Where the thread is: the node(s) it waits in; a new thread is at __start__; a thread
        # whose last invocation ran to its end is where that one's turn ended (facts carry it over).
        state = ",".join(waiting) if waiting else (None if self.before_values else "__start__")
        self.turn = Opened(self.run.context, api.turn(
            settings.next_turn(self.thread_id), state=state, required_slots=settings.required(self.name, waiting),
            slots=self._slots(self.before_values), source=INPUT_SOURCE,
        ))

    # -- state -----------------------------------------------------------------------------------

    def _snapshot(self) -> Any:
        """The thread's checkpointed state (None without a checkpointer or a thread id)."""
        if self.thread_id is None or getattr(self.graph, "checkpointer", None) in (None, False):
            return None
        try:
            return self.graph.get_state({"configurable": (self.config or {}).get("configurable") or {}})
        except Exception:  # noqa: BLE001 - an async-only checkpointer, say: no state before/after
            return None

    def _slots(self, values: Mapping[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in values.items() if not self._is_messages(key, value)}

    def _is_messages(self, key: str, value: Any) -> bool:
        if key in self.messages_channels or _is_message(value):
            return True
        return isinstance(value, (list, tuple)) and bool(value) and all(_is_message(item) for item in value)

    # -- what nodes returned -------------------------------------------------------------------

    def record_update(self, update: Any, source: str) -> None:
        """A node's (or the input's) update: messages channels as messages, the rest as slot writes."""
        from langgraph.types import Command

        if isinstance(update, Command):
            if update.goto:
                self._verdict_of_command(source, update.goto)
            update = update.update
        if isinstance(update, (list, tuple)) and all(isinstance(item, tuple) and len(item) == 2 for item in update):
            update = dict(update)
        if not isinstance(update, Mapping):
            return
        for key, value in update.items():
            if self._is_messages(key, value):
                self.record_messages(value)
            else:
                api.slot_write(str(key), value, source=source)

    def record_messages(self, value: Any) -> None:
        from langchain_core.messages import convert_to_messages

        try:
            messages = convert_to_messages(value if isinstance(value, (list, tuple)) else [value])
        except (ValueError, TypeError, NotImplementedError):
            return
        for message in messages:
            if message.id is not None and message.id in self.recorded_messages:
                continue
            if message.type == "human" and self.resumed_with is not None and message.text == self.resumed_with:
                self.resumed_with = None
                continue
            if message.id is not None:
                self.recorded_messages.add(message.id)
            role = _ROLES.get(message.type, message.type)
            with api.message(role) as handle:
                if message.text:
                    handle.text(message.text)
                for position, call in enumerate(getattr(message, "tool_calls", None) or (), start=1):
                    handle.text(tool_call_text(call.get("id"), call.get("name"), call.get("args")),
                                index=position, kind="tool_call")

    def _verdict_of_command(self, node: str, goto: Any) -> None:
        from langgraph.types import Send

        targets = goto if isinstance(goto, (list, tuple)) else [goto]
        names = [target.node if isinstance(target, Send) else str(target) for target in targets]
        declared = getattr((getattr(self.graph.builder, "nodes", {}) or {}).get(node), "ends", None) or ()
        api.transition(node, ",".join(names), reason="command",
                                candidates=list(declared) or _node_names(self.graph))

    def branch_of(self, node: str, name: Any, tags: Sequence[str]) -> tuple[str, Any] | None:
        """The conditional edge (its name, its spec) whose path function a child run of ``node``
        is: the edge of that name, else — for a run of the steps after the node's function
        (``seq:step:2`` on; a lambda's path is named ``condition``) — the one edge whose path has
        that name, or the node's only edge. What the node's function runs is step 1's."""
        branches = (getattr(self.graph.builder, "branches", None) or {}).get(node) or {}
        if name in branches:
            return str(name), branches[name]
        steps = [tag[len("seq:step:"):] for tag in tags if isinstance(tag, str) and tag.startswith("seq:step:")]
        if not any(step.isdigit() and int(step) > 1 for step in steps):
            return None
        named = [(key, spec) for key, spec in branches.items() if getattr(spec.path, "name", None) == name]
        found = named or list(branches.items())
        return found[0] if len(found) == 1 else None

    def record_route(self, node: str, path: str, spec: Any, result: Any) -> None:
        from langgraph.types import Send

        chosen = result if isinstance(result, (list, tuple)) else [result]
        ends = getattr(spec, "ends", None) or {}
        names = [item.node if isinstance(item, Send) else str(ends.get(item, item)) for item in chosen]
        candidates = list(dict.fromkeys(ends.values())) if ends else _node_names(self.graph)
        api.transition(node, ",".join(names), reason=f"conditional edge {path}", candidates=candidates)

    # -- the end -----------------------------------------------------------------------------------

    def finish(self, error: BaseException | None) -> None:
        after = self._snapshot()
        if after is not None:
            values = dict(getattr(after, "values", None) or {})
            waiting = list(getattr(after, "next", None) or ())
        else:
            values = {**self.before_values, **(self.root_output if isinstance(self.root_output, Mapping) else {})}
            waiting = []
        where = waiting or ([self.last_node] if self.last_node else [])
        handle = self.turn.handle
        handle.finish(
            state=",".join(where) if where else "__end__",
            required_slots=self.settings.required(self.name, where),
            slots=self._slots(values),
        )
        for opened in list(self.open.values()):
            opened.close(error or KeyboardInterrupt())
        self.open.clear()
        self.turn.close(error)
        self.run.close(error)
        if self.session is not None:
            self.session.close()


def _recorded_by_genai_spans(serialized: Mapping[str, Any] | None) -> bool:
    """Whether a chat model's call is recorded by GenAI spans already: a langchain-openai model
    (it talks through the openai client) while the official openai-v2 instrumentor is on. Its
    ``chat`` span joins the run like any span inside it; recording the call again from LangChain's
    callbacks would double it."""
    path = (serialized or {}).get("id") or ()
    if not any(isinstance(part, str) and "openai" in part for part in path):
        return False
    try:
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    except ImportError:
        return False
    return bool(OpenAIInstrumentor().is_instrumented_by_opentelemetry)


def _handler_class() -> type:
    from langchain_core.callbacks import BaseCallbackHandler

    class SessionCallbackHandler(BaseCallbackHandler):
        """LangChain callbacks of one graph invocation → otel_session records (never raises)."""

        run_inline = True
        raise_error = False

        def __init__(self, graph_run: _GraphRun) -> None:
            self.graph_run = graph_run

        def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None,
                           metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
            run = self.graph_run
            name = kwargs.get("name")
            node = (metadata or {}).get("langgraph_node")
            tags = kwargs.get("tags") or ()
            is_task = any(isinstance(tag, str) and tag.startswith("graph:step:") for tag in tags)
            if node is not None and name == node and is_task and parent_run_id not in run.nodes:
                run.nodes[run_id] = node
            elif parent_run_id in run.nodes:
                source = run.nodes[parent_run_id]
                branch = run.branch_of(source, name, tags)
                if branch is not None:
                    run.branches[run_id] = (parent_run_id, source, *branch)

        def on_chain_end(self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
            run = self.graph_run
            try:
                if run_id in run.branches:
                    node_run, node, path, spec = run.branches.pop(run_id)
                    run.routes.setdefault(node_run, []).append((node, path, spec, outputs))
                elif run_id in run.nodes:
                    node = run.last_node = run.nodes.pop(run_id)
                    run.record_update(outputs, node)
                    for route in run.routes.pop(run_id, ()):
                        run.record_route(*route)
                elif parent_run_id is None:
                    run.root_output = outputs
            except Exception:  # noqa: BLE001
                warn_once("langgraph:chain", "otel_session: recording a LangGraph node failed", exc_info=True)

        def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
            from langgraph.errors import GraphInterrupt

            run = self.graph_run
            node = run.nodes.pop(run_id, None)
            run.branches.pop(run_id, None)
            run.routes.pop(run_id, None)
            if node is None or not isinstance(error, GraphInterrupt):
                return
            run.last_node = node
            for interrupt in (error.args[0] if error.args else ()) or ():
                value = getattr(interrupt, "value", interrupt)
                api.transition(node, INTERRUPT, reason=value if isinstance(value, str) else orjson.dumps(
                    value, default=str).decode(), candidates=[])

        # -- chat models ----------------------------------------------------------------------

        def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: UUID, **kwargs: Any) -> None:
            if _recorded_by_genai_spans(serialized):
                self.graph_run.left_to_genai_spans.add(run_id)
                return
            self.graph_run.open[run_id] = Opened(None, api.message("assistant"))

        def on_llm_new_token(self, token: str, *, run_id: UUID, **kwargs: Any) -> None:
            opened = self.graph_run.open.get(run_id)
            if opened is not None and token:
                opened.handle.delta(token)

        def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
            run = self.graph_run
            opened = run.open.pop(run_id, None)
            if run_id in run.left_to_genai_spans:  # its reply, returned by the node, is not recorded twice
                run.left_to_genai_spans.discard(run_id)
                message = getattr(response.generations[0][0], "message", None)
                if getattr(message, "id", None) is not None:
                    run.recorded_messages.add(message.id)
            if opened is None:
                return
            try:
                message = getattr(response.generations[0][0], "message", None)
                handle = opened.handle
                if message is not None:
                    if message.id is not None:
                        run.recorded_messages.add(message.id)
                    streamed = getattr(handle, "delta_count", 0) > 0  # its text is its deltas
                    if message.text and not streamed:
                        handle.text(message.text)
                    for position, call in enumerate(getattr(message, "tool_calls", None) or (), start=1):
                        handle.text(tool_call_text(call.get("id"), call.get("name"), call.get("args")),
                                    index=position, kind="tool_call")
                    usage = getattr(message, "usage_metadata", None) or {}
                    metadata = getattr(message, "response_metadata", None) or {}
                    handle.model_call(metadata.get("model_name") or metadata.get("model"),
                                      input_tokens=usage.get("input_tokens"), output_tokens=usage.get("output_tokens"))
            finally:
                opened.close()

        def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
            self.graph_run.left_to_genai_spans.discard(run_id)
            opened = self.graph_run.open.pop(run_id, None)
            if opened is not None:
                opened.close(error)

        # -- tools ----------------------------------------------------------------------------

        def on_tool_start(self, serialized: Any, input_str: str, *, run_id: UUID, inputs: Any = None,
                          **kwargs: Any) -> None:
            name = (serialized or {}).get("name") or kwargs.get("name") or "tool"
            arguments = inputs if inputs is not None else input_str
            section = api.tool_execution(name, call_id=kwargs.get("tool_call_id"), arguments=arguments)
            self.graph_run.open[run_id] = Opened(None, section)

        def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
            opened = self.graph_run.open.pop(run_id, None)
            if opened is not None:
                opened.handle.finish(getattr(output, "content", output))
                opened.close()

        def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
            opened = self.graph_run.open.pop(run_id, None)
            if opened is not None:
                opened.handle.finish(error=error)
                opened.close()

    return SessionCallbackHandler


def _with_handler(config: Mapping[str, Any] | None, handler: Any) -> dict[str, Any]:
    """``config`` with ``handler`` among its callbacks (a list or a callback manager)."""
    merged = dict(config or {})
    callbacks = merged.get("callbacks")
    if callbacks is None:
        merged["callbacks"] = [handler]
    elif isinstance(callbacks, list):
        merged["callbacks"] = [*callbacks, handler]
    else:
        manager = callbacks.copy()
        manager.add_handler(handler, inherit=True)
        merged["callbacks"] = manager
    return merged


class LangGraphInstrumentor(BaseInstrumentor):
    """Records LangGraph graph invocations (entry point ``otel_session_langgraph``).

    ``instrument(required_slots={...})``: see the module docstring; the environment variable
    ``OTEL_SESSION_LANGGRAPH_REQUIRED_SLOTS`` is read when the argument is not given.
    """

    _restore: Callable[[], None] | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return _instruments

    def _instrument(self, **kwargs: Any) -> None:
        from langgraph.pregel import Pregel

        required = kwargs.get("required_slots")
        settings = _Settings(required if required is not None else _required_slots_from_env())
        handler_class = _handler_class()
        cls = LangGraphInstrumentor
        original_stream, original_astream = Pregel.stream, Pregel.astream

        def record_input(graph_run: _GraphRun, input: Any) -> None:  # noqa: A002
            from langgraph.types import Command

            try:
                if isinstance(input, Command):
                    if input.resume is not None:
                        resume = input.resume
                        text = resume if isinstance(resume, str) else orjson.dumps(resume, default=str).decode()
                        with api.message("user") as handle:
                            handle.text(text)
                        graph_run.resumed_with = text
                    if input.update is not None:
                        graph_run.record_update(input.update, INPUT_SOURCE)
                else:
                    graph_run.record_update(input, INPUT_SOURCE)
            except Exception:  # noqa: BLE001
                warn_once("langgraph:input", "otel_session: recording a LangGraph input failed", exc_info=True)

        def begin(
            graph: Any, input: Any, config: Any, original: Any, options: dict[str, Any]  # noqa: A002
        ) -> tuple[_GraphRun, Any] | None:
            """The run of this invocation and the graph's own stream of it, created in the run's
            turn; None for a nested invocation or when recording fails (the graph runs as is)."""
            if _active.get() is not None:
                return None  # a subgraph, or a graph run inside a node: part of the outer run
            try:
                graph_run = _GraphRun(graph, config, settings)
                config = _with_handler(config, handler_class(graph_run))
                graph_run.turn.run(record_input, graph_run, input)
            except Exception:  # noqa: BLE001
                warn_once("langgraph:begin", "otel_session: recording a LangGraph run failed", exc_info=True)
                return None
            return graph_run, graph_run.turn.context.run(original, graph, input, config, **options)

        def end(graph_run: _GraphRun, error: BaseException | None) -> None:
            try:
                graph_run.context.run(graph_run.finish, error)
            except Exception:  # noqa: BLE001
                warn_once("langgraph:end", "otel_session: recording the end of a LangGraph run failed", exc_info=True)

        @functools.wraps(original_stream)
        def stream(self: Any, input: Any, config: Any = None, **options: Any) -> Iterator[Any]:  # noqa: A002
            begun = begin(self, input, config, original_stream, options)
            if begun is None:
                yield from original_stream(self, input, config, **options)
                return
            graph_run, chunks = begun
            context = graph_run.turn.context
            error: BaseException | None = None
            try:
                while True:
                    try:
                        chunk = context.run(next, chunks)
                    except StopIteration:
                        break
                    yield chunk
            except GeneratorExit:
                context.run(chunks.close)
                raise
            except BaseException as exc:
                error = exc
                raise
            finally:
                end(graph_run, error)

        @functools.wraps(original_astream)
        async def astream(
            self: Any, input: Any, config: Any = None, **options: Any  # noqa: A002
        ) -> AsyncIterator[Any]:
            begun = begin(self, input, config, original_astream, options)
            if begun is None:
                async for chunk in original_astream(self, input, config, **options):
                    yield chunk
                return
            graph_run, chunks = begun
            context = graph_run.turn.context
            error: BaseException | None = None
            try:
                while True:
                    try:
                        chunk = await asyncio.create_task(chunks.__anext__(), context=context)
                    except StopAsyncIteration:
                        break
                    yield chunk
            except GeneratorExit:
                await asyncio.create_task(chunks.aclose(), context=context)
                raise
            except BaseException as exc:
                error = exc
                raise
            finally:
                end(graph_run, error)

        wrappers: dict[str, Callable[..., Any]] = {"stream": stream, "astream": astream}
        if sys.version_info < (3, 11):  # a task cannot be given its context before Python 3.11
            del wrappers["astream"]
            warn_once("langgraph:py310", "otel_session: ainvoke/astream are recorded on Python 3.11 and later only")
        cls._restore = replace_methods(Pregel, wrappers)

    def _uninstrument(self, **kwargs: Any) -> None:
        cls = LangGraphInstrumentor
        if cls._restore is not None:
            cls._restore()
            cls._restore = None
