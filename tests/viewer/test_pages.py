"""Pages and the session-level API: eval runs open like any run, a missing session or run is a
404 page that says so first, what went wrong in any run is listed, past feedback is served."""

from __future__ import annotations

import html as html_lib
import re

import pytest



def _text(html: str) -> str:
    return html_lib.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)))


def test_a_session_with_only_eval_runs_opens(live_writer, journal, app_for):
    run = live_writer.open_run(session_id="eval-only", run_id="run-00000000-0000-4000-8000-00000000e001", kind="eval", eval_id="regression")
    journal.record_booking(journal.Script(run, journal.BASE_NS))
    run.close(run_status="ok")
    assert live_writer.force_flush()
    client = app_for(live_writer.root).test_client()
    assert client.get("/sessions/eval-only").status_code == 200
    assert client.get(f"/sessions/eval-only/runs/{run.run_id}").status_code == 200
    runs = client.get("/api/sessions/eval-only/runs").get_json()["runs"]
    assert [(r["run_id"], r["kind"], r["eval_id"]) for r in runs] == [(run.run_id, "eval", "regression")]
    facts = client.get("/api/sessions/eval-only/facts").get_json()
    assert facts["run_id"] == run.run_id and facts["fallback_to_latest_run"] is True


@pytest.mark.parametrize(
    ("url", "status", "said"),
    [
        ("/sessions/nobody", 404, "session 'nobody' has no runs"),
        ("/sessions/call-42/runs/run-00000000-0000-4000-8000-000000000000", 404, "run-00000000-0000-4000-8000-000000000000"),
        ("/sessions/nobody/runs/run-00000000-0000-4000-8000-000000000000", 404, "nobody"),
        ("/sessions/call-42/runs/not-a-run", 400, "malformed run id 'not-a-run'"),
        ("/sessions/call-7/runs/{latest}", 409, "belongs to session 'call-42'"),
        ("/no-such-page", 404, "not found"),
    ],
)
def test_a_missing_page_answers_its_status_and_says_what_is_missing_first(client, sample, url, status, said):
    response = client.get(url.format(latest=sample.latest_run))
    assert response.status_code == status
    assert response.mimetype == "text/html"
    html = response.get_data(as_text=True)
    main = _text(html.split("<main>", 1)[1])
    assert main.strip().startswith(f"{status} ·"), main[:200]
    assert said.lower() in main.lower()
    assert "<script" not in html  # nothing to run on an error page


def test_session_runs_carry_status_problems_and_model_calls(client, sample):
    runs = {run["run_id"]: run for run in client.get("/api/sessions/call-42/runs").get_json()["runs"]}
    older = runs[sample.older_run]
    assert older["status"] == "error"  # the booking's first check_availability call timed out
    assert [p["kind"] for p in older["problems"]] == ["tool_error"]
    assert older["problems"][0]["message"] == "tool check_availability failed: timeout"
    assert older["problems"][0]["seq"] > 0
    assert "search_text" not in older
    assert (older["turns"], older["tool_calls"], older["tool_errors"], older["model_calls"]) == (3, 2, 1, 0)
    assert older["duration_ms"] > 0 and older["started_at"] and older["feedback"] is None


def test_a_problem_in_an_older_run_is_listed_with_the_session(live_writer, journal, app_for):
    older = live_writer.open_run(session_id="s1", run_id="run-00000000-0000-4000-8000-0000000000a1", created_at_ns=journal.BASE_NS)
    script = journal.Script(older, journal.BASE_NS)
    script("run_started", {"kind": "live", "agent": "a"})
    script("tool_execution_started", {"name": "lookup", "arguments": {}}, tool_call_id="t1")
    script("tool_execution_finished", {"status": "error", "error": "boom"}, tool_call_id="t1")
    older.close(run_status="ok")
    latest = live_writer.open_run(session_id="s1", run_id="run-00000000-0000-4000-8000-0000000000a2", created_at_ns=journal.BASE_NS + 10**9)
    journal.Script(latest, journal.BASE_NS + 10**9)("run_started", {"kind": "live", "agent": "a"})
    latest.close(run_status="interrupted")
    assert live_writer.force_flush()
    runs = app_for(live_writer.root).test_client().get("/api/sessions/s1/runs").get_json()["runs"]
    assert [(r["run_id"], r["status"], [p["kind"] for p in r["problems"]]) for r in runs] == [
        (latest.run_id, "interrupted", ["run_interrupted"]),
        (older.run_id, "error", ["tool_error"]),
    ]


