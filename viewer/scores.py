"""Evaluation scores beyond the 1–5 feedback: named, numeric, boolean or categorical, per run or
per turn, with a comment.

Routes::

    POST /api/sessions/<sid>/scores  {run_id?, name, value, comment?, turn_index?}   -> 201
    GET  /api/sessions/<sid>/scores  -> {"session_id", "scores": [{at, run_id, name, value, comment, turn_index?}]}

A score is a line of the run's ``feedback.ndjson`` beside its ratings (``{"kind": "score", ...}``;
``BundleStore.append_feedback``), so it travels with the bundle, stays outside capture integrity,
and its comment and a categorical value are redacted like feedback comments. ``name`` is an
identifier (letters, digits, ``_ . : -``, at most 64); ``value`` a finite number, a boolean, or a
category (text of at most 100 characters). The run's catalog row is read again at once, so lists
(``scores``: last value, count, mean) and the dashboard (a score's mean over time) show it, and
``?score=NAME`` / ``?score.NAME=VALUE`` filter by it. Scores the app set on its spans
(``otel_session.score.<name>``: ``normalize.labels``) join these in the row, not in this list.
"""

from __future__ import annotations

import re

from flask import Blueprint, Response, jsonify

from otel_session.catalog.rows import is_score_value

from .api import comment_of, feedback_index, json_body, listing, session_records, store
from .errors import ApiError

__all__ = ["bp"]

bp = Blueprint("scores", __name__, url_prefix="/api")

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")


@bp.post("/sessions/<path:session_id>/scores")
def add_score(session_id: str) -> tuple[Response, int]:
    """Record a named score on a run (the latest when no ``run_id`` is given), or on one of its turns."""
    body = json_body("{run_id?, name, value, comment?, turn_index?}")
    name, value, turn_index = body.get("name"), body.get("value"), body.get("turn_index")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ApiError(400, "bad_score", "name is 1 to 64 letters, digits or _ . : - (starting with a letter or digit)")
    if not is_score_value(value):
        raise ApiError(400, "bad_score", "value is a finite number, true/false, or a category of 1 to 100 characters")
    if turn_index is not None and (type(turn_index) is not int or turn_index < 0):
        raise ApiError(400, "bad_score", "turn_index is a non-negative integer")
    comment = comment_of(body, "bad_score")
    run = store().resolve(session_id, body.get("run_id"))
    fields = {"kind": "score", "name": name, "value": value, **({"turn_index": turn_index} if turn_index is not None else {})}
    record = store().append_feedback(run, comment=comment, **fields)
    listing().rows([run.path])  # the row read again (its feedback file changed) and written back
    return jsonify(session_id=run.session_id, run_id=run.run_id, fallback_to_latest_run=run.fallback_to_latest_run,
                   at=record["at"]), 201


@bp.get("/sessions/<path:session_id>/scores")
def scores(session_id: str) -> Response:
    """Every score on the session's runs, newest first."""
    stored, records = session_records(session_id, feedback_index().scores)
    return jsonify(session_id=stored, scores=records)
