"""Bundle writer throughput against its floor (issue 2).

(a) floor: orjson-encode + batched append of 100,000 records, nothing else;
(b) the BundleWriter over the same records (producer enqueue → writer thread → disk);
(c) one run with a 100,000-delta message: bytes per event at 10k vs 100k deltas.

Run: ``python -m bench.writer`` → ``bench/results-writer.json`` and a short summary.
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from pathlib import Path


from bench import Figure, write_results
from otel_session.core import layout
from otel_session.core.journal import encode_record, format_timestamp
from otel_session.bundle.read import read_bundle
from otel_session.bundle.write import BundleWriter

RECORDS = 100_000
BATCH = 256
START_NS = 1_796_000_000_000_000_000


def _record(seq: int, run_id: str) -> dict:
    return {
        "seq": seq,
        "at": format_timestamp(START_NS + seq * 1000),
        "type": "assistant_delta",
        "session_id": "bench",
        "run_id": run_id,
        "message_id": "m1",
        "payload": {"index": 0, "kind": "text", "delta": f"tok{seq % 997} "},
    }


def floor(directory: Path, run_id: str) -> float:
    """Encode every record and append in batches of 256 with one write each; return seconds."""
    fd = os.open(directory / "floor.ndjson", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    started = time.perf_counter()
    batch: list[bytes] = []
    for seq in range(1, RECORDS + 1):
        batch.append(encode_record(_record(seq, run_id)))
        if len(batch) == BATCH:
            os.write(fd, b"".join(batch))
            batch.clear()
    if batch:
        os.write(fd, b"".join(batch))
    os.fsync(fd)
    elapsed = time.perf_counter() - started
    os.close(fd)
    return elapsed


def through_writer(directory: Path, records: int) -> dict:
    """Push ``records`` deltas of one message through the writer; return timings and counters."""
    writer = BundleWriter(directory)
    run = writer.open_run(session_id="bench", run_id=f"run-{uuid.uuid4()}")
    started = time.perf_counter()
    for seq in range(1, records + 1):
        run.append(
            "assistant_delta",
            {"index": 0, "kind": "text", "delta": f"tok{seq % 997} "},
            at_ns=START_NS + seq * 1000,
            message_id="m1",
        )
    produced = time.perf_counter() - started
    run.close()
    run.wait_sealed(60)
    elapsed = time.perf_counter() - started
    writer.shutdown()
    result = read_bundle(run.path)
    size = (run.path / layout.EVENTS_FILE).stat().st_size
    return {
        "elapsed_s": elapsed,
        "producer_s": produced,
        "status": result.status.value,
        "events_on_disk": len(result.events),
        "lost": records - len(result.events),
        "failure": run.failure.as_json() if run.failure else None,
        "peak_queued_records": run.peak_queued_records,
        "peak_queued_bytes": run.peak_queued_bytes,
        "batches": run.batches_written,
        "bytes_per_event": size / max(len(result.events), 1),
    }


def main() -> dict:
    with tempfile.TemporaryDirectory(prefix="otel-session-bench-") as tmp:
        directory = Path(tmp)
        floor_s = floor(directory, f"run-{uuid.uuid4()}")
        full = through_writer(directory / "a", RECORDS)
        small = through_writer(directory / "b", RECORDS // 10)
    floor_rate = RECORDS / floor_s
    writer_rate = RECORDS / full["elapsed_s"]
    growth = full["bytes_per_event"] / small["bytes_per_event"] - 1
    figures = [
        Figure("writer.floor_events_per_s", floor_rate, "events/s", note="orjson encode + batched append"),
        Figure("writer.events_per_s", writer_rate, "events/s", baseline=floor_rate, target=">= 0.30 of floor",
               ok=writer_rate >= 0.30 * floor_rate),
        Figure("writer.producer_us_per_event", full["producer_s"] / RECORDS * 1e6, "µs"),
        Figure("writer.events_lost_below_bounds", full["lost"] + small["lost"], "events", target="0",
               ok=full["lost"] + small["lost"] == 0),
        Figure("writer.peak_queued_records", full["peak_queued_records"], "records", target="<= 8192",
               ok=full["peak_queued_records"] <= 8192),
        Figure("writer.peak_queued_bytes", full["peak_queued_bytes"], "bytes", target="<= 16 MiB",
               ok=full["peak_queued_bytes"] <= 16 << 20),
        Figure("writer.append_batches", full["batches"], "writes"),
        Figure("writer.bytes_per_event_10k", small["bytes_per_event"], "bytes"),
        Figure("writer.bytes_per_event_100k", full["bytes_per_event"], "bytes",
               baseline=small["bytes_per_event"], target="within ±10% of 10k", ok=abs(growth) <= 0.10),
    ]
    details = {"records": RECORDS, "floor_s": floor_s, "run_100k": full, "run_10k": small}
    return write_results("writer", figures, details)


if __name__ == "__main__":
    main()
