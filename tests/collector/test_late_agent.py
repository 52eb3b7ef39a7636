"""A run's agent named by a span that comes after the run was opened (a long run's spans arrive in
many export requests: the SDK's batch processor exports every 5 s, and the agent's span ends last)."""

from __future__ import annotations

import orjson
import pytest

from otel_session.core import layout
from otel_session.bundle.files import json_document
from otel_session.core.journal import RUN_SCHEMA
from otel_session.bundle.read import BundleStatus

from .conftest import CANARY_EMAIL, all_bytes, sealed_bundles
from .test_receivers import RUN_ID, otlp_json_request, post


def child_request(attributes: dict[str, str] | None = None, span_hex: str = "00000000000000b1") -> bytes:
    """A model call of the run (a child of its root), naming the session and no agent unless given."""
    return orjson.dumps(otlp_json_request(root=False, name="chat mock-gpt", span_hex=span_hex, attributes={
        "gen_ai.operation.name": "chat", **(attributes or {})}))


def root_request(agent: str | None) -> bytes:
    attributes = {"gen_ai.operation.name": "invoke_agent", **({"gen_ai.agent.name": agent} if agent else {})}
    request = otlp_json_request(span_hex="00000000000000a0", attributes=attributes)
    return orjson.dumps(request)


def export(collector, *bodies: bytes) -> None:
    for body in bodies:
        response, answer = post(collector.http_port, body)
        assert response.status == 200, answer


@pytest.mark.parametrize("first_child", [{}, {"agent.name": "helper"}], ids=["no agent", "a child's agent"])
def test_the_agent_named_by_the_root_arriving_later_is_in_run_json(collector, bundle_root, first_child):
    export(collector, child_request(first_child))
    export(collector, root_request("booking"))
    (bundle,) = sealed_bundles(bundle_root)
    assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
    manifest_bytes = (bundle.path / layout.RUN_FILE).read_bytes()
    expected = {"schema": RUN_SCHEMA, "session_id": "call-42", "run_id": RUN_ID, "kind": "live",
                "created_at": bundle.manifest["created_at"], "service": "unknown_service", "agent": "booking",
                "recorded_by": "otel-session collector"}
    assert manifest_bytes == json_document(expected)  # as if opened with it, field order included


def test_a_child_naming_the_agent_after_the_open_names_it_and_the_root_without_one_keeps_it(collector, bundle_root):
    export(collector, child_request(), child_request({"agent.name": "helper"}, "00000000000000b2"), root_request(None))
    (bundle,) = sealed_bundles(bundle_root)
    assert bundle.manifest["agent"] == "helper"


def test_an_agent_named_late_is_redacted_like_one_named_at_the_open(collector, bundle_root):
    export(collector, child_request(), root_request(CANARY_EMAIL))
    (bundle,) = sealed_bundles(bundle_root)
    assert bundle.manifest["agent"] and bundle.manifest["agent"] != CANARY_EMAIL
    assert CANARY_EMAIL.encode() not in all_bytes(bundle_root)
