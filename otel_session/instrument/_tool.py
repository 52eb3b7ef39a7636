"""A tool execution: its span ``execute_tool {name}``, progress updates, its result or error.

Contract::

    with tool_execution("lookup", call_id="c1", arguments={...}) as handle:   # a Section
        handle.update("half way")
        handle.finish(result)            # or finish(error=exc); an exception inside finishes as an error
    @tool()                              # the same around a function: bound arguments, return value
    def lookup(date): ...
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from otel_session.core import semconv as sc
from otel_session.instrument._log import capture_failed
from otel_session.instrument._run import ChildSection
from otel_session.instrument._section import F, Nothing, label
from otel_session.core.journal import EventType
from otel_session.normalize import JournalEvent
from otel_session.normalize.codec import EVENT_NAMES, encode

if TYPE_CHECKING:
    from otel_session.instrument._handles import OpenRun, OpenTurn

__all__ = ["ToolHandle", "tool", "tool_execution"]

_E = {member: member.value for member in EventType}  # an enum member's ``.value`` is a descriptor call


class ToolHandle:
    """One tool execution: ``update()`` for progress, ``finish(result=…)`` or ``finish(error=…)``."""

    def __init__(self, run_handle: OpenRun, turn_index: int | None, span: trace.Span, name: str, call_id: str) -> None:
        self.run = run_handle
        self.span = span
        self.name = name
        self.call_id = call_id
        self.turn_index = turn_index
        self.span_id_hex = f"{span.get_span_context().span_id:016x}"
        self.finished = False
        self.updates = 0

    def event(self, event_type: str, payload: dict[str, Any]) -> JournalEvent:
        """A raw record of this tool execution, now, redacted once."""
        return self.run.event(
            event_type, payload, span_id=self.span_id_hex, turn_index=self.turn_index, tool_call_id=self.call_id
        )

    def update(self, detail: str | None = None) -> None:
        """Record a progress tick (``detail`` is free text, redacted)."""
        if self.finished:
            return
        try:
            self.updates += 1
            event = self.event(_E[EventType.TOOL_EXECUTION_UPDATED], {} if detail is None else {"detail": str(detail)})
            self.span.add_event(EVENT_NAMES[event.type], encode(event.type, event.payload), timestamp=event.at_ns)
            self.run.append(event)
        except Exception:  # noqa: BLE001
            capture_failed("a tool update")

    def finish(self, result: Any = None, *, error: BaseException | str | None = None) -> None:
        """Close the execution with its result (status ok) or its error (status error)."""
        if self.finished:
            return
        self.finished = True
        try:
            if error is None:
                payload: dict[str, Any] = {"status": "ok", "result": result}
            else:
                error_type = type(error).__qualname__ if isinstance(error, BaseException) else "ToolError"
                text = f"{error_type}: {error}" if isinstance(error, BaseException) else str(error)
                payload = {"status": "error", "error": text}
                self.span.set_attribute(sc.ERROR_TYPE, error_type)
                self.span.set_status(Status(StatusCode.ERROR, error_type))
            event = self.event(_E[EventType.TOOL_EXECUTION_FINISHED], payload)
            self.span.set_attributes(encode(event.type, event.payload))
            self.run.append(event)
        except Exception:  # noqa: BLE001
            capture_failed("the end of a tool execution")
        finally:
            self.span.end()


_NO_TOOL = Nothing(("update", "finish"), call_id=None)


class tool_execution(ChildSection):  # noqa: N801
    """One tool call (span ``execute_tool {name}``); an exception inside finishes it as an error."""

    api, what, null = "tool_execution", "a tool execution", _NO_TOOL

    def __init__(self, name: str, *, call_id: str | None = None, arguments: Any = None) -> None:
        super().__init__(name, call_id=call_id, arguments=arguments)
        self.name = label(name)
        self.call_id = call_id
        self.arguments = arguments

    def _open(self, run_handle: OpenRun, turn_handle: OpenTurn | None) -> ToolHandle:
        turn_index = turn_handle.index if turn_handle is not None else None
        payload = {"name": self.name, "arguments": self.arguments}
        started = run_handle.event(_E[EventType.TOOL_EXECUTION_STARTED], payload, turn_index=turn_index)
        attributes: dict[str, Any] = {sc.OPERATION_NAME: "execute_tool"}
        if turn_index is not None:
            attributes[sc.TURN_INDEX] = turn_index
        span = run_handle.start_span(f"execute_tool {started.payload['name']}", started, attributes)  # redacted
        # An id given by the app may hold PII (a model's call id quoting input): stored as ids are.
        call_id = run_handle.redactor.identifier(self.call_id) if self.call_id else (
            f"call-{span.get_span_context().span_id:016x}")
        span.set_attribute(sc.TOOL_CALL_ID, call_id)
        handle = ToolHandle(run_handle, turn_index, span, self.name, call_id)
        started.tool_call_id = call_id
        run_handle.append(started)
        return handle

    def _close(self, handle: ToolHandle, exc: BaseException | None) -> None:
        if exc is not None:
            handle.finish(error=exc)
        else:
            handle.finish()


def tool(name: str | None = None) -> Callable[[F], F]:
    """Decorate a tool function: its bound arguments, its return value or exception are recorded."""

    def decorate(function: F) -> F:
        tool_name = name or function.__name__
        signature = inspect.signature(function)

        def arguments_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            try:
                bound = signature.bind(*args, **kwargs)
                bound.apply_defaults()
                return dict(bound.arguments)
            except TypeError:
                return {"args": list(args), "kwargs": kwargs}

        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def call_async(*args: Any, **kwargs: Any) -> Any:
                with tool_execution(tool_name, arguments=arguments_of(args, kwargs)) as handle:
                    result = await function(*args, **kwargs)
                    handle.finish(result)
                    return result

            return call_async  # type: ignore[return-value]

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            with tool_execution(tool_name, arguments=arguments_of(args, kwargs)) as handle:
                result = function(*args, **kwargs)
                handle.finish(result)
                return result

        return call  # type: ignore[return-value]

    return decorate

