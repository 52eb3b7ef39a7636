"""Nothing acknowledged is lost on kill -9: an export is answered only once its spans are in the journal.

Official OTLP exporters (gRPC and HTTP) export whole traces concurrently into a collector process
that is SIGKILLed at a random moment, 20 times, restarted on the same directory each time
(``bench.load.kill9``). After every kill, every span whose export was answered SUCCESS is in a
journal file, and no bundle left ``recording`` reads ``complete``; after a last restart and a
clean stop, every bundle is sealed ``complete``.
"""

from __future__ import annotations

import pytest

from bench.load import kill9


@pytest.mark.slow
def test_no_acknowledged_span_is_lost_across_20_kill_9s():
    result = kill9(20)
    assert result["acked_spans_lost"] == 0, result["acked_spans_lost_by_kill"]
    assert result["spans_acked"] > 20 * 4 * 4  # every round was under load
    assert result["recording_bundles_read_complete"] == 0
    assert result["final_statuses"] and set(result["final_statuses"]) == {"complete"}
    assert result["final_exit_code"] == 0
