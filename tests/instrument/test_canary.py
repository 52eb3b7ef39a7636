"""Canaries: personal data through every API entry point appears nowhere on disk or in spans."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import otel_session
from otel_session.core import semconv as sc
from otel_session.testing import capture_bundle

EMAIL = "zz.canary.7319@canary-mail.example"
PHONE = "+44 20 7946 0958"
CARD = "4532 0151 1283 0366"  # Luhn-valid test number
CANARIES = [EMAIL, PHONE, CARD, CARD.replace(" ", ""), "7946 0958", "1283 0366", "canary.7319"]
KEPT = "kept-slot-value-4242"


def _pii(label: str) -> str:
    return f"{label}: mail {EMAIL}, call {PHONE}, card {CARD}"


def _exercise() -> None:
    slots = {"contact": _pii("before")}
    with otel_session.session("canary-session"):
        with otel_session.run(agent="canary") as run:
            with otel_session.turn(0, state="collect", required_slots=["contact"], slots=slots) as turn:
                with otel_session.message("user") as m:
                    m.text(_pii("user text"))
                with otel_session.message("assistant") as m:
                    m.delta(_pii("delta"))
                    m.delta(f" {EMAIL} ")
                    m.delta(CARD, kind="thinking", index=1)
                    m.delta('{"email": "' + EMAIL + '"}', kind="tool_call", index=2)
                otel_session.slot_write("contact", _pii("slot"), source="nlu")
                otel_session.slot_write("email", EMAIL, source="nlu")
                otel_session.slot_write("card", {"number": CARD, "holder": {"phone": PHONE}})
                otel_session.slot_write("party_size", KEPT)
                slots["phone"] = PHONE  # unattributed
                slots["contact"] = {"nested": [_pii("nested")]}
                otel_session.guard("has_contact", passed=True, state="collect")
                with otel_session.tool_execution(
                    "lookup", call_id="c1", arguments={"email": EMAIL, "nested": [{"card": CARD}], "n": 442079460958}
                ) as tool:
                    tool.update(_pii("progress"))
                    tool.finish(result={"found": _pii("result"), "phone": PHONE})
                try:
                    with otel_session.tool_execution("charge", arguments=[CARD]):
                        raise RuntimeError(_pii("error"))
                except RuntimeError:
                    pass
                otel_session.transition(
                    "collect", "confirm", reason=_pii("reason"), candidates=[{"to": "confirm", "why": EMAIL}, PHONE]
                )
                turn.finish(state="confirm")
            otel_session.slot_write("email", EMAIL)  # at run level, outside a turn
        assert run.run_id


def test_canaries_reach_neither_disk_nor_spans():
    policy = otel_session.RedactionPolicy(keep_slots={"party_size"})
    with capture_bundle(redaction=policy) as captured:
        _exercise()
    bundle = captured.bundle
    assert bundle.status.value == "complete"
    seen_kept = False
    for directory, _dirs, files in os.walk(captured.root):
        for name in files:
            data = Path(directory, name).read_bytes()
            for canary in CANARIES:
                assert canary.encode() not in data, f"{canary!r} found in {name}"
            seen_kept |= KEPT.encode() in data
    assert seen_kept, "the allow-listed slot is kept as is"
    span_text = repr(
        [(span.name, dict(span.attributes), [(e.name, dict(e.attributes)) for e in span.events]) for span in captured.spans]
    )
    for canary in CANARIES:
        assert canary not in span_text
    assert KEPT in span_text
    # what the redaction left behind is still useful
    types = [e["type"] for e in bundle.events]
    assert types.count("slot_diff") == 2 and types.count("slot_write") == 5
    assert "[email]" in span_text and "[card]" in span_text and "[phone]" in span_text


SPLIT_TEXT = f"mail {EMAIL} or call {PHONE} now"
# Pieces of the values that a delta ending inside them would have released before.
FRAGMENTS = ["zz.can", "canary.7", "7319@", "@canary-m", "mail.exa", "+44 2", "20 79", "7946", "0958"]
# Four digits alone turn up by chance in a random hex id or a timestamp: those are looked for in
# the recorded text only (journal payloads, span event delta text), the others in every byte.
TEXT_ONLY = {"7946", "0958"}


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13])
def test_pii_split_across_deltas_is_never_recorded_in_part(size):
    """Each value is held back until a later delta completes it; no fragment is ever released."""
    with capture_bundle() as captured:
        with otel_session.session("split"), otel_session.run(agent="canary"):
            with otel_session.message("assistant") as m:
                for start in range(0, len(SPLIT_TEXT), size):
                    m.delta(SPLIT_TEXT[start : start + size])
    for directory, _dirs, files in os.walk(captured.root):
        for name in files:
            data = Path(directory, name).read_bytes()
            for fragment in set(FRAGMENTS) - TEXT_ONLY:
                assert fragment.encode() not in data, f"{fragment!r} found in {name} (deltas of {size})"
    payloads = repr([record["payload"] for record in captured.bundle.events])
    span_text = repr([[dict(e.attributes) for e in span.events] for span in captured.spans])
    delta_text = repr([e.attributes.get(sc.DELTA_TEXT) for span in captured.spans for e in span.events])
    for fragment in FRAGMENTS:
        assert fragment not in payloads, f"{fragment!r} in a journal payload (deltas of {size})"
        assert fragment not in (delta_text if fragment in TEXT_ONLY else span_text)
    deltas = [e["payload"]["delta"] for e in captured.bundle.events if e["type"] == "assistant_delta"]
    assert "".join(deltas) == "mail [email] or call [phone] now"
    assert len(deltas) in (-(-len(SPLIT_TEXT) // size), -(-len(SPLIT_TEXT) // size) + 1)  # one a delta (+ the rest)