def test_a_sealed_run_changed_since_is_listed_as_invalid(sample, app_for):
    """A sealed run's bundle given a line that is no record among those a row does not count, its
    capture's count made to match (a copy, a store's fetch): the session's runs list it invalid,
    as the tolerant reader does (before, ``sealed_row`` left it ``complete``, no problem)."""
    import orjson

    (path,) = sample.root.glob(f"sessions/*/{sample.older_run}")
    lines = (path / "events.ndjson").read_bytes().split(b"\n")[:-1]
    at = next(n for n, line in enumerate(lines) if b'"type":"assistant_delta"' in line) + 1
    lines.insert(at, b"not a record")
    (path / "events.ndjson").write_bytes(b"\n".join(lines) + b"\n")
    capture = orjson.loads((path / "capture.json").read_bytes())
    (path / "capture.json").write_bytes(orjson.dumps({**capture, "event_count": len(lines)}))
    runs = {run["run_id"]: run for run in app_for(sample.root).test_client().get("/api/sessions/call-42/runs").get_json()["runs"]}
    older = runs[sample.older_run]
    assert (older["integrity"], older["diagnostics"]) == ("invalid", ["garbage_line"])
    assert "invalid_bundle" in [problem["kind"] for problem in older["problems"]]
    assert runs[sample.latest_run]["integrity"] == "complete"


def test_past_feedback_is_served_newest_first(client, sample):
    for rating, comment in ((2, "asked twice"), (4, "better")):
        assert client.post("/api/sessions/call-42/feedback", json={"rating": rating, "comment": comment}).status_code == 201
    assert client.post("/api/sessions/call-42/feedback", json={"run_id": sample.older_run, "rating": 1}).status_code == 201
    records = client.get("/api/sessions/call-42/feedback").get_json()["feedback"]
    assert [(r["run_id"], r["rating"]) for r in records] == [(sample.older_run, 1), (sample.latest_run, 4), (sample.latest_run, 2)]
    runs = {run["run_id"]: run for run in client.get("/api/sessions/call-42/runs").get_json()["runs"]}
    assert runs[sample.latest_run]["feedback"] == {"count": 2, "mean": 3.0}
    assert client.get("/api/sessions/nobody/feedback").status_code == 404


@pytest.fixture
def app_for():
    from otel_session.viewer import create_app

    return lambda root: create_app({"BUNDLE_DIR": str(root), "TESTING": True})




def test_an_error_page_shows_a_hostile_id_as_text(client, journal):
    response = client.get(f"/sessions/{journal.XSS_TEXT}")
    assert response.status_code == 404
    html = response.get_data(as_text=True)
    assert "<img" not in html and "<script>window" not in html
    assert "&lt;img src=x onerror=" in html


@pytest.mark.parametrize(
    ("query", "status"),
    [("", 400), ("left=call-42", 400), ("left=call-42/run-00000000-0000-4000-8000-000000000000&right=call-42/{latest}", 404),
     ("left=call-7/{latest}&right=call-42/{latest}", 409), ("left=call-42/{eval}&right=call-42/{latest}", 200)],
)
def test_the_compare_page_names_two_runs(client, sample, query, status):
    response = client.get("/compare?" + query.format(latest=sample.latest_run, eval=sample.eval_run))
    assert response.status_code == status
