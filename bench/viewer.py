"""The viewer over HTTP on a 100,000-event run (issue 6), each figure against a floor from the same run.

A run recorded by the real BundleWriter (``bench.replay.record_run``) is served by the real app on
werkzeug's threaded server on 127.0.0.1, and read by a plain HTTP client:

(a) snapshot: all events through ``…/events`` (pages of 10,000) vs ``read_bundle`` on the directory;
(b) seek: ``…/state?seq=`` at seq 100 and 99,999 (warm checkpoints) vs ``Replayer.state_at`` plus
    ``canonical_json`` in process at the same seq (the state, and so the answer, grows with the seq);
(c) SSE: the whole sealed journal through ``…/stream`` vs ``JournalTail.poll`` on the same file
    (target ≥ 10,000 events/s, far above any token stream);
(d) live lag: a writer appends 2,000 events at about 1,000/s while a client follows the stream;
    append → receipt latency p50/p95 (target p95 < 250 ms: writer flush 25 ms + tail poll 50 ms);
(e) a crowded root: listing the run's session and seeking it, alone in the root vs among 2,000
    other runs (target ≤ 2×), and the whole sessions list then;
(f) the runs list at 10,000 runs (``GET /api/runs``): the first page once every bundle was read
    (summaries are cached per sealed bundle), a filtered page (text + status + kind), and the
    first listing that reads every bundle (target for the pages: < 250 ms);
(g) the pages in Debian's Chromium on a 2,000-event run (``bench.viewer_pages``): time until each
    page has rendered its data (target < 1 s), a seek on the replay page, the replay page's weight.

Run: ``python -m bench.viewer`` → ``bench/results-viewer.json`` and a short summary;
``python -m bench.viewer --list-only`` / ``--pages-only`` runs (f) / (g) alone.
"""

from __future__ import annotations

import http.client
import json
import logging
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from werkzeug.serving import make_server

from bench import Figure, summary_line, write_results
from bench.replay import record_run
from bench.viewer_pages import page_figures
from otel_session.bundle.read import JournalTail, read_bundle
from otel_session.replay.reduce import Replayer, canonical_json
from otel_session.viewer import create_app
from otel_session.bundle.write import BundleWriter

SEEKS = (100, 99_999)
LIST_RUNS = 10_000
LIVE_EVENTS = 2_000
CROWD_RUNS = 2_000
LIVE_RATE_PER_S = 1_000


class _Server:
    def __init__(self, root: Path) -> None:
        self.server = make_server("127.0.0.1", 0, create_app({"BUNDLE_DIR": str(root)}), threaded=True)
        self.port = self.server.server_port
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def get(self, path: str) -> bytes:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            body = response.read()
            assert response.status == 200, body[:200]
            return body
        finally:
            connection.close()

    def stream(self, path: str) -> Iterator[tuple[str, bytes]]:
        """Yield (event name, data) of each SSE message until the response ends."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        connection.request("GET", path)
        response = connection.getresponse()
        event, data = "message", b""
        try:
            for line in response:
                if line == b"\n":
                    if data:
                        yield event, data
                    event, data = "message", b""
                elif line.startswith(b"data: "):
                    data = line[6:-1]
                elif line.startswith(b"event: "):
                    event = line[7:-1].decode()
        finally:
            connection.close()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _snapshot(server: _Server, base: str) -> int:
    count, after = 0, 0
    while True:
        page = json.loads(server.get(f"{base}/events?after_seq={after}&limit=10000"))
        count += len(page["events"])
        if page["next_after_seq"] is None:
            return count
        after = page["next_after_seq"]


def _sse_count(server: _Server, base: str) -> int:
    return sum(1 for event, _ in server.stream(f"{base}/stream") if event == "message")


def _tail_count(events_path: Path) -> int:
    tail, count = JournalTail(events_path), 0
    while records := tail.poll():
        count += len(records)
    return count


def _live_lag(root: Path) -> list[float]:
    """Append at a steady rate while a client follows; return append → receipt latencies (ms)."""
    writer = BundleWriter(root)
    run = writer.open_run(session_id="bench-live", run_id=f"run-{uuid.uuid4()}")
    run.append("run_started", {"kind": "live"})
    writer.force_flush()
    server = _Server(root)
    sent: dict[int, float] = {}
    lags: list[float] = []

    def produce() -> None:
        for seq in range(2, LIVE_EVENTS + 2):
            sent[seq] = time.perf_counter()
            run.append("assistant_delta", {"index": 0, "kind": "text", "delta": "tok "}, message_id="m1")
            time.sleep(1 / LIVE_RATE_PER_S)
        run.close()

    producer = threading.Thread(target=produce)
    try:
        base = f"/api/sessions/bench-live/runs/{run.run_id}"
        stream = server.stream(f"{base}/stream")
        producer.start()
        for event, data in stream:
            if event == "message":
                seq = json.loads(data)["seq"]
                if seq in sent:
                    lags.append((time.perf_counter() - sent[seq]) * 1000)
        producer.join()
    finally:
        server.close()
        writer.shutdown()
    assert len(lags) == LIVE_EVENTS, f"{len(lags)} of {LIVE_EVENTS} live events arrived"
    return lags


def _lookup_ms(server: _Server, runs_url: str, base: str) -> float:
    """Median ms of listing one session's runs and seeking one of them (what a viewer click costs)."""
    return statistics.median(
        _timed(lambda: (server.get(runs_url), server.get(f"{base}/state?seq=100"))) for _ in range(30)
    ) * 1000


