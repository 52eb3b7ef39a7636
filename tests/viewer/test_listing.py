"""GET /api/runs: every run (eval runs under their eval id), filtered, sorted and paged."""

from __future__ import annotations

import pytest


def listed(client, query: str = "") -> dict:
    response = client.get(f"/api/runs?{query}")
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def test_every_run_is_listed_eval_runs_with_their_eval_id(client, sample):
    answer = listed(client)
    assert answer["total"] == 6 and len(answer["runs"]) == 6
    eval_run = next(run for run in answer["runs"] if run["run_id"] == sample.eval_run)
    assert (eval_run["kind"], eval_run["eval_id"], eval_run["session_id"]) == ("eval", "nightly", "call-42")
    assert [run["created_at"] for run in answer["runs"]] == sorted((run["created_at"] for run in answer["runs"]), reverse=True)
    assert answer["facets"] == {"agent": ["booking"], "service": ["tests", "unknown_service"], "eval_id": ["nightly"]}
    first = answer["runs"][0]
    for field in ("agent", "service", "status", "started_at", "duration_ms", "turns", "model_calls", "input_tokens",
                  "output_tokens", "feedback", "capture_status", "integrity", "problems"):
        assert field in first, field
    assert "search_text" not in first


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("kind=eval", {"eval"}),
        ("kind=live", {"older", "latest", "other", "broken", "xss"}),
        ("eval_id=nightly", {"eval"}),
        ("q=call-42", {"older", "latest", "eval"}),
        ("q=FRIDAY", {"older", "latest", "other", "broken", "xss", "eval"}),  # message text ("Friday is free.")
        ("q=sometime soon", {"older", "latest", "other", "broken", "eval"}),  # the xss run's user said other things
        ("q=onerror", {"xss"}),
        ("status=capture_failed", {"broken"}),
        ("agent=booking&service=tests&kind=live", {"older", "latest", "other", "broken", "xss"}),
        ("service=unknown_service&kind=eval", {"eval"}),
        ("agent=nobody", set()),
        ("since=2026-11-30T00:00&until=2026-12-31", {"older", "latest", "other", "broken", "xss", "eval"}),
        ("until=2000-01-01T00:00:00Z", set()),
    ],
)
def test_filters(client, sample, query, expected):
    names = {getattr(sample, f"{name}_run"): name for name in ("older", "latest", "other", "broken", "xss", "eval")}
    answer = listed(client, query)
    assert {names[run["run_id"]] for run in answer["runs"]} == expected
    assert answer["total"] == len(expected)


def test_a_time_range_selects_by_created_at(client, sample):
    runs = listed(client)["runs"]
    middle = sorted(run["created_at"] for run in runs)[2]
    after = listed(client, f"since={middle[:19]}")["runs"]
    assert all(run["created_at"] >= middle[:19] for run in after) and len(after) == 4
    before = listed(client, f"until={middle[:19]}")["runs"]
    assert len(before) == 2


def test_sort_and_page(client, sample):
    by_session = listed(client, "sort=session_id&order=asc")["runs"]
    assert [run["session_id"] for run in by_session] == sorted(run["session_id"] for run in by_session)
    first = listed(client, "limit=4")
    second = listed(client, "limit=4&offset=4")
    assert (first["total"], len(first["runs"]), len(second["runs"])) == (6, 4, 2)
    assert not {run["run_id"] for run in first["runs"]} & {run["run_id"] for run in second["runs"]}


def test_sort_by_feedback_puts_runs_without_feedback_last(client, sample):
    client.post("/api/sessions/call-7/feedback", json={"rating": 5})
    client.post("/api/sessions/call-42/feedback", json={"rating": 1})
    for order in ("desc", "asc"):
        runs = listed(client, f"sort=feedback&order={order}")["runs"]
        scored = [run["feedback"]["mean"] for run in runs if run["feedback"]]
        assert scored == sorted(scored, reverse=order == "desc") and len(scored) == 2
        assert all(run["feedback"] is None for run in runs[2:])


@pytest.mark.parametrize(
    "query", ["status=weird", "kind=other", "sort=nope", "order=up", "limit=0", "limit=501", "offset=-1", "since=yesterday", f"q={'x' * 201}"]
)
def test_bad_parameters_are_400(client, sample, query):
    response = client.get(f"/api/runs?{query}")
    assert response.status_code == 400 and response.get_json()["error"] == "bad_parameter"
