"""The fleet dashboard: every run of a time range, from the run catalog (never the bundles).

Routes::

    GET /dashboard                     the page (charts drawn by the vendored Chart.js)
    GET /api/dashboard?since=&until=&agent=&service=&eval_id=&kind=&bucket=hour|day

The answer holds, per time bucket: sessions and runs; the runs with a repeated ask, a blocked
guard, a tool error or a failed integrity check; turn time p50/p95; tokens and cost. Per model:
calls, tokens and cost. Cost comes from the price table in force (``replay.cost``); a model with
no price is listed under ``unpriced_models`` and counted nowhere as 0. Turn time p50/p95 of a
bucket are the median of its runs' p50s and the 95th percentile (nearest rank) of their p95s.
``scores``: per evaluation score name, the mean of its numeric and boolean values (true is 1). At
most ``MAX_RUNS`` runs are read (the newest); past it the answer says so.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from typing import Any

import orjson
from flask import Blueprint, current_app, jsonify, render_template, request

from otel_session.replay.cost import PriceTable, price_table, summarize

from .errors import ApiError
from .listing import Listing, run_query

__all__ = ["MAX_RUNS", "bp", "fleet_summary"]

bp = Blueprint("dashboard", __name__)

MAX_RUNS = 200_000
_DEFAULT_DAYS = 7
_HOURLY_UP_TO = timedelta(days=2)
_SHARES = {"repeated_ask": "repeated_asks", "blocked_guard": "guards_blocked", "tool_error": "tool_errors"}


def _nearest_rank(values: list[float], quantile: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(len(ordered) * quantile) - 1))]


def _calls(usage: list[Any]) -> dict[str, Any]:
    """A catalog ``usage_by_model`` entry as the model calls ``cost.summarize`` prices."""
    model, calls, input_tokens, output_tokens, cached = usage
    counts = {key: value for key, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens),
                                            ("cached_input_tokens", cached)) if value is not None}
    return {"model": model, "usage": counts, "calls": calls}


def _score_means(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Per score name, the mean of its numeric and boolean values over the runs (categories have none)."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for row in rows:
        for name, _last, count, mean in row["scores"]:
            if mean is not None:
                sums[name][0] += mean * count
                sums[name][1] += count
    return {name: round(total / count, 4) for name, (total, count) in sorted(sums.items())}


def _bucket_summary(rows: list[dict[str, Any]], prices: PriceTable) -> dict[str, Any]:
    usage = [_calls(entry) for row in rows for entry in row["usage_by_model"]]
    cost = summarize(usage, prices)
    return {
        "sessions": len({row["session_id"] for row in rows}),
        "runs": len(rows),
        **{share: sum(1 for row in rows if (row[column] or 0) > 0) for share, column in _SHARES.items()},
        "integrity_failed": sum(1 for row in rows if row["integrity"] in ("invalid", "failed")),
        "turn_p50_ms": _nearest_rank([row["turn_p50_ms"] for row in rows if row["turn_p50_ms"] is not None], 0.5),
        "turn_p95_ms": _nearest_rank([row["turn_p95_ms"] for row in rows if row["turn_p95_ms"] is not None], 0.95),
        "input_tokens": sum(call["usage"].get("input_tokens", 0) for call in usage),
        "output_tokens": sum(call["usage"].get("output_tokens", 0) for call in usage),
        "cost_usd": cost["usd"],
        "unpriced_models": cost["unpriced_models"],
        "scores": _score_means(rows),
    }


def fleet_summary(rows: list[dict[str, Any]], *, bucket: str, prices: PriceTable) -> dict[str, Any]:
    """Buckets, models and totals of ``rows`` (``SqlCatalog.fleet``'s, oldest first)."""
    width = 13 if bucket == "hour" else 10
    by_bucket: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_model: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if isinstance(row["scores"], str):  # the catalog's JSON column
            row["scores"] = orjson.loads(row["scores"] or "[]")
        by_bucket[row["created_at"][:width]].append(row)
        for entry in row["usage_by_model"]:
            by_model[entry[0]].append(_calls(entry))
    models = []
    for model, calls in sorted(by_model.items()):
        cost = summarize(calls, prices)
        models.append({"model": model, "calls": sum(call["calls"] for call in calls),
                       "input_tokens": sum(call["usage"].get("input_tokens", 0) for call in calls),
                       "output_tokens": sum(call["usage"].get("output_tokens", 0) for call in calls),
                       "cost_usd": cost["usd"]})
    return {
        "buckets": [{"start": start, **_bucket_summary(group, prices)} for start, group in sorted(by_bucket.items())],
        "models": models,
        "totals": {**_bucket_summary(rows, prices), "prices_as_of": prices.as_of},
    }


def _range(args: dict[str, str]) -> tuple[dict[str, str], str]:
    """The request's filters with a default range (the last 7 days) and its bucket (auto: hourly up to 2 days)."""
    args = dict(args)
    now = datetime.now(timezone.utc)
    args.setdefault("since", (now - timedelta(days=_DEFAULT_DAYS)).strftime("%Y-%m-%dT%H:%M"))
    bucket = args.pop("bucket", "auto")
    if bucket not in ("auto", "hour", "day"):
        raise ApiError(400, "bad_parameter", "bucket must be hour, day or auto")
    if bucket == "auto":
        try:
            since = datetime.fromisoformat(args["since"].rstrip("Z")).replace(tzinfo=timezone.utc)
            until = datetime.fromisoformat(args["until"].rstrip("Z")).replace(tzinfo=timezone.utc) if args.get("until") else now
        except ValueError:
            since, until = now - timedelta(days=_DEFAULT_DAYS), now  # the query below says what is wrong
        bucket = "hour" if until - since <= _HOURLY_UP_TO else "day"
    return args, bucket


@bp.get("/dashboard")
def page() -> str:
    """Show the fleet: runs over time, what went wrong, turn time, tokens and cost by model."""
    return render_template("dashboard.html")


@bp.get("/api/dashboard")
def fleet() -> Any:
    """The dashboard's figures for a time range and filters (see the module docstring)."""
    args, bucket = _range(request.args.to_dict())
    query = run_query(args)
    listing: Listing = current_app.extensions["otel_session_listing"]
    rows, cut, warning = listing.fleet(query, limit=MAX_RUNS)
    answer = {"since": query.since, "until": query.until, "bucket": bucket,
              **fleet_summary(rows, bucket=bucket, prices=price_table())}
    notes = [warning] if warning else []
    if cut:
        notes.append(f"the range holds more than {MAX_RUNS} runs: only the newest are counted; narrow it")
    if notes:
        answer["warning"] = "; ".join(notes)
    return jsonify(answer)
