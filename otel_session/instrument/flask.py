"""Flask integration: a session and a run per request, ``X-Run-Id`` on the response.

Usage::

    from otel_session.instrument.flask import FlaskOtelSession

    app = Flask(__name__)
    FlaskOtelSession(app, agent="booking")            # or ext = FlaskOtelSession(); ext.init_app(app)

The session id comes from ``session_id(request)`` when you pass that callable, else the
``X-Session-Id`` header, else the ``session.id`` W3C baggage entry of the incoming request. A
request with none of them is served without recording. Inside the view, ``otel_session.turn()`` …
act on the request's run; the response carries ``X-Run-Id``. Works beside
``opentelemetry-instrumentation-flask``: its server span gets the session ids stamped, the run span
is a new trace linked to it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Flask, Request, Response, g, request
from opentelemetry import baggage, propagate

from otel_session.core import semconv as sc
from otel_session.instrument._context import session
from otel_session.instrument._run import run

__all__ = ["RUN_ID_HEADER", "SESSION_ID_HEADER", "FlaskOtelSession"]

SESSION_ID_HEADER = "X-Session-Id"
RUN_ID_HEADER = "X-Run-Id"
_STATE = "_otel_session"


class FlaskOtelSession:
    """Opens ``otel_session.session()`` and ``otel_session.run()`` around every request."""

    def __init__(
        self,
        app: Flask | None = None,
        *,
        agent: str | None = None,
        session_id: Callable[[Request], str | None] | None = None,
        kind: str = "live",
        eval_id: str | None = None,
    ) -> None:
        self.agent = agent
        self.session_id = session_id
        self.kind = kind
        self.eval_id = eval_id
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        app.before_request(self._before_request)
        app.after_request(self._after_request)
        app.teardown_request(self._teardown_request)
        app.extensions["otel_session"] = self

    def session_id_for(self, incoming: Request) -> str | None:
        """The session id of a request: callable, ``X-Session-Id``, then ``session.id`` baggage."""
        if self.session_id is not None:
            return self.session_id(incoming)
        header = incoming.headers.get(SESSION_ID_HEADER)
        if header:
            return header
        value = baggage.get_baggage(sc.BAGGAGE_SESSION_ID) or baggage.get_baggage(
            sc.BAGGAGE_SESSION_ID, propagate.extract(incoming.headers)
        )
        return str(value) if value else None

    def _before_request(self) -> None:
        session_id = self.session_id_for(request)
        if not session_id:
            return
        session_section = session(session_id)
        session_section.__enter__()
        run_section = run(self.agent or request.endpoint or "flask", kind=self.kind, eval_id=self.eval_id)
        handle = run_section.__enter__()
        g.setdefault(_STATE, {"session": session_section, "run": run_section, "handle": handle, "status": None})

    def _after_request(self, response: Response) -> Response:
        state: dict[str, Any] | None = g.get(_STATE)
        if state is not None:
            run_id = state["handle"].run_id
            if run_id:
                response.headers[RUN_ID_HEADER] = run_id
            state["status"] = response.status_code
        return response

    def _teardown_request(self, exc: BaseException | None) -> None:
        state: dict[str, Any] | None = g.pop(_STATE, None)
        if state is None:
            return
        if exc is None and (state["status"] or 200) >= 500:
            exc = RuntimeError(f"HTTP {state['status']}")
        state["run"].__exit__(type(exc) if exc else None, exc, None)
        state["session"].__exit__(None, None, None)
