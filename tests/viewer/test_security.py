"""Hostile ids and paths, symlink escapes, tokens and host names."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

from otel_session.cli import main
from otel_session.viewer import create_app

OUTSIDE_MARKER = "outside-the-root"

HOSTILE_SESSION_IDS = [
    "..",
    "../..",
    "..%2f..%2f..%2fetc%2fpasswd",
    "%2e%2e",
    "%2e%2e%2f%2e%2e",
    "%252e%252e",
    "%252e%252e%252f%252e%252e",
    "..%5c..%5cwindows",
    "%2fetc%2fpasswd",
    "/etc/passwd",
    "%00",
    "call-42%00",
    "a" * 10_240,
    "caf%C3%A9-%F0%9F%98%80",
    "%C0%AE%C0%AE",
    "outside",
]

HOSTILE_RUN_IDS = [
    "..",
    "%2e%2e",
    "%252e%252e",
    "run-..%2f..",
    "run-00000000-0000-0000-0000-000000000000%00",
    "%2fetc%2fpasswd",
    "r" * 10_240,
    "run-%F0%9F%98%80",
]

TAILS = ["/runs", "/facts", "/runs/{run}/events", "/runs/{run}/state", "/runs/{run}/integrity", "/runs/{run}/bundle", "/runs/{run}/stream"]


@pytest.fixture
def escape(sample, tmp_path):
    """A bundle outside the root, reachable only through symlinks planted inside it."""
    outside = tmp_path / "outside-root"
    shutil.copytree(sample.root / "sessions" / "call-42", outside / "call-42")
    for path in (outside / "call-42").rglob("*.ndjson"):
        path.write_text(path.read_text().replace("Which day", OUTSIDE_MARKER))
    (sample.root / "sessions" / "outside").symlink_to(outside / "call-42", target_is_directory=True)
    victim = sample.root / "sessions" / "call-7"
    planted = victim / "run-11111111-1111-1111-1111-111111111111"
    planted.symlink_to(outside / "call-42" / sample.latest_run, target_is_directory=True)
    return outside


def assert_refused(response):
    assert response.status_code in (400, 404, 409), response.status_code
    assert OUTSIDE_MARKER not in response.get_data(as_text=True)
    assert "root:" not in response.get_data(as_text=True)
    if response.mimetype == "application/json":
        assert set(response.get_json()) == {"error", "message"}


@pytest.mark.parametrize("session_id", HOSTILE_SESSION_IDS, ids=lambda value: value[:24])
@pytest.mark.parametrize("tail", TAILS)
def test_hostile_session_ids_never_escape(client, sample, escape, session_id, tail):
    assert_refused(client.get(f"/api/sessions/{session_id}{tail.format(run=sample.latest_run)}"))


@pytest.mark.parametrize("run_id", HOSTILE_RUN_IDS, ids=lambda value: value[:24])
@pytest.mark.parametrize("tail", [t for t in TAILS if "{run}" in t])
def test_hostile_run_ids_never_escape(client, sample, escape, run_id, tail):
    assert_refused(client.get(f"/api/sessions/call-42{tail.format(run=run_id)}"))


@pytest.mark.parametrize("session_id", HOSTILE_SESSION_IDS, ids=lambda value: value[:24])
def test_hostile_feedback_targets_write_nothing(client, sample, escape, session_id):
    before = sorted(p for p in escape.rglob("*"))
    response = client.post(f"/api/sessions/{session_id}/feedback", json={"rating": 3, "comment": "x"})
    assert_refused(response)
    assert sorted(p for p in escape.rglob("*")) == before


def test_symlinked_runs_are_not_listed_or_served(client, sample, escape):
    listing = client.get("/api/sessions").get_data(as_text=True)
    assert OUTSIDE_MARKER not in listing and "run-11111111" not in listing
    planted = "run-11111111-1111-1111-1111-111111111111"
    assert_refused(client.get(f"/api/sessions/call-7/runs/{planted}/events"))
    assert_refused(client.post("/api/sessions/call-7/feedback", json={"run_id": planted, "rating": 1}))
    assert not list(escape.rglob("feedback.ndjson"))


def test_a_journal_symlinked_out_of_the_root_is_refused(client, sample, tmp_path):
    secret = tmp_path / "secret.ndjson"
    secret.write_text(f'{{"seq": 1, "at": "x", "type": "{OUTSIDE_MARKER}", "session_id": "call-42", "run_id": "{sample.latest_run}"}}\n')
    events = sample.root / "sessions" / "call-42" / sample.latest_run / "events.ndjson"
    events.unlink()
    events.symlink_to(secret)
    for tail in ("/events", "/state", "/bundle", "/integrity"):
        assert_refused(client.get(f"/api/sessions/call-42/runs/{sample.latest_run}{tail}"))
    assert OUTSIDE_MARKER not in client.get("/api/sessions").get_data(as_text=True)


@pytest.fixture
def token_client(sample):
    return create_app({"BUNDLE_DIR": str(sample.root), "TOKEN": "s3cret-token"}).test_client()


def test_with_a_token_every_request_needs_it(token_client):
    for url in ("/", "/api/sessions", "/static/viewer.css", "/sessions/call-42"):
        response = token_client.get(url)
        assert response.status_code == 401, url
        if url.startswith("/api/"):
            assert response.get_json()["error"] == "unauthorized"
        else:  # a page answers a page that says so, and holds no data
            assert response.mimetype == "text/html" and "401 · unauthorized" in response.get_data(as_text=True)
            assert "call-42" not in response.get_data(as_text=True)
    assert token_client.get("/api/sessions", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert token_client.get("/api/sessions", headers={"Authorization": "Bearer s3cret-token"}).status_code == 200


def test_a_token_in_the_query_sets_a_cookie_and_redirects(token_client):
    response = token_client.get("/sessions/call-42?token=s3cret-token&run_id=x")
    assert response.status_code == 302
    assert response.headers["Location"] == "/sessions/call-42?run_id=x"
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert token_client.get("/api/sessions").status_code == 200
    assert token_client.get("/?token=wrong").status_code == 401


def test_the_token_is_never_accepted_in_an_api_query(token_client):
    assert token_client.get("/api/sessions?token=s3cret-token").status_code == 401


def test_without_a_token_only_loopback_host_names_are_answered(client):
    assert client.get("/api/sessions", headers={"Host": "127.0.0.1:8765"}).status_code == 200
    assert client.get("/api/sessions", headers={"Host": "[::1]:8765"}).status_code == 200
    assert client.get("/api/sessions", headers={"Host": "127.0.0.2"}).status_code == 200
    for host in ("attacker.example:8765", "127.attacker.example", "localhost.attacker.example", "0.0.0.0:8765"):
        rebinding = client.get("/api/sessions", headers={"Host": host})
        assert rebinding.status_code == 403 and rebinding.get_json()["error"] == "forbidden_host", host


def test_view_refuses_a_public_host_without_a_token(tmp_path, monkeypatch):
    monkeypatch.delenv("OTEL_SESSION_VIEWER_TOKEN", raising=False)
    result = CliRunner().invoke(main, ["view", "--dir", str(tmp_path), "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "--token" in result.output


def test_view_help():
    result = CliRunner().invoke(main, ["view", "--help"])
    assert result.exit_code == 0 and "--token" in result.output and "--port" in result.output
