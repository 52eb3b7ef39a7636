"""LangGraph graphs recorded as sessions, runs and turns: state channels as slots, routing as verdicts.

Usage::

    from otel_session.instrument.langgraph import LangGraphInstrumentor

    LangGraphInstrumentor().instrument(required_slots={"booking": ["date", "party_size"]})
    # or, with no code:
    #   OTEL_SESSION_REQUIRED_SLOTS='booking=date,party_size' opentelemetry-instrument python app.py

then ``graph.invoke`` / ``stream`` / ``ainvoke`` / ``astream`` as usual. Nothing in the graph
changes: when the app imports ``langgraph.pregel`` (at once if it has; ``instrument()`` never
imports it: ``_on_import``), the instrumentor wraps ``Pregel.stream`` and ``Pregel.astream``
(``invoke`` and ``ainvoke`` run through them), and for each outermost invocation adds a LangChain callback handler
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
names; ``instrument(required_slots=…)`` or the setting every framework shares,
``OTEL_SESSION_REQUIRED_SLOTS`` (``core.config``; the older ``OTEL_SESSION_LANGGRAPH_REQUIRED_SLOTS``
still works). A turn's missing required
slots are those absent or None in the state after it, so ``repeated_asks`` answers "why did it ask
for the date twice?" across the runs of a thread (``otel-session facts SESSION --all-runs``).
"""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping
from types import ModuleType
from typing import Any
from uuid import UUID

import orjson
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

import otel_session.instrument as api
from otel_session.core.config import ENV_LANGGRAPH_REQUIRED_SLOTS, required_slots_setting
from otel_session.instrument._log import warn_once
from otel_session.instrument._frameworks import Opened, replace_methods
from otel_session.instrument._langgraph_run import INPUT_SOURCE, GraphRun, Settings, active_run
from otel_session.instrument._on_import import PendingPatch, on_import
from otel_session.normalize.genai_messages import tool_call_text

__all__ = ["ENV_REQUIRED_SLOTS", "LangGraphInstrumentor"]

ENV_REQUIRED_SLOTS = ENV_LANGGRAPH_REQUIRED_SLOTS  # deprecated: OTEL_SESSION_REQUIRED_SLOTS serves every framework
INTERRUPT = "__interrupt__"

_instruments = ("langgraph >= 1.0",)



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

        def __init__(self, graph_run: GraphRun) -> None:
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

    ``instrument(required_slots={...})``: see the module docstring; the setting
    ``OTEL_SESSION_REQUIRED_SLOTS`` (``core.config.required_slots_setting``) is read when the
    argument is not given.
    """

    _patch: PendingPatch | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return _instruments

    def _instrument(self, **kwargs: Any) -> None:
        required = kwargs.get("required_slots")
        settings = Settings(required if required is not None else required_slots_setting())
        # when the app imports LangGraph's Pregel (every compiled graph is one)
        LangGraphInstrumentor._patch = on_import("langgraph.pregel", functools.partial(_patch_pregel, settings))

    def _uninstrument(self, **kwargs: Any) -> None:
        patch, LangGraphInstrumentor._patch = LangGraphInstrumentor._patch, None
        if patch is not None:
            patch.undo()


def _patch_pregel(settings: Settings, pregel: ModuleType) -> Callable[[], None]:
    """Wrap ``Pregel.stream`` and ``astream``; the function returned puts them back."""
    Pregel = pregel.Pregel  # noqa: N806 - the class
    handler_class = _handler_class()
    original_stream, original_astream = Pregel.stream, Pregel.astream

    def record_input(graph_run: GraphRun, input: Any) -> None:  # noqa: A002
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
    ) -> tuple[GraphRun, Any] | None:
        """The run of this invocation and the graph's own stream of it, created in the run's
        turn; None for a nested invocation or when recording fails (the graph runs as is)."""
        if active_run.get() is not None:
            return None  # a subgraph, or a graph run inside a node: part of the outer run
        try:
            graph_run = GraphRun(graph, config, settings)
            config = _with_handler(config, handler_class(graph_run))
            graph_run.turn.run(record_input, graph_run, input)
        except Exception:  # noqa: BLE001
            warn_once("langgraph:begin", "otel_session: recording a LangGraph run failed", exc_info=True)
            return None
        return graph_run, graph_run.turn.context.run(original, graph, input, config, **options)

    def end(graph_run: GraphRun, error: BaseException | None) -> None:
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
    return replace_methods(Pregel, wrappers)