def _record_other_runs(root: Path, count: int) -> None:
    """``count`` small sealed runs in other sessions (4 runs a session)."""
    writer = BundleWriter(root)
    for number in range(count):
        run = writer.open_run(session_id=f"crowd-{number // 4}", run_id=f"run-{uuid.uuid4()}")
        run.append("run_started", {"kind": "live", "agent": "bench"})
        run.append("run_finished", {"status": "ok"})
        run.close()
    writer.shutdown()


def _record_list_runs(root: Path, count: int) -> None:
    """``count`` sealed runs of 2 turns each, one in ten with a failed tool, one in three an eval run."""
    writer = BundleWriter(root)
    for number in range(count):
        evaluation = {"kind": "eval", "eval_id": f"nightly-{number % 3}"} if number % 3 == 0 else {}
        run = writer.open_run(session_id=f"list-{number // 2}", run_id=f"run-{uuid.uuid4()}", agent=f"agent-{number % 4}", **evaluation)
        run.append("run_started", {"kind": evaluation.get("kind", "live"), "agent": f"agent-{number % 4}"})
        for turn in range(2):
            run.append("turn_started", {"state": "ask", "required_slots": []}, turn_index=turn)
            run.append("message_started", {"role": "user"}, turn_index=turn, message_id=f"u{turn}")
            run.append("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": f"order {number} turn {turn}"}]},
                       turn_index=turn, message_id=f"u{turn}")
            run.append("message_started", {"role": "assistant"}, turn_index=turn, message_id=f"a{turn}")
            run.append("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": "ok"}], "model": "m",
                                            "usage": {"input_tokens": 12, "output_tokens": 3}}, turn_index=turn, message_id=f"a{turn}")
            run.append("turn_finished", {"state": "ask", "required_slots": [], "missing_required_slots": []}, turn_index=turn)
        if number % 10 == 0:
            run.append("tool_execution_started", {"name": "lookup", "arguments": {}}, tool_call_id="t1")
            run.append("tool_execution_finished", {"status": "error", "error": "timeout"}, tool_call_id="t1")
        run.close(run_status="ok")
    writer.shutdown()


def list_figures() -> tuple[list[Figure], dict]:
    """(f): the runs list at ``LIST_RUNS`` runs."""
    with tempfile.TemporaryDirectory(prefix="otel-session-bench-list-") as tmp:
        root = Path(tmp)
        _record_list_runs(root, LIST_RUNS)
        server = _Server(root)
        try:
            first_listing_ms = _timed(lambda: server.get("/api/runs?limit=50")) * 1000
            time.sleep(2.5)  # session directories younger than 2 s are listed again on each request (store)
            server.get("/api/runs?limit=50")
            first_page = statistics.median(_timed(lambda: server.get("/api/runs?limit=50")) for _ in range(7)) * 1000
            filtered_url = "/api/runs?limit=50&q=order%2012&status=error&kind=live&sort=tokens"
            filtered = json.loads(server.get(filtered_url))
            filtered_page = statistics.median(_timed(lambda: server.get(filtered_url)) for _ in range(7)) * 1000
            total = json.loads(server.get("/api/runs?limit=1"))["total"]
        finally:
            server.close()
    assert total == LIST_RUNS, total
    figures = [
        Figure(f"viewer.runs_list_first_page_ms_{LIST_RUNS}_runs", first_page, "ms", target="< 250 ms", ok=first_page < 250,
               note="GET /api/runs?limit=50, summaries cached per sealed bundle"),
        Figure(f"viewer.runs_list_filtered_page_ms_{LIST_RUNS}_runs", filtered_page, "ms", target="< 250 ms", ok=filtered_page < 250,
               note=f"text + status + kind filter, sorted by tokens ({filtered['total']} matches)"),
        Figure(f"viewer.runs_list_first_listing_ms_{LIST_RUNS}_runs", first_listing_ms, "ms",
               note="the first listing after start reads and summarizes every bundle"),
    ]
    return figures, {"list_runs": LIST_RUNS, "filtered_matches": filtered["total"]}


