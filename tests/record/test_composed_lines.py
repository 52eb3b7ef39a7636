"""A record's line from parts (``RunRecorder.append_to``: a head encoded once, the payload now, the
stamp at enqueue; ``HeadEncoder.parts`` and ``stamp_lines`` for a batch) is ``encode_record``'s line byte for byte, and
the bounds count its exact length."""

from __future__ import annotations

import threading
import uuid

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_session.core.journal import (
    COMPOSED_AT_NS,
    DEPTH_MARKER,
    HeadEncoder,
    MAX_DEPTH,
    compose_line,
    composed_payload,
    encode_head,
    encode_record,
    format_timestamp,
    stamp_lines,
)
from otel_session.normalize import JournalEvent
from otel_session.bundle.write import FailureCode

TEXT = st.text(max_size=12) | st.sampled_from(["a\ud800b", 'quo"te\\', "tab\tnew\nline\x00\x7f", "é漢🙂"])
PLAIN = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False) | st.text(max_size=8)
VALUES = st.recursive(
    PLAIN | TEXT | st.sampled_from([{1, 2}, b"\xff", (1, "x"), object()]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT | st.integers(0, 9), inner, max_size=3),
    max_leaves=12,
)
IDS = st.none() | TEXT


def nested(depth: int) -> object:
    value: object = "leaf"
    for level in range(depth):
        value = {"k": value} if level % 2 else [value]
    return value


def whole(seq, at_ns, fields, payload) -> bytes:
    event_type, session_id, run_id, *correlation = fields
    record = {"seq": seq, "at": format_timestamp(at_ns), "type": event_type, "session_id": session_id, "run_id": run_id}
    for key, value in zip(("turn_index", "message_id", "tool_call_id", "trace_id", "span_id"), correlation):
        if value is not None:
            record[key] = value
    if payload is not None:
        record["payload"] = payload
    return encode_record(record)


@settings(max_examples=400, deadline=None)
@given(
    seq=st.integers(1, 10**12),
    at_ns=st.integers(COMPOSED_AT_NS.start, COMPOSED_AT_NS.stop - 1),
    fields=st.tuples(TEXT, TEXT, TEXT, st.none() | st.integers(0, 10**6), IDS, IDS, IDS, IDS),
    payload=st.dictionaries(TEXT, VALUES, max_size=4),
)
def test_a_composed_line_is_the_whole_records_encoding(seq, at_ns, fields, payload):
    body = composed_payload(payload, at_ns)
    if body is None:  # a value only encode_record can tell about: the recorder encodes the whole record
        return
    head = encode_head(*fields)
    line = compose_line(seq, at_ns, head, body)
    assert line == whole(seq, at_ns, fields, payload)


TURNS = st.none() | st.integers(0, 10**6) | st.integers(-(2**70), 2**70) | st.booleans() | st.floats(allow_nan=False) | TEXT


@settings(max_examples=400, deadline=None)
@given(
    run=st.tuples(TEXT, TEXT),
    records=st.lists(st.tuples(st.sampled_from(["message_started", "slot_write"]) | TEXT, TURNS, IDS, IDS,
                               st.sampled_from(["ab" * 16, None]) | TEXT, st.sampled_from(["cd" * 8, None]) | TEXT),
                     min_size=1, max_size=6),
)
def test_a_runs_head_encoder_writes_encode_heads_bytes(run, records):
    """The collector's records take their heads from parts encoded once per run (cached across
    records): the same bytes as ``encode_head`` for any fields, odd ones included."""
    heads = HeadEncoder(*run)
    for event_type, *correlation in records * 2:  # the second time from the parts kept
        assert heads.encode(event_type, *correlation) == encode_head(event_type, *run, *correlation)


class _Record:
    """A record's fields as attributes, as ``HeadEncoder.lines`` reads a normalized span's."""

    def __init__(self, event_type, turn_index, message_id, tool_call_id, trace_id, span_id, at_ns, payload):
        self.type, self.turn_index, self.message_id, self.tool_call_id = event_type, turn_index, message_id, tool_call_id
        self.trace_id, self.span_id, self.at_ns, self.payload = trace_id, span_id, at_ns, payload


