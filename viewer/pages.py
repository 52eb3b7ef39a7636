"""HTML pages: plain templates that load ES modules from ``static/``; all data comes from the API.

Ids reach the page only as ``data-*`` attributes (autoescaped), and the scripts render every
journal string with ``textContent``. A session or run that does not exist answers with its status
(404, or 409 for a run of another session) and a page that says so at the top.
"""

from __future__ import annotations

from flask import Blueprint, Response, current_app, render_template, request

from .api import store
from .errors import ApiError

__all__ = ["bp"]

bp = Blueprint("pages", __name__)


@bp.get("/")
def sessions() -> str:
    """Show every run, live and eval, filtered, sorted and paged."""
    return render_template("sessions.html")


@bp.get("/sessions/<path:session_id>")
def session(session_id: str) -> str:
    """Show one session: its runs (eval runs too), what went wrong, facts of the chosen run, feedback."""
    runs = store().runs(session_id)  # 404 when the session has no runs
    return render_template("session.html", session_id=runs[0].session_id)  # as stored: never a typed id's PII


@bp.get("/sessions/<path:session_id>/runs/<run_id>")
def replay(session_id: str, run_id: str) -> str:
    """Replay one run at a cursor, live while it records."""
    run = store().resolve(session_id, run_id)
    return render_template("replay.html", session_id=run.session_id, run_id=run.run_id, offline=False)


@bp.get("/compare")
def compare() -> str:
    """Two runs side by side, turn by turn: ``?left=<session_id>/<run_id>&right=<session_id>/<run_id>``."""
    sides = []
    for name in ("left", "right"):
        session_id, _, run_id = request.args.get(name, "").rpartition("/")
        if not session_id or not run_id:
            raise ApiError(400, "bad_parameter", f"{name} must be <session_id>/<run_id>")
        run = store().resolve(session_id, run_id)
        sides.append((run.session_id, run.run_id))
    return render_template("compare.html", sides=sides)


@bp.get("/open")
def open_bundle() -> str:
    """Replay a downloaded bundle file in the page, with no server calls."""
    return render_template("replay.html", session_id="", run_id="", offline=True)


@bp.get("/sessions/<path:session_id>/runs/<run_id>/export.html")
def export(session_id: str, run_id: str) -> Response:
    """Download the run as one self-contained HTML file (``otel-session export-html`` does the same)."""
    from .export import export_html

    run = store().resolve(session_id, run_id)
    html = export_html(current_app.config["BUNDLE_DIR"], run.session_id, run.run_id, app=current_app)
    return Response(html, mimetype="text/html", headers={
        "Content-Disposition": f'attachment; filename="{run.run_id}.html"'})
