"""Every API endpoint and its errors (SPEC §8.2), over bundles written by the real writer."""

from __future__ import annotations

import io
import json
import os
import stat
import tarfile

import pytest

from otel_session.bundle.read import read_bundle
from otel_session.replay.reduce import canonical_json, replay_state
from otel_session.viewer.security import CONTENT_SECURITY_POLICY


def run_url(session_id: str, run_id: str, tail: str = "") -> str:
    return f"/api/sessions/{session_id}/runs/{run_id}{tail}"


def test_sessions_newest_first_with_runs_and_no_eval_runs(client, sample):
    answer = client.get("/api/sessions").get_json()
    sessions = answer["sessions"]
    assert [s["session_id"] for s in sessions] == ["call-42", "call-7", "xss", "broken"]
    runs = sessions[0]["runs"]
    assert [r["run_id"] for r in runs] == [sample.latest_run, sample.older_run]
    assert sample.eval_run not in json.dumps(answer)
    first = runs[0]
    assert (first["kind"], first["capture_status"], first["integrity"], first["turns"]) == ("live", "complete", "complete", 3)
    broken = sessions[-1]["runs"][0]
    assert broken["integrity"] == "invalid"


def test_runs_of_a_session_newest_first_eval_runs_included(client, sample):
    answer = client.get("/api/sessions/call-42/runs").get_json()
    assert answer["session_id"] == "call-42"
    assert [r["run_id"] for r in answer["runs"]] == [sample.eval_run, sample.latest_run, sample.older_run]
    assert [(r["kind"], r["eval_id"]) for r in answer["runs"]] == [("eval", "nightly"), ("live", None), ("live", None)]


def test_facts_default_to_latest_run_and_say_so(client, sample):
    facts = client.get("/api/sessions/call-42/facts").get_json()
    assert facts["run_id"] == sample.latest_run
    assert facts["fallback_to_latest_run"] is True
    assert facts["integrity"]["status"] == "complete"
    assert [t["turn_index"] for t in facts["turns"]] == [0, 1, 2]
    assert facts["turns"][1]["repeated_asks"] == ["date"]


def test_facts_of_a_chosen_run(client, sample):
    facts = client.get(f"/api/sessions/call-42/facts?run_id={sample.older_run}").get_json()
    assert (facts["run_id"], facts["fallback_to_latest_run"]) == (sample.older_run, False)


def test_events_page_by_after_seq_and_limit(client, sample):
    url = run_url("call-42", sample.latest_run, "/events")
    first = client.get(f"{url}?limit=10").get_json()
    assert [e["seq"] for e in first["events"]] == list(range(1, 11))
    assert first["next_after_seq"] == 10
    rest = client.get(f"{url}?after_seq=10&limit=10000").get_json()
    assert rest["events"][0]["seq"] == 11 and rest["next_after_seq"] is None
    total = len(read_bundle(sample.root / "sessions" / "call-42" / sample.latest_run).events)
    assert 10 + len(rest["events"]) == total
    assert rest["capture_status"] == "complete"


def test_state_is_the_python_reducer_in_canonical_json(client, sample):
    bundle = read_bundle(sample.root / "sessions" / "call-42" / sample.latest_run)
    for seq in (0, 5, 17, None):
        query = "" if seq is None else f"?seq={seq}"
        response = client.get(run_url("call-42", sample.latest_run, f"/state{query}"))
        assert response.status_code == 200
        assert response.data == canonical_json(replay_state(bundle.events, seq))
    final = client.get(run_url("call-42", sample.latest_run, "/state")).get_json()
    assert {t["tool_call_id"]: t["status"] for t in final["tools"]} == {"c1": "error", "c2": "ok"}


def test_integrity_of_a_good_and_a_broken_bundle(client, sample):
    good = client.get(run_url("call-42", sample.latest_run, "/integrity")).get_json()
    assert good["status"] == "complete" and good["diagnostics"] == []
    assert not os.path.isabs(good["path"])
    broken = client.get(run_url("broken", sample.broken_run, "/integrity"))
    assert broken.status_code == 200
    codes = {d["code"] for d in broken.get_json()["diagnostics"]}
    assert broken.get_json()["status"] == "invalid" and "garbage_line" in codes


