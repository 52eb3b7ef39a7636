"""``OTEL_SESSION_REQUIRED_SLOTS``: one declaration of required slots for every framework, keyed by
agent or graph name (``core.config``), in its forms; the LangGraph-only variable still works under it."""

from __future__ import annotations

import logging

import pytest

from otel_session.core.config import (
    ENV_LANGGRAPH_REQUIRED_SLOTS,
    ENV_REQUIRED_SLOTS,
    parse_required_slots,
    required_slots_for,
    required_slots_setting,
)


@pytest.fixture(autouse=True)
def _no_setting(monkeypatch):
    monkeypatch.delenv(ENV_REQUIRED_SLOTS, raising=False)
    monkeypatch.delenv(ENV_LANGGRAPH_REQUIRED_SLOTS, raising=False)


@pytest.mark.parametrize(("raw", "declared"), [
    ("booking=party_size,date,time;support=order_id",
     {"booking": ["party_size", "date", "time"], "support": ["order_id"]}),
    (" booking = party_size , date ; ", {"booking": ["party_size", "date"]}),
    ("booking=date\nbooking.ask_card=card_on_file  # a graph's node\n\n# a comment line",
     {"booking": ["date"], "booking.ask_card": ["card_on_file"]}),
    ("booking=date,date,time", {"booking": ["date", "time"]}),  # each slot once
    ('{"booking": ["date", "party_size"], "support": ["order_id"]}',
     {"booking": ["date", "party_size"], "support": ["order_id"]}),
    ("", {}),
])
def test_the_forms(raw, declared):
    assert parse_required_slots(raw) == declared


def test_a_file(tmp_path, monkeypatch):
    path = tmp_path / "slots.txt"
    path.write_text("# required slots\nbooking=party_size,date\nsupport=order_id\n")
    monkeypatch.setenv(ENV_REQUIRED_SLOTS, f"@{path}")
    assert required_slots_setting() == {"booking": ["party_size", "date"], "support": ["order_id"]}
    (tmp_path / "slots.json").write_text('{"booking": ["time"]}')
    monkeypatch.setenv(ENV_REQUIRED_SLOTS, f"@{tmp_path / 'slots.json'}")
    assert required_slots_setting() == {"booking": ["time"]}  # read again when the setting changes


def test_a_bad_part_is_left_out_with_one_line_and_the_rest_kept(caplog):
    with caplog.at_level(logging.WARNING):
        declared = parse_required_slots("booking=date;nonsense;support=;=x;ok=a")
    assert declared == {"booking": ["date"], "ok": ["a"]}
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 3 and all("is not name=slot,slot; left out" in line for line in lines)


@pytest.mark.parametrize("raw", ['{"booking": "date"', '["date"]', '{"booking": "date"}'])
def test_bad_json_declares_nothing_it_cannot_read(raw, caplog):
    with caplog.at_level(logging.WARNING):
        assert parse_required_slots(raw) == {}
    assert caplog.records and ENV_REQUIRED_SLOTS in caplog.records[0].getMessage()


def test_a_missing_file_declares_nothing_with_one_line(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv(ENV_REQUIRED_SLOTS, f"@{tmp_path / 'absent.txt'}")
    with caplog.at_level(logging.WARNING):
        assert required_slots_setting() == {}
    assert "cannot read" in caplog.records[0].getMessage()


def test_the_langgraph_variable_is_read_under_the_new_one(monkeypatch):
    monkeypatch.setenv(ENV_LANGGRAPH_REQUIRED_SLOTS, '{"booking": ["date"], "survey": ["score"]}')
    assert required_slots_setting() == {"booking": ["date"], "survey": ["score"]}
    monkeypatch.setenv(ENV_REQUIRED_SLOTS, "booking=party_size")
    assert required_slots_setting() == {"booking": ["party_size"], "survey": ["score"]}  # the new one wins by name


def test_slots_for_several_names_are_their_union_in_order():
    declared = {"booking": ["date", "party_size"], "booking.confirm": ["card", "date"]}
    assert required_slots_for("booking", "booking.confirm", None, "other", declared=declared) == ["date", "party_size", "card"]
    assert required_slots_for(None, declared=declared) == []
