"""The JSON API (SPEC §8.2). Read-only except feedback; errors are ``{"error", "message"}``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from flask import Blueprint, Response, current_app, jsonify, request

from otel_session.catalog import Scope
from otel_session.replay import reduce
from otel_session.core.layout import safe_dir_name

from .errors import ApiError
from .feedback import FeedbackIndex
from .listing import Listing, run_query
from .store import BundleStore, ResolvedRun

__all__ = ["bp", "comment_of", "feedback_index", "int_arg", "json_body", "listing", "session_records", "store"]

bp = Blueprint("api", __name__, url_prefix="/api")

_DEFAULT_PAGE = 1000
_MAX_PAGE = 10_000
_MAX_RECENT = 1000
_RATINGS = range(1, 6)


def store() -> BundleStore:
    return current_app.extensions["otel_session_store"]


def feedback_index() -> FeedbackIndex:
    return current_app.extensions["otel_session_feedback"]


def listing() -> Listing:
    return current_app.extensions["otel_session_listing"]


def int_arg(name: str, default: int | None, *, minimum: int, maximum: int | None = None) -> int | None:
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 12:
        raise ApiError(400, "bad_parameter", f"{name} must be a non-negative integer")
    value = int(raw)
    if value < minimum or (maximum is not None and value > maximum):
        upper = f" and at most {maximum}" if maximum is not None else ""
        raise ApiError(400, "bad_parameter", f"{name} must be at least {minimum}{upper}")
    return value


def _run_ids(run: ResolvedRun) -> dict[str, Any]:
    return {"session_id": run.session_id, "run_id": run.run_id}


@bp.get("/sessions")
def sessions() -> Response:
    """A page of live sessions, newest first, each with its newest runs (``viewer.listing``)."""
    return jsonify(listing().sessions(run_query(request.args, scope=Scope.LIVE)))


@bp.get("/runs")
def all_runs() -> Response:
    """A page of runs, live and eval, filtered and sorted (``viewer.listing``)."""
    return jsonify(listing().runs(run_query(request.args)))


@bp.get("/sessions/<path:session_id>/runs")
def runs(session_id: str) -> Response:
    """List the runs of one session (eval runs too, with their ``eval_id``), newest first; the
    session named as stored (its keyed hash when the id asked for holds PII)."""
    found = store().runs(session_id)
    rows = listing().rows([info.path for info in found])
    return jsonify(session_id=found[0].session_id, runs=[rows[info.path].as_json() for info in found])


def session_records(session_id: str, read: Callable[[Path], list[dict[str, Any]]]) -> tuple[str, list[dict[str, Any]]]:
    """``read(run_dir)`` over every run of the session, newest first (by ``at``), with the session
    id as stored."""
    found = store().runs(session_id)
    records = [record for info in found for record in read(info.path)]
    records.sort(key=lambda record: str(record.get("at", "")), reverse=True)
    return found[0].session_id, records


@bp.get("/sessions/<path:session_id>/feedback")
def past_feedback(session_id: str) -> Response:
    """Every feedback record on the session's runs, newest first."""
    stored, records = session_records(session_id, feedback_index().records)
    return jsonify(session_id=stored, feedback=records)


@bp.get("/sessions/<path:session_id>/facts")
def session_facts(session_id: str) -> Response:
    """Per-turn facts of one run: the one named by ``run_id``, else the latest (and say so);
    with ``scope=session``, of every run of the session in run order (``facts.session_wide_facts``)."""
    scope = request.args.get("scope", "run")
    if scope == "session":
        if request.args.get("run_id") is not None:
            raise ApiError(400, "bad_parameter", "scope=session covers every run: it takes no run_id")
        return jsonify(store().session_facts(session_id))
    if scope != "run":
        raise ApiError(400, "bad_parameter", "scope is run (the default) or session")
    run = store().resolve(session_id, request.args.get("run_id"))
    answer = store().reader.facts(run.path, fallback_to_latest_run=run.fallback_to_latest_run)
    return Response(answer, mimetype="application/json")  # a long run's facts are large: bytes as kept


@bp.get("/sessions/<path:session_id>/runs/<run_id>/events")
def events(session_id: str, run_id: str) -> Response:
    """A page of the run's own records (``facts.run_events``: seq order, each seq once) above
    ``after_seq``; of a sealed run, only that slice of its journal is read (``viewer.run_reader``)."""
    after_seq = int_arg("after_seq", 0, minimum=0)
    limit = int_arg("limit", _DEFAULT_PAGE, minimum=1, maximum=_MAX_PAGE)
    run = store().resolve(session_id, run_id)
    page = store().reader.events(run.path, after_seq, limit)
    answer = {
        **_run_ids(run),
        "events": page.events,
        "next_after_seq": page.next_after_seq,
        "last_seq": page.last_seq,
        "capture_status": page.capture_status,
        "integrity": page.integrity,
    }
    return Response(orjson.dumps(answer), mimetype="application/json")  # pages are large: orjson


