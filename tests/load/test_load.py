"""Zero loss below the bounds and bounded memory (the workloads of ``python -m bench.load``, smaller)."""

from __future__ import annotations

from bench.load import COLLECTOR_MEMORY_BOUND_BYTES, MEMORY_CONSTANT_BYTES, collector_load, measure


def test_one_message_of_many_deltas_loses_nothing():
    result = measure("single_message", 20_000)
    assert result["status"] == "complete"
    assert result["capture"]["event_count"] == result["records_on_disk"]
    assert result["lost"] == 0 and result["deltas_on_disk"] == 20_000
    assert result["in_order"] and result["seq_contiguous"]
    assert result["peak_rss_growth_bytes"] <= result["memory_bound_bytes"]


def test_many_concurrent_short_runs_lose_nothing():
    result = measure("concurrent_runs", 200)
    assert result["runs_open_at_once"] == 200
    assert result["bundles"] == 200
    assert result["lost"] == 0 and result["records_on_disk"] == result["records_expected"]
    assert result["runs_not_matching_reference"] == 0
    assert result["peak_rss_growth_bytes"] <= MEMORY_CONSTANT_BYTES


def test_concurrent_official_exporters_every_span_accounted_for():
    result = collector_load(exporters=10, spans_per_exporter=400, batch=200)
    assert result["spans_sent"] == 4_000
    assert result["unaccounted"] == 0
    assert result["counters"]["bundled"] == 4_000 and result["counters"]["rejected"] == 0
    assert result["genai_spans_missing_on_disk"] == 0 and result["genai_spans_lost"] == 0
    assert result["bundles"] == 4_000 // 8 and result["bundles_not_complete"] == 0
    assert result["collector_peak_rss_growth_bytes"] <= COLLECTOR_MEMORY_BOUND_BYTES
