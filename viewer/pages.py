"""HTML pages: plain templates that load ES modules from ``static/``; all data comes from the API.

Ids reach the page only as ``data-*`` attributes (autoescaped), and the scripts render every
journal string with ``textContent``.
"""

from __future__ import annotations

from flask import Blueprint, render_template

from .store import check_session_id

__all__ = ["bp"]

bp = Blueprint("pages", __name__)


@bp.get("/")
def sessions() -> str:
    """Show all sessions, newest first."""
    return render_template("sessions.html")


@bp.get("/sessions/<path:session_id>")
def session(session_id: str) -> str:
    """Show one session: its runs and the per-turn facts of the chosen run."""
    check_session_id(session_id)
    return render_template("session.html", session_id=session_id)


@bp.get("/sessions/<path:session_id>/runs/<run_id>")
def replay(session_id: str, run_id: str) -> str:
    """Replay one run at a cursor, live while it records."""
    check_session_id(session_id)
    return render_template("replay.html", session_id=session_id, run_id=run_id, offline=False)


@bp.get("/open")
def open_bundle() -> str:
    """Replay a downloaded bundle file in the page, with no server calls."""
    return render_template("replay.html", session_id="", run_id="", offline=True)
