"""The price table (otel_session.replay.cost): matching, cached tokens, the override file."""

from __future__ import annotations

import logging

import pytest

from otel_session.replay.cost import ENV_PRICES, ModelPrice, PriceTable, price_table, summarize

TABLE = PriceTable.from_document({"as_of": "2026-01-01", "models": {
    "gpt-4o": {"input": 2.5, "output": 10, "cached_input": 1.25},
    "gpt-4o-mini": {"input": 0.15, "output": 0.6},
}})


@pytest.mark.parametrize(("model", "price"), [
    ("gpt-4o", ModelPrice(2.5, 10.0, 1.25)),
    ("GPT-4o-2024-08-06", ModelPrice(2.5, 10.0, 1.25)),
    ("gpt-4o-mini-2024-07-18", ModelPrice(0.15, 0.6)),  # the longest entry it starts with
    ("openai/gpt-4o-mini", ModelPrice(0.15, 0.6)),
    ("gpt-4oX", None),
    ("mock-gpt", None),
    (None, None),
])
def test_a_model_is_priced_by_its_name_or_the_longest_entry_it_starts_with(model, price):
    assert TABLE.price_of(model) == price


def test_cached_input_tokens_are_priced_at_the_cached_rate():
    cost = TABLE.cost("gpt-4o", {"input_tokens": 1_000_000, "cached_input_tokens": 400_000, "output_tokens": 100_000})
    assert cost == pytest.approx(600_000 * 2.5e-6 + 400_000 * 1.25e-6 + 100_000 * 10e-6)


def test_an_unknown_model_has_no_price_never_zero():
    summary = summarize([{"model": "mock-gpt", "usage": {"input_tokens": 10}}], TABLE)
    assert summary == {"usd": None, "priced_calls": 0, "unpriced_models": ["mock-gpt"], "prices_as_of": "2026-01-01"}


def test_the_shipped_table_has_a_date_and_a_file_replaces_it(tmp_path, monkeypatch):
    assert price_table().as_of and price_table().price_of("gpt-4o-mini") is not None
    prices = tmp_path / "prices.json"
    prices.write_text('{"as_of": "2027-03-01", "models": {"house-llm": {"input": 1, "output": 2}}}')
    monkeypatch.setenv(ENV_PRICES, str(prices))
    assert price_table().as_of == "2027-03-01" and price_table().price_of("house-llm") == ModelPrice(1.0, 2.0)


@pytest.mark.parametrize("content", ['{"models": {"x": {"input": -1, "output": 2}}}', "not json", '{"models": []}'])
def test_a_bad_price_file_is_one_warning_and_the_shipped_table(tmp_path, monkeypatch, caplog, content):
    prices = tmp_path / "prices.json"
    prices.write_text(content)
    monkeypatch.setenv(ENV_PRICES, str(prices))
    with caplog.at_level(logging.WARNING):
        first, second = price_table(), price_table()
    assert first.price_of("gpt-4o-mini") is not None and second is first
    warnings = [record for record in caplog.records if "is not a price table" in record.getMessage()]
    assert len(warnings) == 1


def test_facts_kept_for_a_sealed_run_are_priced_again_when_the_prices_change(record_run, tmp_path, monkeypatch):
    from otel_session.replay.index import IndexStatus, open_run_index

    ids = {"message_id": "a1"}
    path = record_run("call-priced", [
        ("message_started", {"role": "assistant"}, ids),
        ("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": "Hi"}],
                              "model": "house-llm", "usage": {"input_tokens": 1_000_000, "output_tokens": 0}}, ids),
    ])
    first = open_run_index(tmp_path, path)
    assert first.facts()["cost"]["usd"] is None  # the shipped table has no price for it
    prices = tmp_path / "prices.json"
    prices.write_text('{"as_of": "2027-03-01", "models": {"house-llm": {"input": 2, "output": 4}}}')
    monkeypatch.setenv(ENV_PRICES, str(prices))
    again = open_run_index(tmp_path, path)
    assert again.status is IndexStatus.REBUILT and again.facts()["cost"]["usd"] == 2.0
    assert open_run_index(tmp_path, path).status is IndexStatus.LOADED