def main() -> dict:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log lines in the summary
    with tempfile.TemporaryDirectory(prefix="otel-session-bench-viewer-") as tmp:
        root = Path(tmp)
        path = record_run(root)
        manifest = json.loads((path / "run.json").read_text())
        base = f"/api/sessions/{manifest['session_id']}/runs/{manifest['run_id']}"
        server = _Server(root)
        try:
            read_s = statistics.median(_timed(lambda: read_bundle(path)) for _ in range(3))
            snapshot_s = statistics.median(_timed(lambda: _snapshot(server, base)) for _ in range(3))
            events = _snapshot(server, base)

            replayer = Replayer(read_bundle(path).events)
            replayer.state_at(None)
            server.get(f"{base}/state")  # builds the server's checkpoints once
            seek_http = {seq: statistics.median(_timed(lambda s=seq: server.get(f"{base}/state?seq={s}")) for _ in range(30)) * 1000
                         for seq in SEEKS}
            seek_local = {seq: statistics.median(_timed(lambda s=seq: canonical_json(replayer.state_at(s))) for _ in range(30)) * 1000
                          for seq in SEEKS}
            state_bytes = {seq: len(server.get(f"{base}/state?seq={seq}")) for seq in SEEKS}

            tail_s = _timed(lambda: _tail_count(path / "events.ndjson"))
            sse_s = _timed(lambda: _sse_count(server, base))
            assert _sse_count(server, base) == events

            # (e) the same lookups once the root holds thousands of other runs
            runs_url = f"/api/sessions/{manifest['session_id']}/runs"
            lookup_alone = _lookup_ms(server, runs_url, base)
            _record_other_runs(root, CROWD_RUNS)
            lookup_crowded = _lookup_ms(server, runs_url, base)
            server.get("/api/sessions")  # the first listing reads every bundle once
            list_crowded = statistics.median(_timed(lambda: server.get("/api/sessions")) for _ in range(3)) * 1000
        finally:
            server.close()
        lags = sorted(_live_lag(root / "live"))

    p50, p95 = lags[len(lags) // 2], lags[int(len(lags) * 0.95)]
    figures = [
        Figure("viewer.snapshot_events_per_s", events / snapshot_s, "events/s", baseline=events / read_s,
               note="…/events pages of 10,000 over HTTP vs read_bundle"),
        Figure("viewer.request_overhead_ms", seek_http[SEEKS[0]] - seek_local[SEEKS[0]], "ms", target="< 20 ms",
               ok=seek_http[SEEKS[0]] - seek_local[SEEKS[0]] < 20, note=f"HTTP …/state?seq={SEEKS[0]} minus in process"),
        Figure(f"viewer.state_seek_at_{SEEKS[1]}_ms", seek_http[SEEKS[1]], "ms", baseline=seek_local[SEEKS[1]],
               target="<= 2x in-process seek + canonical JSON", ok=seek_http[SEEKS[1]] <= 2 * seek_local[SEEKS[1]],
               note=f"answer {state_bytes[SEEKS[1]]:,} bytes"),
        Figure("viewer.sse_events_per_s", events / sse_s, "events/s", baseline=events / tail_s,
               target=">= 10,000 events/s", ok=events / sse_s >= 10_000, note="sealed journal through …/stream vs JournalTail"),
        Figure(f"viewer.run_lookup_ms_among_{CROWD_RUNS}_runs", lookup_crowded, "ms", baseline=lookup_alone,
               target="<= 2x the same lookup with the run alone", ok=lookup_crowded <= 2 * lookup_alone,
               note="…/runs + …/state?seq=100: one session's directory is read, not the whole root"),
        Figure(f"viewer.sessions_list_ms_{CROWD_RUNS}_runs", list_crowded, "ms",
               note="GET /api/sessions once every bundle was read (entries kept while files keep their stats)"),
        Figure("viewer.live_lag_p50_ms", p50, "ms", note=f"{LIVE_EVENTS} events appended at ~{LIVE_RATE_PER_S}/s"),
        Figure("viewer.live_lag_p95_ms", p95, "ms", target="< 250 ms", ok=p95 < 250),
    ]
    list_results, list_details = list_figures()
    page_results, page_details = page_figures()
    figures += list_results + page_results
    details = {
        "events": events,
        "read_bundle_s": read_s,
        "snapshot_s": snapshot_s,
        "state_seek_http_ms": seek_http,
        "state_seek_in_process_with_json_ms": seek_local,
        "state_bytes": state_bytes,
        "sse_s": sse_s,
        "tail_s": tail_s,
        "live_lag_ms": {"p50": p50, "p95": p95, "max": lags[-1]},
        **list_details,
        **page_details,
    }
    return write_results("viewer", figures, details)


if __name__ == "__main__":
    only = {"--list-only": list_figures, "--pages-only": page_figures}
    chosen = [only[flag] for flag in sys.argv[1:] if flag in only]
    if chosen:
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        for figure in (figure for part in chosen for figure in part()[0]):
            print(summary_line(figure))
    else:
        main()
