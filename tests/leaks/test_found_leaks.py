"""The leaks the canary test (``test_no_leak_anywhere``) found, each pinned at its own depth."""

from __future__ import annotations

import json
import re

import pytest

from otel_session.redact import RedactionPolicy, Redactor

EMAIL = "zq00001x@bücher-canary.example"
CARD_NBSP = "4532\u00a00000\u00a00612\u00a03458"


@pytest.fixture
def redactor() -> Redactor:
    return Redactor(RedactionPolicy(keep_slots={"party_size"}), key=b"k")


def test_slot_name_and_source_are_scanned(redactor):
    for slot in ("contact", "party_size"):
        payload = redactor.redact_payload("slot_write", {"slot": f"{slot} {EMAIL}", "value": 2, "source": f"nlu {EMAIL}"})
        assert payload["slot"] == f"{slot} [email]" and payload["source"] == "nlu [email]"
    kept = redactor.redact_payload("slot_write", {"slot": "party_size", "value": EMAIL})
    assert kept == {"slot": "party_size", "value": EMAIL}  # the allow-list still reads the name


def test_transition_states_are_scanned(redactor):
    payload = redactor.redact_payload("transition_verdict", {"from": f"collect {EMAIL}", "to": "confirm"})
    assert payload["from"] == "collect [email]" and payload["to"] == "confirm"


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_json_escapes_hide_nothing(redactor, ensure_ascii):
    """JSON kept as text (a streamed tool call's arguments): ``\\u00a0``, ``\\u00fc``, ``\\n`` and
    JSON inside a JSON string are read decoded; what they hide is masked in place."""
    text = json.dumps({EMAIL: CARD_NBSP, "lines": "4532\n0000\n0612\n3458"}, ensure_ascii=ensure_ascii)
    assert json.loads(redactor.text(text)) == {"[email]": "[card]", "lines": "[card]"}
    nested = json.dumps(json.dumps({"k": EMAIL}))
    assert json.loads(json.loads(redactor.text(nested))) == {"k": "[email]"}
    assert redactor.text(r"C:\path\to 4532\u00a0x") == r"C:\path\to 4532\u00a0x"


def test_an_address_after_a_word_and_a_dot_is_found(redactor):
    assert redactor.map_key("peer.2001:db8:cafe:1::17") == "peer.[ipv6]"
    assert redactor.map_key("net.peer.198.51.100.7") == "net.peer.[ipv4]"
    assert redactor.text("version 1.2.3.4.5 and v2.10.0.1.2") == "version 1.2.3.4.5 and v2.10.0.1.2"


def test_ids_given_to_the_api_are_stored_as_ids_are():
    """``message(message_id=)`` and ``tool_execution(call_id=)`` took the app's id as given, into
    the bundle and onto the span; now PII in them is a keyed hash, the same in every record."""
    import otel_session
    from otel_session.testing import capture_bundle

    phone = "+1 415 00001 0199"
    with capture_bundle() as captured:
        with otel_session.session("ids"), otel_session.run(agent="ids"):
            with otel_session.message("user", message_id=f"msg {phone}") as message:
                message.text("hello")
            with otel_session.tool_execution("lookup", call_id=f"call {phone}") as tool:
                tool.finish(result="ok")
    records = captured.bundle.events
    message_ids = {e["message_id"] for e in records if e.get("message_id")}
    call_ids = {e["tool_call_id"] for e in records if e.get("tool_call_id")}
    assert len(message_ids) == 1 and len(call_ids) == 1
    assert all(value.startswith(("msg hmac-sha256:", "call hmac-sha256:")) for value in message_ids | call_ids)
    spans = repr([dict(span.attributes) for span in captured.spans])
    assert "415" not in spans and "msg hmac-sha256:" in spans


def test_lookup_answers_name_the_stored_id_never_the_one_asked_for(tmp_path):
    """Asked by a caller's number, the viewer found the session through its hash and echoed the
    number back (JSON ``session_id``, the page's title); an unknown id came back in the 404 text,
    and so in ``otel-session facts``'s error. Answers now name the stored id, errors mask PII."""
    import urllib.parse

    from click.testing import CliRunner

    import otel_session
    from otel_session.cli import main
    from otel_session.testing import capture_bundle
    from otel_session.viewer import create_app

    caller, stranger = "caller +1 415 00001 0199", "caller +1 415 00002 0199"
    with capture_bundle(tmp_path) as captured:
        with otel_session.session(caller), otel_session.run(agent="lookup"):
            otel_session.slot_write("x", 1)
    stored = captured.bundle.session_id
    assert stored.startswith("caller hmac-sha256:")
    client = create_app({"BUNDLE_DIR": str(tmp_path), "TESTING": True}).test_client()
    for asked in (caller, stored):
        quoted = urllib.parse.quote(asked, safe="")
        assert client.get(f"/api/sessions/{quoted}/runs").get_json()["session_id"] == stored
        assert client.get(f"/api/sessions/{quoted}/feedback").get_json()["session_id"] == stored
        page = client.get(f"/sessions/{quoted}")
        # The caller's number in any form (quoted, escaped); not "415" alone: a random run id or hash may hold it.
        assert page.status_code == 200 and not re.search(rb"415\D{0,3}00001", page.get_data())
        assert stored.encode() in page.get_data()
    missing = client.get(f"/api/sessions/{urllib.parse.quote(stranger, safe='')}/runs")
    assert missing.status_code == 404 and b"415" not in missing.get_data()
    bad_run = client.get(f"/api/sessions/{urllib.parse.quote(stored, safe='')}/runs/run-{urllib.parse.quote(stranger)}/events")
    assert bad_run.status_code == 400 and b"415" not in bad_run.get_data()
    outcome = CliRunner().invoke(main, ["facts", stranger, "--dir", str(tmp_path)])
    assert outcome.exit_code != 0 and "415" not in outcome.output