@settings(max_examples=300, deadline=None)
@given(
    run=st.tuples(TEXT, TEXT),
    records=st.lists(st.tuples(st.sampled_from(["message_started", "slot_write"]) | TEXT, TURNS,
                               IDS | st.just(["unhashable"]), IDS,
                               st.sampled_from(["ab" * 16, None]) | TEXT, st.sampled_from(["cd" * 8, None]) | TEXT,
                               st.integers(COMPOSED_AT_NS.start, COMPOSED_AT_NS.stop - 1) | st.sampled_from([-1, 10**30]),
                               st.none() | st.dictionaries(TEXT, VALUES, max_size=3)
                               | st.just({"value": nested(MAX_DEPTH - 1)})),
                     min_size=1, max_size=6),
)
def test_a_batch_of_records_is_encoded_as_one_record_at_a_time(run, records):
    """The collector's batches (``append_events``) take ``HeadEncoder.parts`` and ``stamp_lines``: for any
    fields, each record's line is ``encode_record``'s with its ``seq``, and a record only
    ``encode_record`` can tell about (no payload, a value to cut or fall back for, a time without a
    composed ``at``) goes to ``whole`` with its ``seq`` and fields."""
    heads = HeadEncoder(*run)
    fallen: list[tuple] = []

    def fallback(*fields):
        fallen.append(fields)
        return b"whole %d" % len(fallen)

    batch = [_Record(*fields) for fields in records] * 2  # the second time from the parts kept
    first_seq = 7
    expected_fallen = []
    lines = stamp_lines(first_seq, batch, heads.parts(batch), fallback)
    assert len(lines) == len(batch)
    for seq, (line, record) in enumerate(zip(lines, batch), start=first_seq):
        body = composed_payload(record.payload, record.at_ns)
        fields = (seq, record.type, record.at_ns, record.turn_index, record.message_id, record.tool_call_id,
                  record.trace_id, record.span_id, record.payload)
        if body is None:
            expected_fallen.append(fields)
            assert line == b"whole %d" % len(expected_fallen)
            continue
        correlation = (record.turn_index, record.message_id, record.tool_call_id, record.trace_id, record.span_id)
        assert line == whole(seq, record.at_ns, (record.type, *run, *correlation), record.payload)
    assert fallen == expected_fallen


def test_an_integer_past_64_bits_is_written_as_its_digits_anywhere_in_a_record():
    """orjson writes no integer past 64 bits: the record keeps it as its decimal text instead of
    the encoder raising (a turn index or a payload value from a caller's API)."""
    record = orjson.loads(encode_record({"seq": 1, "turn_index": 2**70, "payload": {"n": -(2**63) - 1, "ok": 2**64 - 1}}))
    assert record == {"seq": 1, "turn_index": str(2**70), "payload": {"n": str(-(2**63) - 1), "ok": 2**64 - 1}}
    assert f'"turn_index":"{2**70}"'.encode() in encode_head("slot_write", "s", "r", 2**70)


def test_only_values_that_need_the_whole_record_are_left_to_it():
    assert composed_payload({"index": 0, "kind": "text", "delta": 'a "quoted" é\n'}, 0) is not None
    assert composed_payload({"value": {1, 2}, "previous": object(), 3: b"\xff"}, 0) is not None  # the fallback is the same
    assert composed_payload({"value": nested(MAX_DEPTH - 2)}, 0) is not None  # the record is MAX_DEPTH levels deep
    assert composed_payload({"value": nested(MAX_DEPTH - 1)}, 0) is None  # one more would be cut: encode_record says so
    assert composed_payload({"delta": "a\ud800b"}, 0) is None
    assert DEPTH_MARKER.encode() in whole(1, 0, ("t", "s", "r", None, None, None, None, None),
                                          {"value": nested(MAX_DEPTH - 1)})


RECORDS = [
    ("assistant_delta", {"index": 0, "kind": "text", "delta": "Sure"}, 1_764_600_000_123_456_789),
    ("assistant_delta", {"index": 0, "kind": "text", "delta": "a\ud800b"}, 1_764_600_000_123_456_790),
    ("slot_write", {"slot": "x", "value": {1, 2}, "previous": object(), "source": None}, 1_764_600_000_123_456_791),
    ("tool_execution_started", {"name": "t", "arguments": nested(300)}, 1_764_600_000_123_456_792),
    ("turn_started", None, 0),
    ("turn_started", {"state": "far"}, 300_000_000_000 * 1_000_000_000),  # the year 11476: a longer ``at``
    ("turn_started", {"state": "before"}, -1_000),
]


def test_append_to_writes_what_append_writes(make_writer, run_id):
    writer = make_writer()
    by_parts = writer.open_run(session_id="parts", run_id=run_id)
    by_record = writer.open_run(session_id="parts", run_id=f"run-{uuid.uuid4()}")
    ids = {"turn_index": 3, "message_id": "m\udfff", "trace_id": "ab" * 16, "span_id": "cd" * 8}
    for event_type, payload, at_ns in RECORDS:
        head = by_parts.head(event_type, **ids)
        assert by_parts.append_to(head, payload, at_ns) is True
        by_record.append(event_type, payload, at_ns=at_ns, **ids)
    by_parts.close()
    by_record.close()
    writer.force_flush()
    lines = (by_parts.path / "events.ndjson").read_bytes()
    assert lines == (by_record.path / "events.ndjson").read_bytes().replace(by_record.run_id.encode(), by_parts.run_id.encode())
    assert [orjson.loads(line)["seq"] for line in lines.splitlines()] == list(range(1, len(RECORDS) + 1))


