"""One outermost LangGraph invocation being recorded (``langgraph``'s instrumentor makes it).

Contract::

    settings = Settings(required_slots)         # what instrument() was given; counts turns per thread
    active_run.get() -> GraphRun | None         # the invocation the current context is inside of
    graph_run = GraphRun(graph, config, settings)  # opens session, run and turn; ``active_run`` set in its context
    graph_run.record_update(update, source)     # messages channels as messages, the rest as slot writes
    graph_run.record_messages(value)            # LangChain messages, each recorded once
    graph_run.branch_of(node, name, tags) / record_route(node, path, spec, result)   # routing as verdicts
    graph_run.finish(error)                     # the state after: turn, run and session closed

Everything is recorded through the public ``otel_session`` API. LangGraph's own modules are imported
here only while a graph runs (the app imported LangGraph then).
"""

from __future__ import annotations

import contextvars
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

import otel_session.instrument as api
from otel_session.instrument._frameworks import Opened
from otel_session.instrument._state import INPUT_SOURCE
from otel_session.normalize.genai_messages import tool_call_text

__all__ = ["INPUT_SOURCE", "GraphRun", "Settings", "active_run"]

_ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}
_MAX_THREADS_COUNTED = 65_536
"""Threads whose invocations are counted (turn indexes); the least recently used go first."""

active_run: contextvars.ContextVar[GraphRun | None] = contextvars.ContextVar("otel_session_langgraph_run", default=None)


class Settings:
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


class GraphRun:
    """One outermost graph invocation being recorded: its context, session, run and turn."""

    def __init__(self, graph: Any, config: Mapping[str, Any] | None, settings: Settings) -> None:
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
        self.context.run(active_run.set, self)
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
