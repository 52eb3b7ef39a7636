"""Viewer input the viewer's own tests leave out: non-ASCII digits, huge and repeated parameters,
deeply nested or oversized feedback bodies, markup in the URL. Always a JSON error with a code
(or the page), never a 500, never markup reflected."""

from __future__ import annotations

import pytest

import otel_session
from otel_session.testing import capture_bundle
from otel_session.viewer import create_app


@pytest.fixture(scope="module")
def viewer():
    with capture_bundle() as captured:
        with otel_session.session("s1"), otel_session.run(agent="a"):
            with otel_session.message("user") as m:
                m.text("hello")
    app = create_app({"BUNDLE_DIR": str(captured.root), "TESTING": True})
    return app.test_client(), captured.bundle.run_id


@pytest.mark.parametrize("value", ["²", "¹⁰", "１０", "٣", "9" * 5000, "-0", "+5", "5 ", "0x10", "%00", "1e3"])
@pytest.mark.parametrize(("tail", "parameter"), [("events", "limit"), ("events", "after_seq"), ("state", "seq")])
def test_numeric_parameters_accept_ascii_digits_only(viewer, value, tail, parameter):
    client, run_id = viewer
    response = client.get(f"/api/sessions/s1/runs/{run_id}/{tail}?{parameter}={value}")
    assert response.status_code == 400
    assert response.get_json()["error"] == "bad_parameter"


@pytest.mark.parametrize("body", [
    b"[" * 30_000 + b"]" * 30_000,  # deep nesting within the size limit
    b'{"rating": 3, "comment": "' + b"x" * 70_000 + b'"}',  # beyond it
    b'{"rating": 1e400}', b'{"rating": 3, "comment": "\\ud800"}', b'{"rating": 3, "run_id": {"$ne": null}}',
    b'\xff\xfe{"rating": 3}', b"",
])
def test_hostile_feedback_bodies_are_refused_with_a_code(viewer, body):
    client, _ = viewer
    response = client.post("/api/sessions/s1/feedback", data=body, content_type="application/json")
    assert response.status_code in (400, 413)
    assert set(response.get_json()) == {"error", "message"}


@pytest.mark.parametrize("path", [
    "/sessions/%3Cscript%3Ealert(1)%3C%2Fscript%3E",
    "/sessions/s1/runs/%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E",
    "/api/sessions/%3Cscript%3E/runs",
])
def test_markup_in_the_url_is_never_reflected(viewer, path):
    client, _ = viewer
    response = client.get(path)
    assert response.status_code < 500
    body = response.get_data()
    assert b"<script>alert" not in body and b"<img src=x" not in body
