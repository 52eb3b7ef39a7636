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