def test_a_bad_bundle_is_invalid_never_a_500(client, sample):
    run_path = sample.root / "sessions" / "broken" / sample.broken_run
    (run_path / "capture.json").write_text("{ nope")
    (run_path / "events.ndjson").write_bytes(b"\x00\xff garbage\n{\"seq\": \"x\"}\n")
    for tail in ("/integrity", "/events", "/state", "/bundle"):
        assert client.get(run_url("broken", sample.broken_run, tail)).status_code == 200, tail
    assert client.get("/api/sessions/broken/facts").status_code == 200
    assert client.get("/api/sessions").status_code == 200


def test_bundle_download_is_a_tar_of_the_run_directory(client, sample):
    response = client.get(run_url("call-42", sample.latest_run, "/bundle"))
    assert response.status_code == 200
    assert response.mimetype == "application/x-tar"
    assert "attachment" in response.headers["Content-Disposition"]
    with tarfile.open(fileobj=io.BytesIO(response.data)) as archive:
        names = sorted(archive.getnames())
        run_dir = sample.root / "sessions" / "call-42" / sample.latest_run
        assert names == sorted(f"{sample.latest_run}/{n}" for n in ("run.json", "events.ndjson", "capture.json"))
        extracted = archive.extractfile(f"{sample.latest_run}/events.ndjson").read()
    assert extracted == (run_dir / "events.ndjson").read_bytes()


def test_feedback_binds_the_latest_run_and_appends_privately(client, sample):
    response = client.post("/api/sessions/call-42/feedback", json={"rating": 2, "comment": "asked twice"})
    assert response.status_code == 201
    answer = response.get_json()
    assert (answer["run_id"], answer["fallback_to_latest_run"]) == (sample.latest_run, True)
    client.post("/api/sessions/call-42/feedback", json={"run_id": sample.older_run, "rating": 5, "comment": ""})
    latest = sample.root / "sessions" / "call-42" / sample.latest_run / "feedback.ndjson"
    older = sample.root / "sessions" / "call-42" / sample.older_run / "feedback.ndjson"
    assert [json.loads(line)["comment"] for line in latest.read_text().splitlines()] == ["asked twice"]
    assert json.loads(older.read_text())["fallback_to_latest_run"] is False
    assert stat.S_IMODE(latest.stat().st_mode) == 0o600
    # Feedback lives outside capture integrity: the bundle still verifies.
    assert read_bundle(latest.parent).status.value == "complete"


def test_feedback_comments_are_redacted_before_they_reach_disk(client, sample):
    canaries = ("zed.canary@example.org", "+1 415 555 0199", "4111 1111 1111 1111")
    comment = "call me: " + ", ".join(canaries)
    assert client.post("/api/sessions/call-42/feedback", json={"rating": 1, "comment": comment}).status_code == 201
    for path in sample.root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(canary.encode() in data for canary in canaries), path
    stored = (sample.root / "sessions" / "call-42" / sample.latest_run / "feedback.ndjson").read_text()
    assert "call me:" in stored


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"rating": 0}, "bad_feedback"),
        ({"rating": "5"}, "bad_feedback"),
        ({"rating": True}, "bad_feedback"),
        ({"rating": 3, "comment": 7}, "bad_feedback"),
        ({"rating": 3, "comment": "x" * 4001}, "bad_feedback"),
        ({"rating": 3, "run_id": "../../etc"}, "malformed_run_id"),
        ([1, 2], "bad_json"),
    ],
)
def test_feedback_rejects_bad_bodies(client, body, code):
    response = client.post("/api/sessions/call-42/feedback", json=body)
    assert response.status_code == 400
    assert response.get_json()["error"] == code


