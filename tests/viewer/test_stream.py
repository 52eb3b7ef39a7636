"""The SSE live tail against a real threaded server on 127.0.0.1 while a real writer appends."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from otel_session.bundle.write import BundleWriter


def sse_messages(url: str, *, headers: dict[str, str] | None = None, timeout: float = 10.0) -> Iterator[dict]:
    """Yield parsed SSE messages ({"event", "id", "data"}) until the server ends the response."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    connection.request("GET", f"{parts.path}?{parts.query}", headers=headers or {})
    response = connection.getresponse()
    assert response.status == 200, response.read()
    assert response.getheader("Content-Type").startswith("text/event-stream")
    message: dict = {}
    try:
        while True:
            line = response.readline()
            if not line:
                return
            line = line.decode().rstrip("\n")
            if not line:
                if "data" in message:
                    yield {"event": message.get("event", "message"), "id": message.get("id"), "data": json.loads(message["data"])}
                message = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(": ")
                message[name] = value
    finally:
        connection.close()


def test_stream_follows_a_recording_run_in_order_until_terminal(serve, live_writer: BundleWriter, tmp_path):
    run = live_writer.open_run(session_id="live-1", run_id="run-00000000-0000-4000-8000-000000000001")
    run.append("run_started", {"kind": "live", "agent": "booking"})
    run.append("message_started", {"role": "assistant"}, message_id="m1")
    assert live_writer.force_flush()
    server = serve(live_writer.root)
    url = f"{server.url}/api/sessions/live-1/runs/{run.run_id}/stream"
    total = 300
    started = threading.Event()

    def produce() -> None:
        started.wait(5)
        for index in range(total):
            run.append("assistant_delta", {"index": 0, "kind": "text", "delta": f"t{index} "}, message_id="m1")
            if index % 50 == 0:
                live_writer.force_flush()
        run.close(run_status="ok")

    producer = threading.Thread(target=produce)
    producer.start()
    seqs, statuses, ended = [], [], False
    for message in sse_messages(url):
        if message["event"] == "message":
            assert int(message["id"]) == message["data"]["seq"]
            seqs.append(message["data"]["seq"])
            started.set()
        elif message["event"] == "capture":
            statuses.append(message["data"]["status"])
        elif message["event"] == "end":
            ended = True
    producer.join(10)
    assert ended
    assert seqs == list(range(1, total + 4))  # 2 before, 300 deltas, run_finished
    assert statuses[0] == "recording" and statuses[-1] == "complete"


def test_stream_resumes_after_last_event_id(serve, sample):
    server = serve(sample.root)
    url = f"{server.url}/api/sessions/call-42/runs/{sample.latest_run}/stream"
    seqs = [m["data"]["seq"] for m in sse_messages(url, headers={"Last-Event-ID": "40"}) if m["event"] == "message"]
    assert seqs[0] == 41 and seqs == list(range(41, 41 + len(seqs)))
    by_query = [m["data"]["seq"] for m in sse_messages(f"{url}?after_seq=45") if m["event"] == "message"]
    assert by_query[0] == 46


@pytest.mark.parametrize("header", ["abc", "-1", "9" * 20])
def test_stream_rejects_a_bad_last_event_id(client, sample, header):
    response = client.get(f"/api/sessions/call-42/runs/{sample.latest_run}/stream", headers={"Last-Event-ID": header})
    assert response.status_code == 400
    assert response.get_json()["error"] == "bad_parameter"


def test_stream_of_a_complete_run_ends_after_its_records(client, sample):
    response = client.get(f"/api/sessions/call-42/runs/{sample.latest_run}/stream")
    body = response.get_data(as_text=True)
    assert body.startswith("retry: 1000")
    assert body.rstrip().endswith('event: end\ndata: {"status":"complete"}')
    assert "event: capture" in body


def test_stream_sends_a_large_sealed_journal_whole_before_it_ends(serve, live_writer):
    """More than one tail read (4 MiB) of records: `end` comes only after the last of them."""
    run = live_writer.open_run(session_id="big", run_id="run-00000000-0000-4000-8000-000000000009")
    total = 1500
    for _ in range(total):
        run.append("assistant_delta", {"index": 0, "kind": "text", "delta": "y" * 4000}, message_id="m1")
    run.close()
    assert run.wait_sealed(10)
    server = serve(live_writer.root)
    messages = list(sse_messages(f"{server.url}/api/sessions/big/runs/{run.run_id}/stream", timeout=30))
    seqs = [m["data"]["seq"] for m in messages if m["event"] == "message"]
    assert seqs == list(range(1, total + 1))
    assert messages[-1]["event"] == "end"