def test_the_bounds_count_a_composed_line_exactly(make_writer, run_id):
    payload = {"index": 0, "kind": "text", "delta": "x" * 100}
    probe = make_writer()
    run = probe.open_run(session_id="sizes-p", run_id=run_id)  # as long as the ids below
    run.append_to(run.head("assistant_delta", message_id="m"), payload, 1_764_600_000_000_000_000)
    run.close()
    probe.force_flush()
    size = len((run.path / "events.ndjson").read_bytes())
    for name, limit, accepted in (("sizes-a", size, True), ("sizes-b", size - 1, False)):
        writer = make_writer(max_event_bytes=limit, flush_interval_s=60.0)
        run = writer.open_run(session_id=name, run_id=run_id)
        head = run.head("assistant_delta", message_id="m")
        assert run.append_to(head, payload, 1_764_600_000_000_000_000) is accepted
        assert run.append_to(head, {**payload, "delta": "y" * 100}, 1_764_600_000_000_000_000) is accepted
        if accepted:
            assert run.peak_queued_bytes == 2 * size  # nothing written yet: the queue holds both lines, counted exactly
        else:
            assert run.failure is not None and run.failure.code is FailureCode.EVENT_TOO_LARGE
            assert f"is {size} bytes" in run.failure.message
        run.close()


def test_a_payload_changed_after_append_to_is_recorded_as_it_was(writer, run_id):
    run = writer.open_run(session_id="snapshot", run_id=run_id)
    value = {"party": ["ann"]}
    run.append_to(run.head("slot_write", turn_index=0), {"slot": "guests", "value": value}, 1_764_600_000_000_000_000)
    value["party"].append("bob")  # the app goes on with its object before the writer thread runs
    run.close()
    writer.force_flush()
    (line,) = (run.path / "events.ndjson").read_bytes().splitlines()
    assert orjson.loads(line)["payload"]["value"] == {"party": ["ann"]}


def _batch(count: int, big_at: int | None = None) -> list[JournalEvent]:
    """``count`` records of one size (seq below 10), but a large ``tool_execution_started`` at ``big_at``."""
    return [
        JournalEvent("tool_execution_started" if index == big_at else "assistant_delta",
                     1_764_600_000_000_000_000 + index * 1000, {"delta": "y" * 5000 if index == big_at else "x" * 10},
                     message_id="m", trace_id="ab" * 16, span_id="cd" * 8)
        for index in range(count)
    ]


@pytest.mark.parametrize("bound,code", [("max_queue_records", FailureCode.QUEUE_RECORDS_EXCEEDED),
                                        ("max_queue_bytes", FailureCode.QUEUE_BYTES_EXCEEDED),
                                        ("max_event_bytes", FailureCode.EVENT_TOO_LARGE)])
def test_a_batch_past_a_bound_queues_the_records_before_it_and_stops_there(make_writer, run_id, bound, code):
    """``append_events`` checks a batch's lines against the bounds at once: past one, the records
    before the first that passes it are queued (and written), the capture fails naming that record."""
    size = len(whole(1, 1_764_600_000_000_000_000, ("assistant_delta", "bounds", run_id, None, "m", None, "ab" * 16,
                                                    "cd" * 8), {"delta": "x" * 10}))
    limit = {"max_queue_records": 4, "max_queue_bytes": 4 * size + size // 2, "max_event_bytes": 2 * size}[bound]
    writer = make_writer(flush_interval_s=3600, batch_records=1 << 30, batch_bytes=1 << 40, **{bound: limit})
    run = writer.open_run(session_id="bounds", run_id=run_id)
    assert run.append_events(_batch(2)) == 2
    assert run.append_events(_batch(6, big_at=2 if bound == "max_event_bytes" else None)) == 2
    assert run.failure is not None and run.failure.code is code
    assert "at seq 5" in run.failure.message or "event seq 5 (tool_execution_started)" in run.failure.message
    assert run.append_events(_batch(1)) == 0
    assert run.peak_queued_records == 4 and run.peak_queued_bytes == 4 * size
    writer.force_flush()
    lines = (run.path / "events.ndjson").read_bytes().splitlines()
    assert [orjson.loads(line)["seq"] for line in lines] == [1, 2, 3, 4]


def test_a_value_whose_repr_appends_to_the_same_run_is_recorded_without_a_deadlock(writer, run_id):
    """A batch's payloads are encoded before the run's lock is taken: an app's object in a tool
    result is written by its ``repr``, and a ``repr`` that records something (to the same run)
    must not wait for the lock its own batch holds."""
    run = writer.open_run(session_id="reentrant", run_id=run_id)

    class Noisy:
        def __repr__(self) -> str:
            run.append("slot_write", {"slot": "seen", "value": 1}, at_ns=2_000)
            return "Noisy()"

    appended: list[int] = []
    batch = [JournalEvent("tool_execution_finished", 1_000, {"result": Noisy()})]
    worker = threading.Thread(target=lambda: appended.append(run.append_events(batch)), daemon=True)
    worker.start()
    worker.join(30)
    assert appended == [1], "append_events did not return: the repr's append waited for the batch's lock"
    run.close(run_status="ok")
    assert writer.force_flush()
    records = [orjson.loads(line) for line in (run.path / "events.ndjson").read_bytes().splitlines()]
    assert [(record["type"], record["seq"]) for record in records[:2]] == [("slot_write", 1), ("tool_execution_finished", 2)]
    assert records[1]["payload"] == {"result": "Noisy()"}