def test_span_names_of_the_api_carry_the_redacted_names():
    """``execute_tool {name}`` and ``invoke_agent {agent}`` were named with the raw arguments
    while their records held the redacted ones: any exporter (plain ``otlp`` too) sent them."""
    import otel_session
    from otel_session.testing import capture_bundle

    with capture_bundle() as captured:
        with otel_session.session("names"), otel_session.run(agent=f"agent {EMAIL}"):
            with otel_session.tool_execution(f"lookup {EMAIL}") as tool:
                tool.finish(result="ok")
    names = sorted(span.name for span in captured.spans)
    assert "zq00001x" not in repr(names), names
    assert any(name.startswith("execute_tool lookup ") for name in names)
    assert any(name.startswith("invoke_agent agent ") for name in names)


def test_text_sent_as_bytes_is_read_as_text():
    """A ``bytesValue`` became base64 in the bundle, where no detector can see into it (tool
    arguments sent as bytes reached disk whole). Text sent as bytes is now text; other bytes stay base64."""
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    from otel_session.collector.otlp import attributes_of

    arguments = json.dumps({"card": CARD_NBSP}).encode()
    decoded = attributes_of([KeyValue(key="gen_ai.tool.call.arguments", value=AnyValue(bytes_value=arguments)),
                             KeyValue(key="blob", value=AnyValue(bytes_value=b"\xff\x00\xfe"))])
    assert decoded == {"gen_ai.tool.call.arguments": arguments.decode(), "blob": "/wD+"}
    assert "[card]" in Redactor(RedactionPolicy(), key=b"k").tool_arguments(json.loads(decoded["gen_ai.tool.call.arguments"]))["card"]


def test_message_ids_in_records_are_ids(redactor):
    """A record's message id came through the collector as sent (an app whose own policy keeps
    ids, a hostile sender); it is now an id like the tool call id. Fallback ids are random hex."""
    from otel_session.normalize import JournalEvent

    events = [JournalEvent("message_started", 1, {"role": "user"}, message_id="msg +1 415 00001 0199"),
              JournalEvent("message_started", 2, {"role": "user"}, message_id="msg-0123456789012345")]
    redactor.redact_events(events)
    assert events[0].message_id.startswith("msg hmac-sha256:") and events[1].message_id == "msg-0123456789012345"
    single = redactor.redact_event(JournalEvent("message_started", 1, {"role": "user"}, message_id="msg +1 415 00001 0199"))
    assert single.message_id == events[0].message_id


@pytest.mark.parametrize("shape", ["json text", "map", "list of maps"])
def test_tool_arguments_as_a_map_are_redacted_by_the_tool_mode_at_every_level(shape):
    """A tool call's arguments and result sent as a map (an OTLP kvlist) or a list of maps: every
    nested value by the tool mode (here ``mask``), as JSON text is, in a span record and in the
    attribute rule the forwarded OTLP uses. A map took each nested key's own leaf: the text mode."""
    from otel_session.normalize.span_record import span_record
    from otel_session.normalize.spans import SpanData
    from otel_session.redact.attributes import AttributeRedaction
    from otel_session.redact.policy import FieldMode

    secret = "Paris secret plan"
    value = {"json text": json.dumps({"city": secret}), "map": {"city": secret}, "list of maps": [{"city": secret}]}[shape]
    redactor = Redactor(RedactionPolicy(tool_arguments=FieldMode.MASK, tool_results=FieldMode.MASK), key=b"k" * 32)
    attributes = {"gen_ai.tool.call.arguments": value, "gen_ai.tool.call.result": value}
    span = SpanData(trace_id=1, span_id=2, parent_span_id=None, name="tool", start_time_ns=1, end_time_ns=2, kind=0,
                    status_code="unset", status_message="", attributes=attributes, events=(), resource_attributes={},
                    scope_name="app")
    recorded = redactor.redact_event(span_record(span, [])).payload["attributes"]
    forwarded = AttributeRedaction(redactor).redact(attributes)
    for redacted in (recorded, forwarded):
        assert secret not in json.dumps(redacted)
        assert "<redacted str len=" in json.dumps(redacted)
