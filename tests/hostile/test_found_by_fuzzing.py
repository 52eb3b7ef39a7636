"""What the fuzzing found, pinned: each case failed before its fix (a crash where a clear answer was due)."""

from __future__ import annotations

import http.client

import orjson
import pytest

from otel_session.collector.otlp import OtlpDecodeError, parse_json
from otel_session.collector.server import Collector
from otel_session.normalize import SpanData, normalize_span
from otel_session.redact import RedactionPolicy, Redactor


@pytest.mark.parametrize("operation", [[], ["chat"], {"x": 1}, 3, None])
def test_a_non_text_operation_name_is_not_an_operation(operation):
    span = SpanData(1, 1, None, "chat gpt", 0, 10, attributes={"gen_ai.operation.name": operation, "session.id": "s"})
    assert [event.type for event in normalize_span(span)] == ["run_started", "run_finished"]


@pytest.mark.parametrize("body", [b'{"resourceSpans":[null]}', b'{"resourceSpans":[{"scopeSpans":[7]}]}'])
def test_otlp_json_items_that_are_not_objects_are_rejected_clearly(body, tmp_path):
    with pytest.raises(OtlpDecodeError, match="must be an object"):
        parse_json(body)
    collector = Collector(tmp_path, grpc_address=None, http_address="127.0.0.1:0",
                          redactor=Redactor(RedactionPolicy(), key=b"t"))
    collector.start()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", collector.http_port, timeout=10)
        connection.request("POST", "/v1/traces", body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 400
        assert "must be an object" in orjson.loads(response.read())["message"]
        connection.close()
    finally:
        collector.stop()