@bp.get("/sessions/<path:session_id>/runs/<run_id>/state")
def state(session_id: str, run_id: str) -> Response:
    """The replay state at ``seq`` (default: the newest record), as canonical JSON.

    With ``recent=K`` (a sealed run only; ``through=`` optional): the page's view instead, the
    checkpoint at or before ``seq`` trimmed to its last K messages, tools, verdicts and diagnostics
    plus whatever the records up to ``through`` touch (``replay.index.RunIndex.view``)."""
    seq = int_arg("seq", None, minimum=0)
    recent = int_arg("recent", None, minimum=1, maximum=_MAX_RECENT)
    through = int_arg("through", None, minimum=0)
    if through is not None and recent is None:
        raise ApiError(400, "bad_parameter", "through goes with recent (the page's view)")
    if through is not None and seq is not None and through > seq + _MAX_PAGE:
        raise ApiError(400, "bad_parameter", f"through is at most {_MAX_PAGE} past seq")
    run = store().resolve(session_id, run_id)
    if recent is None:
        answer = store().reader.state(run.path, seq)
    else:
        answer = store().reader.view(run.path, seq, recent=recent, through=through)
    return Response(reduce.canonical_json(answer), mimetype="application/json")


@bp.get("/sessions/<path:session_id>/runs/<run_id>/turns")
def turns(session_id: str, run_id: str) -> Response:
    """Per-turn summaries of the run (what a long run's timeline is drawn from), with its length,
    capture status, integrity and whether it is read in windows (``indexed``: sealed and indexed)."""
    run = store().resolve(session_id, run_id)
    return Response(orjson.dumps({**_run_ids(run), **store().reader.turns(run.path)}), mimetype="application/json")


@bp.get("/sessions/<path:session_id>/runs/<run_id>/integrity")
def integrity(session_id: str, run_id: str) -> Response:
    """The reader's verdict on the bundle: status and diagnostics."""
    run = store().resolve(session_id, run_id)
    return jsonify({**store().reader.integrity(run.path), "path": store().relative(run.path), **_run_ids(run)})


@bp.get("/sessions/<path:session_id>/runs/<run_id>/bundle")
def bundle(session_id: str, run_id: str) -> Response:
    """Download the run directory as an uncompressed tar (the page can replay it offline)."""
    run = store().resolve(session_id, run_id)
    filename = f"{safe_dir_name(run.session_id)}_{run.run_id}.tar"
    return Response(
        store().bundle_tar(run),
        mimetype="application/x-tar",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


def json_body(shape: str) -> dict[str, Any]:
    """The request's JSON object; ApiError 400 ``bad_json`` naming ``shape`` otherwise."""
    try:
        body = request.get_json(silent=True)
    except RecursionError:  # nesting deeper than the JSON decoder recurses, within the size limit
        body = None
    if not isinstance(body, dict):
        raise ApiError(400, "bad_json", f"the body must be a JSON object {shape}")
    run_id = body.get("run_id")
    if run_id is not None and not isinstance(run_id, str):
        raise ApiError(400, "malformed_run_id", "run_id must be a string")
    return body


def comment_of(body: dict[str, Any], code: str) -> str:
    """The body's ``comment`` (``""`` when absent): a string of valid Unicode, else ApiError 400 ``code``."""
    comment = body.get("comment", "")
    if not isinstance(comment, str):
        raise ApiError(400, code, "comment must be a string")
    if not comment.isascii():
        try:
            comment.encode("utf-8")
        except UnicodeEncodeError:
            raise ApiError(400, code, "comment must be valid Unicode text (a lone surrogate is not)") from None
    return comment


@bp.post("/sessions/<path:session_id>/feedback")
def add_feedback(session_id: str) -> tuple[Response, int]:
    """Record a rating and comment on a run (the latest when no ``run_id`` is given)."""
    body = json_body("{run_id?, rating, comment}")
    rating = body.get("rating")
    if type(rating) is not int or rating not in _RATINGS:
        raise ApiError(400, "bad_feedback", "rating must be an integer from 1 to 5")
    comment = comment_of(body, "bad_feedback")
    run = store().resolve(session_id, body.get("run_id"))
    record = store().append_feedback(run, rating=rating, comment=comment)
    score = feedback_index().score(run.path) or {"count": 0, "mean": None}
    listing().feedback_changed(run.path, score["count"], score["mean"])
    return jsonify(**_run_ids(run), fallback_to_latest_run=run.fallback_to_latest_run, at=record["at"]), 201
