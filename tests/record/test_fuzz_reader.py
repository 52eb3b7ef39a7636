"""Property-based fuzzing of the journal reader and the tail reader: no crash, only diagnostics.

``make test`` runs a small sample; ``python -m bench.fuzz`` runs the same properties with 10,000+
generated cases each.
"""

from __future__ import annotations

import json
import os

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_session.bundle.read import BundleStatus, JournalTail, Severity, parse_journal, read_bundle

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20))
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)),
    max_leaves=10,
)


def dumps(value) -> bytes:
    """JSON as any producer might write it: big ints, and lone surrogates as invalid UTF-8."""
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


record_like = st.fixed_dictionaries(
    {},
    optional={
        "seq": st.one_of(st.integers(min_value=-2, max_value=40), json_values),
        "at": st.one_of(st.just("2026-11-29T22:52:01.000001Z"), json_values),
        "type": st.one_of(st.sampled_from(["run_started", "assistant_delta", "weird"]), json_values),
        "session_id": st.one_of(st.just("s"), json_values),
        "run_id": st.one_of(st.just("run-5f1c2a7e-0b7d-4c3e-9a51-3d2e8f9b6c10"), json_values),
        "payload": json_values,
    },
)
lines = st.lists(
    st.one_of(
        record_like.map(lambda r: dumps(r) + b"\n"),
        st.binary(max_size=60),
        json_values.map(lambda v: dumps(v) + b"\n"),
    ),
    max_size=25,
)
captures = st.one_of(
    st.binary(max_size=40),
    st.fixed_dictionaries(
        {"schema": st.sampled_from(["otel-session.capture.v1", "x"]),
         "status": st.sampled_from(["recording", "complete", "failed", "bogus"]),
         "event_count": st.one_of(st.integers(0, 30), json_values)}
    ).map(dumps),
)

FUZZ_SETTINGS = settings(
    max_examples=int(os.environ.get("OTEL_SESSION_FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@FUZZ_SETTINGS
@given(journal=lines, capture=captures)
def test_read_bundle_never_raises_and_judges_consistently(tmp_path_factory, journal, capture):
    bundle = tmp_path_factory.mktemp("b")
    (bundle / "run.json").write_bytes(
        orjson.dumps({"schema": "otel-session.run.v1", "session_id": "s", "run_id": "run-5f1c2a7e-0b7d-4c3e-9a51-3d2e8f9b6c10"})
    )
    (bundle / "events.ndjson").write_bytes(b"".join(journal))
    (bundle / "capture.json").write_bytes(capture)
    result = read_bundle(bundle)
    has_error = any(d.severity is Severity.ERROR for d in result.diagnostics)
    assert (result.status is BundleStatus.INVALID) == has_error
    for event in result.events:
        assert type(event["seq"]) is int and isinstance(event["type"], str)
    assert orjson.loads(orjson.dumps(result.as_json()))["status"] == result.status.value


@FUZZ_SETTINGS
@given(journal=lines, cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=8))
def test_tail_over_any_growth_yields_exactly_the_complete_records(tmp_path_factory, journal, cuts):
    data = b"".join(journal)
    path = tmp_path_factory.mktemp("t") / "events.ndjson"
    path.write_bytes(b"")
    tail = JournalTail(path)
    seen = []
    for cut in sorted(min(c, len(data)) for c in cuts) + [len(data)]:
        path.write_bytes(data[:cut])
        seen += tail.poll()
    expected, garbage, _torn = parse_journal(data)
    assert seen == expected
    assert len(tail.diagnostics) == len(garbage)