def test_feedback_needs_json(client):
    response = client.post("/api/sessions/call-42/feedback", data="rating=5", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400
    broken = client.post("/api/sessions/call-42/feedback", data="{", content_type="application/json")
    assert broken.status_code == 400 and broken.get_json()["error"] == "bad_json"


def test_feedback_from_another_origin_is_refused(client):
    response = client.post("/api/sessions/call-42/feedback", json={"rating": 3}, headers={"Origin": "http://evil.example"})
    assert response.status_code == 403


@pytest.mark.parametrize(
    ("url", "status", "code"),
    [
        ("/api/sessions/nobody/runs", 404, "session_not_found"),
        ("/api/sessions/nobody/facts", 404, "session_not_found"),
        ("/api/sessions/call-42/runs/run-00000000-0000-0000-0000-000000000000/events", 404, "run_not_found"),
        ("/api/sessions/call-42/runs/not-a-run/events", 400, "malformed_run_id"),
        ("/api/sessions/call-42/runs/RUN-00000000-0000-0000-0000-000000000000/state", 400, "malformed_run_id"),
        ("/api/sessions/call-42/facts?run_id=nope", 400, "malformed_run_id"),
        ("/api/sessions/call-42/runs/{latest}/events?after_seq=-1", 400, "bad_parameter"),
        ("/api/sessions/call-42/runs/{latest}/events?limit=0", 400, "bad_parameter"),
        ("/api/sessions/call-42/runs/{latest}/events?limit=10001", 400, "bad_parameter"),
        ("/api/sessions/call-42/runs/{latest}/state?seq=abc", 400, "bad_parameter"),
        ("/api/sessions/call-42/runs/{latest}/state?seq=99999999999999", 400, "bad_parameter"),
        ("/api/nothing", 404, "not_found"),
    ],
)
def test_errors_are_json_with_a_code(client, sample, url, status, code):
    response = client.get(url.format(latest=sample.latest_run))
    assert response.status_code == status
    body = response.get_json()
    assert body["error"] == code and body["message"]


@pytest.mark.parametrize("tail", ["/events", "/state", "/integrity", "/bundle", "/stream"])
def test_a_run_of_another_session_is_a_conflict(client, sample, tail):
    response = client.get(run_url("call-42", sample.other_run, tail))
    assert response.status_code == 409
    body = response.get_json()
    assert body["error"] == "run_session_mismatch"
    assert "call-42" in body["message"] and "call-7" in body["message"]


def test_facts_and_feedback_with_a_run_of_another_session_conflict(client, sample):
    assert client.get(f"/api/sessions/call-42/facts?run_id={sample.other_run}").status_code == 409
    response = client.post("/api/sessions/call-42/feedback", json={"run_id": sample.other_run, "rating": 1})
    assert response.status_code == 409
    assert not (sample.root / "sessions" / "call-7" / sample.other_run / "feedback.ndjson").exists()


def test_eval_runs_open_like_any_run(client, sample):
    for tail in ("/events", "/state", "/bundle", "/integrity"):
        response = client.get(run_url("call-42", sample.eval_run, tail))
        assert response.status_code == 200, tail
    assert client.get(run_url("call-42", sample.eval_run, "/events")).get_json()["events"][0]["type"] == "run_started"
    facts = client.get(f"/api/sessions/call-42/facts?run_id={sample.eval_run}").get_json()
    assert facts["run_id"] == sample.eval_run and len(facts["turns"]) == 3
    # Without a run id the latest LIVE run is still the one bound (eval runs never displace it).
    assert client.get("/api/sessions/call-42/facts").get_json()["run_id"] == sample.latest_run


def test_every_response_carries_the_security_headers(client, sample):
    for url in ("/", "/api/sessions", "/static/replay.js", f"/sessions/call-42/runs/{sample.latest_run}"):
        response = client.get(url)
        assert response.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY, url
        assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert "'unsafe-inline'" not in CONTENT_SECURITY_POLICY
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY


def test_pages_render_with_no_inline_script(client, sample):
    for url in ("/", "/sessions/call-42", f"/sessions/call-42/runs/{sample.latest_run}", "/open"):
        response = client.get(url)
        assert response.status_code == 200, url
        html = response.get_data(as_text=True)
        assert "<script>" not in html and "style=" not in html and " on" + "click" not in html
        assert '<script type="module" src="/static/' in html


def test_ids_in_pages_are_escaped(client):
    response = client.get("/sessions/%3Cscript%3Ealert(1)%3C%2Fscript%3E")
    html = response.get_data(as_text=True)
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)" in html


def test_api_is_read_only_except_feedback(client, sample):
    for method in ("post", "put", "delete", "patch"):
        response = getattr(client, method)(run_url("call-42", sample.latest_run, "/events"), json={})
        assert response.status_code == 405, method
