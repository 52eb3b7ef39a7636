"""Ids a user types (issue 15 §5): an eval id holding PII is stored hashed like a session id; the
CLI and the viewer answer "not found" without echoing a typed id's PII, naming the key the lookup
used; a session written with another key is found with that key, and said to need it without."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.parse
from pathlib import Path

import orjson
import pytest

import otel_session
from otel_session.redact import RedactionPolicy
from otel_session.testing import bundles, capture_bundle
from otel_session.viewer import create_app

EMAIL = "eval.canary.5521@example.com"
PHONE = "+1 415 555 0161"
CALLER = f"call-{PHONE}"
STRANGER = "call-+1 415 555 0199"
CANARIES = (EMAIL, "canary.5521", PHONE, "555 0161", "5550161", "555 0199", "5550199")


def _assert_clean(text: str, where: str) -> None:
    for canary in CANARIES:
        assert canary not in text, f"{canary!r} in {where}: {text}"


def _cli(root: Path, *args: str, key: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_SESSION_")}
    env["OTEL_SESSION_DIR"] = str(root)
    if key is not None:
        env["OTEL_SESSION_REDACTION_KEY"] = key
    return subprocess.run([sys.executable, "-m", "otel_session.cli", *args], env=env, capture_output=True,
                          text=True, timeout=300)


def _api(root: Path, path: str) -> tuple[int, str]:
    client = create_app({"BUNDLE_DIR": str(root), "TESTING": True}).test_client()
    answer = client.get(path)
    return answer.status_code, answer.get_data(as_text=True)


def _quoted(session_id: str) -> str:
    return urllib.parse.quote(session_id, safe="")


@pytest.fixture
def clean_env(monkeypatch):
    for name in [name for name in os.environ if name.startswith("OTEL_SESSION_")]:
        monkeypatch.delenv(name)


def _record(root: Path, *, eval_id: str | None = None) -> None:
    with capture_bundle(root, redaction=RedactionPolicy.from_env()):
        with otel_session.session(CALLER):
            with otel_session.run(agent="a", **({"kind": "eval", "eval_id": eval_id} if eval_id else {})):
                pass


def test_an_eval_id_holding_pii_is_stored_hashed(tmp_path, clean_env):
    _record(tmp_path, eval_id=f"eval-{EMAIL}")
    (bundle,) = bundles(tmp_path)
    assert bundle.manifest["eval_id"].startswith("hmac-sha256:") and bundle.session_id.startswith("call-hmac-sha256:")
    for path in tmp_path.rglob("*"):
        _assert_clean(str(path.relative_to(tmp_path)), "a path")
        if path.is_file():
            _assert_clean(path.read_text(errors="replace"), str(path))
    listed = _cli(tmp_path, "sessions", "--evals", "--json")
    assert listed.returncode == 0 and bundle.manifest["eval_id"] in listed.stdout, listed.stderr
    found = _cli(tmp_path, "facts", CALLER, "--evals")  # by the original session id
    assert found.returncode == 0, found.stderr
    live_only = _cli(tmp_path, "facts", CALLER)  # an eval session, asked for live runs: names its eval as stored
    assert live_only.returncode == 1 and bundle.manifest["eval_id"] in live_only.stderr, live_only.stderr
    status, answer = _api(tmp_path, f"/api/sessions/{_quoted(CALLER)}/runs")
    assert status == 200 and orjson.loads(answer)["runs"][0]["eval_id"] == bundle.manifest["eval_id"]
    for output in (listed.stdout, listed.stderr, found.stdout, found.stderr, live_only.stderr, answer):
        _assert_clean(output, "an answer")


def test_not_found_never_echoes_a_typed_id_raw(tmp_path, clean_env):
    _record(tmp_path)
    stored_stranger = _cli(tmp_path, "facts", STRANGER)
    assert stored_stranger.returncode == 1
    assert "call-hmac-sha256:" in stored_stranger.stderr and "with the key of the bundle root's .redaction-key" in stored_stranger.stderr
    (bundle,) = bundles(tmp_path)
    outputs = [stored_stranger.stderr,
               _cli(tmp_path, "facts", STRANGER, "--all-runs").stderr,
               _cli(tmp_path, "replay", STRANGER, bundle.run_id, "--at", "1").stderr,  # the run is another session's
               _cli(tmp_path, "facts", f"call-{PHONE}\x01").stderr]  # malformed
    assert "belongs to session" in outputs[2], outputs[2]
    for path in (f"/api/sessions/{_quoted(STRANGER)}/runs", f"/api/sessions/{_quoted(STRANGER)}/facts",
                 f"/api/sessions/{_quoted(STRANGER)}/runs/{bundle.run_id}/events", f"/sessions/{_quoted(STRANGER)}",
                 f"/sessions/{_quoted(STRANGER)}/runs/{bundle.run_id}", f"/api/sessions/{_quoted(STRANGER)}/feedback"):
        status, answer = _api(tmp_path, path)
        assert status in (404, 409), (path, status)
        outputs.append(answer)
    for output in outputs:
        _assert_clean(output, "a not-found answer")


def test_found_pages_name_the_session_as_stored(tmp_path, clean_env):
    _record(tmp_path)
    (bundle,) = bundles(tmp_path)
    for path in (f"/api/sessions/{_quoted(CALLER)}/runs", f"/api/sessions/{_quoted(CALLER)}/feedback",
                 f"/sessions/{_quoted(CALLER)}"):
        status, answer = _api(tmp_path, path)
        assert status == 200 and bundle.session_id in answer, (path, answer)
        _assert_clean(answer, path)


def test_bundles_written_with_another_key(tmp_path, clean_env, monkeypatch):
    """A collector that ran with ``OTEL_SESSION_REDACTION_KEY`` leaves no key in the root: the
    lookup without it says so; with the key it finds the session; with a wrong key it names the
    key it used, and that another key finds bundles written with it."""
    monkeypatch.setenv("OTEL_SESSION_REDACTION_KEY", "the-collectors-key")
    _record(tmp_path)
    monkeypatch.delenv("OTEL_SESSION_REDACTION_KEY")
    assert not (tmp_path / ".redaction-key").exists()
    without = _cli(tmp_path, "facts", CALLER)
    assert without.returncode == 1
    assert "there is no key to compute it (the bundle root has no .redaction-key)" in without.stderr, without.stderr
    assert "$OTEL_SESSION_REDACTION_KEY" in without.stderr
    assert _cli(tmp_path, "facts", CALLER, key="the-collectors-key").returncode == 0
    wrong = _cli(tmp_path, "facts", CALLER, key="another-key")
    assert wrong.returncode == 1
    assert "with the key of $OTEL_SESSION_REDACTION_KEY; bundles written with another key" in wrong.stderr, wrong.stderr
    status, answer = _api(tmp_path, f"/api/sessions/{_quoted(CALLER)}/runs")
    assert status == 404 and "no key to compute it" in answer
    for output in (without.stderr, wrong.stderr, answer):
        _assert_clean(output, "a not-found answer")
