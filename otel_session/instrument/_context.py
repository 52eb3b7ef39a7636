"""What the current context is inside of: session, run and turn, in OpenTelemetry context and baggage.

Contract::

    with session("call-42"): ...          # session.id in context and W3C baggage (a Section)
    scope_of(ctx) -> Scope | None         # the session id, run and turn a context is inside of
    current_session_id() / current_run()  # of the current context (baggage: another process's)
    open_run_for("guard") -> (run, turn) | None   # None, said once, outside an open run
    span_session_id(span) -> str | None   # a span's session.id, else its captured session header

State lives in the OpenTelemetry context (contextvars), so threads started with a copied context
and asyncio tasks see the session, run and turn they were started in. The span processor reads a
span's scope from here; the run and turn sections write it. A scope holds its run and turn as
``_handles.OpenRun`` / ``OpenTurn``: this module imports no section.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry import baggage, context, trace

from otel_session.core import semconv as sc
from otel_session.instrument._log import warn_once
from otel_session.instrument._section import Section

if TYPE_CHECKING:
    from otel_session.instrument._handles import OpenRun, OpenTurn

__all__ = [
    "DEFAULT_SESSION_HEADER",
    "ENV_SESSION_HEADER",
    "SCOPE_KEY",
    "Scope",
    "current_run",
    "current_session_id",
    "open_run_for",
    "scope_of",
    "session",
    "span_session_id",
]

SCOPE_KEY = context.create_key("otel_session.scope")
ENV_SESSION_HEADER = "OTEL_SESSION_HEADER"
DEFAULT_SESSION_HEADER = "X-Session-Id"
_HEADER_PREFIX = "http.request.header."


@dataclass(frozen=True)
class Scope:
    """What the current context is inside of."""

    session_id: str | None = None
    run: OpenRun | None = None
    turn: OpenTurn | None = None


def scope_of(ctx: context.Context | None = None) -> Scope | None:
    """The scope of ``ctx`` (default: the current context), None outside every section."""
    return context.get_value(SCOPE_KEY, ctx)  # type: ignore[return-value]


def current_session_id() -> str | None:
    """The session id of the current context: from ``session()``, the ``session.id`` baggage, else
    the current span's (``span_session_id``: the session header of the request being served)."""
    scope = scope_of()
    if scope is not None and scope.session_id:
        return scope.session_id
    value = baggage.get_baggage(sc.BAGGAGE_SESSION_ID)
    return str(value) if value else span_session_id(trace.get_current_span())


def _header_attribute() -> str:
    """The attribute the official HTTP server instrumentations capture the session header as, when
    ``OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SERVER_REQUEST`` names it: the header
    ``$OTEL_SESSION_HEADER`` (default ``X-Session-Id``) as ``http.request.header.x_session_id``."""
    name = os.environ.get(ENV_SESSION_HEADER) or DEFAULT_SESSION_HEADER
    return _HEADER_PREFIX + name.strip().lower().replace("-", "_")


def span_session_id(span: Any) -> str | None:
    """The session id a span of this process carries: its ``session.id``, else its captured
    session header (a list of values: the first that is not blank). None for other spans."""
    attributes = getattr(span, "attributes", None)  # SDK spans have them; a remote parent has none
    if not attributes:
        return None
    value = attributes.get(sc.SESSION_ID)
    if isinstance(value, str) and value:
        return value
    value = attributes.get(_header_attribute())
    if isinstance(value, (list, tuple)):
        value = next((item for item in value if isinstance(item, str) and item.strip()), None)
    return value.strip() if isinstance(value, str) and value.strip() else None


def current_run() -> OpenRun | None:
    """The run of the current context, if any."""
    scope = scope_of()
    return scope.run if scope is not None else None


def open_run_for(api: str) -> tuple[OpenRun, OpenTurn | None] | None:
    """The open run (and turn) ``api`` records into; None outside one (said once per api)."""
    scope = scope_of()
    if scope is None or scope.run is None or not scope.run.open:
        warn_once(f"outside:{api}", "otel_session.%s called outside a run: nothing recorded (said once)", api)
        return None
    return scope.run, scope.turn


class session(Section):  # noqa: N801 - used like a function: ``with otel_session.session("call-42"):``
    """Put the code inside into session ``session_id`` (``session.id`` in context and W3C baggage)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(session_id)
        self.session_id = str(session_id)
        self._token: object | None = None

    def __enter__(self) -> session:
        ctx = context.get_current()
        previous = scope_of(ctx) or Scope()
        ctx = context.set_value(SCOPE_KEY, Scope(session_id=self.session_id), ctx)
        ctx = baggage.set_baggage(sc.BAGGAGE_SESSION_ID, self.session_id, ctx)
        if previous.run is not None:
            ctx = baggage.remove_baggage(sc.BAGGAGE_RUN_ID, ctx)
        self._token = context.attach(ctx)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None:
            context.detach(self._token)
            self._token = None

