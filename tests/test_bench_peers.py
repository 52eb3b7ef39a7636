"""``bench.peers``' harness: CPU seconds of a server's whole process tree, and the wait until a
store has settled (its count reached what was sent, or stopped moving) — no benchmark runs here."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap

from bench import peers

_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _stat(pid: int, ppid: int, utime: int, stime: int, cutime: int = 0, cstime: int = 0, comm: str = "python") -> str:
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime …
    return f"{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194304 10 0 0 0 {utime} {stime} {cutime} {cstime} 20 0 3 0 99\n"


def test_a_stat_line_is_read_after_the_command_name_whatever_it_holds():
    line = _stat(7, 3, 100, 20, 5, 1, comm="we (ird) ) 1 2 3 name")
    assert peers.parse_stat(line) == (3, 126)


def test_the_cpu_of_a_tree_sums_the_process_and_every_descendant_and_nothing_else(tmp_path):
    table = {10: (1, 100, 10, 30, 0), 11: (10, 5, 5, 0, 0), 12: (10, 40, 0, 0, 0), 13: (12, 7, 3, 0, 0),
             20: (1, 999, 999, 0, 0), 21: (20, 50, 0, 0, 0)}
    for pid, (ppid, *ticks) in table.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(_stat(pid, ppid, *ticks))
    (tmp_path / "14").mkdir()  # a process gone between listing and reading: no stat file
    (tmp_path / "self").mkdir()
    assert peers.tree_cpu_s(10, proc=tmp_path) == (140 + 10 + 40 + 10) * _TICK_S
    assert peers.tree_cpu_s(12, proc=tmp_path) == 50 * _TICK_S
    assert peers.tree_cpu_s(99, proc=tmp_path) == 0


_BURN = "import time\nwhile time.process_time() < 0.3: pass\n"
_TREE = textwrap.dedent(f"""
    import subprocess, sys
    subprocess.run([sys.executable, "-c", {_BURN!r}])       # burns, exits, is reaped
    print("reaped", flush=True)
    sys.stdin.readline()                                    # the test has measured: go on
    live = subprocess.Popen([sys.executable, "-c", {_BURN!r} + "print('burnt', flush=True); import sys; sys.stdin.read()"])
    live.wait()                                             # burns, then lives until stdin closes
""")


def test_a_real_tree_is_charged_for_its_reaped_and_its_live_descendants():
    server = subprocess.Popen([sys.executable, "-c", _TREE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline() == "reaped\n"
        after_reaped = peers.tree_cpu_s(server.pid)
        server.stdin.write("go\n")  # the live child starts only now: none of its burn is in after_reaped
        server.stdin.flush()
        assert server.stdout.readline() == "burnt\n"
        after_live = peers.tree_cpu_s(server.pid)
        # Two children of 0.3 CPU-s each (the kernel counts in ticks); the launcher's own start-up on top.
        assert after_reaped >= 0.3 - 2 * _TICK_S
        assert after_live - after_reaped >= 0.3 - 2 * _TICK_S
    finally:
        server.stdin.close()
        assert server.wait(30) == 0


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _poller(counts: list[int], clock: _Clock):
    """Answers ``counts`` one poll after another (the last one forever), sampling the clock with each."""
    answers = iter(counts)
    last = [counts[-1]]

    def poll():
        last[0] = next(answers, last[0])
        return last[0], clock.now
    return poll


def test_a_store_that_reaches_what_was_sent_is_settled_at_once():
    clock = _Clock()
    settled = peers.settle(_poller([0, 40, 90, 100], clock), 100, quiet_s=5, timeout_s=60, interval_s=1,
                           clock=clock, sleep=clock.sleep)
    assert (settled.count, settled.reason, settled.waited_s, settled.sample) == (100, "all", 3, 103)


def test_a_store_short_of_what_was_sent_is_settled_once_its_count_stops_moving_with_the_sample_of_its_last_change():
    clock = _Clock()
    settled = peers.settle(_poller([0, 30, 30, 64, 64], clock), 100, quiet_s=5, timeout_s=60, interval_s=1,
                           clock=clock, sleep=clock.sleep)
    # 64 first seen at t=103: the CPU sample of that poll is charged, not the quiet seconds after it.
    assert (settled.count, settled.reason, settled.sample) == (64, "stable", 103)
    assert settled.waited_s == 8


def test_a_store_still_moving_at_the_timeout_is_reported_as_such():
    clock = _Clock()
    settled = peers.settle(_poller(list(range(0, 1000, 7)), clock), 10_000, quiet_s=5, timeout_s=10, interval_s=1,
                           clock=clock, sleep=clock.sleep)
    assert settled.reason == "timeout" and settled.waited_s == 10 and settled.count == 70


def test_jsonl_lines_counts_complete_lines_and_rereads_a_file_that_grew(tmp_path):
    trace = tmp_path / "sessions" / "abc"
    trace.mkdir(parents=True)
    count = peers.JsonlLines(tmp_path)
    assert count() == 0
    (trace / "trace_abc.jsonl").write_text('{"a": 1}\n{"a": 2}\n{"a": 3')  # the last line is still being written
    assert count() == 2
    with (trace / "trace_abc.jsonl").open("a") as handle:
        handle.write('}\n')
    (tmp_path / "sessions" / "other.jsonl").write_text('{}\n')
    assert count() == 4


def test_sqlite_rows_reads_a_table_and_is_zero_before_it_exists(tmp_path):
    database = tmp_path / "phoenix.db"
    count = peers.sqlite_rows(database, "spans")
    assert count() == 0
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE spans (span_id TEXT UNIQUE)")
        connection.executemany("INSERT INTO spans VALUES (?)", [("a",), ("b",), ("c",)])
    assert count() == 3


def test_the_benchmark_stream_has_distinct_trace_and_span_ids_as_sdks_draw_them():
    # The default stream: 4 exporters x 10 batches of 512 spans, in traces of 64. A store keyed
    # on span id (Phoenix) or on trace id (a bundle is one run = one trace) would merge repeats.
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    from bench.collector import _batch

    resource, scope = Resource.create({}), InstrumentationScope("bench")
    spans = [span for exporter in range(4) for batch in range(10) for span in _batch(exporter, batch, 512, 64, resource, scope)]
    assert len({span.context.span_id for span in spans}) == len(spans) == 20_480
    assert len({span.context.trace_id for span in spans}) == 20_480 // 64
