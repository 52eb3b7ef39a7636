"""What ``otel-session collect`` sets for its own process: the garbage collector tuned for serving."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys

from otel_session.collector.server import SERVING_GC_THRESHOLD, settle_heap_for_serving


def test_collect_tunes_the_garbage_collector_of_its_own_process(tmp_path):
    """``collect`` is a process of its own: its start-up objects frozen, young collections rarer
    (``settle_heap_for_serving``); asked by a signal once the collector says it listens."""
    script = (
        "import gc, signal, sys\n"
        "signal.signal(signal.SIGUSR1, lambda *_: print('gc', gc.get_threshold()[0], gc.get_freeze_count() > 0,"
        " file=sys.stderr, flush=True))\n"
        "from otel_session.cli import main\n"
        "main(['collect', '--dir', sys.argv[1], '--grpc', '127.0.0.1:0', '--http', 'off'])\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "OTEL_SESSION_REDACTION_KEY": "k"},
    )
    try:
        assert child.stdout.readline().startswith("otel-session collector: grpc=127.0.0.1:")
        child.send_signal(signal.SIGUSR1)  # handled before SIGTERM: CPython runs pending handlers by number
        child.send_signal(signal.SIGTERM)
        _, stderr = child.communicate(timeout=300)
    finally:
        child.kill()
    assert child.returncode == 0, stderr
    assert f"gc {SERVING_GC_THRESHOLD} True" in stderr.splitlines()


def test_settling_the_heap_freezes_what_is_alive_and_keeps_the_older_generations_thresholds():
    threshold = gc.get_threshold()
    try:
        gc.set_threshold(700, 7, 9)
        settle_heap_for_serving()
        assert gc.get_threshold() == (SERVING_GC_THRESHOLD, 7, 9)
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
