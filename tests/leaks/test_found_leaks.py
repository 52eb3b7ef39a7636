"""The leaks the canary test (``test_no_leak_anywhere``) found, each pinned at its own depth."""

from __future__ import annotations

import json

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
