"""``bench.collector_instructions``' child replays the benchmark's requests through every stage
(what callgrind counts must be the real pipeline, every span of it, not a path that fails early)."""

from __future__ import annotations

import pytest

from bench import collector_instructions


@pytest.mark.parametrize("stage", collector_instructions.STAGES)
def test_every_stage_takes_every_span_of_the_benchmark_requests(tmp_path, stage):
    path = str(tmp_path / "requests.bin")
    collector_instructions.encode_requests(path, 2, per_trace=64)
    assert collector_instructions.replay(path, stage, 2) == 2 * collector_instructions.SPANS_PER_REQUEST


def test_a_saved_baseline_is_what_the_next_run_reports_as_before(tmp_path):
    result = {"machine": {"at": "2026-12-01T12:00:00Z"}, "details": {"spans_per_trace": 64},
              "figures": [{"name": "collector_instructions.total", "value": 371_596}]}
    path = tmp_path / "baseline.json"
    collector_instructions.save_baseline(path, result, "main before the change")
    baseline = collector_instructions.read_baseline(path)
    assert baseline["figures"] == {"collector_instructions.total": 371_596}
    assert baseline["measured_on"] == "main before the change" and baseline["spans_per_trace"] == 64
    assert collector_instructions.read_baseline(tmp_path / "absent.json") == {}
