"""The DeltaStream's fast path (a delta no detection can be in) releases what the full path does.

A redactor with a user pattern that never matches detects exactly what the default one does but
always takes the full path (user patterns may match any text): both must release the same records,
with the same texts, after the same deltas.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_session.redact import RedactionPolicy, Redactor

KEY = b"test-key"
FAST = Redactor(RedactionPolicy(), key=KEY)
FULL = Redactor(RedactionPolicy(patterns={"never": "(?!)"}), key=KEY)

_PIECES = st.sampled_from([
    *"ab Z9+-.()@<>_x\t\n,é:%", "Sure", ", I can", " book a", " table for", " Friday", " two", "jane",
    "@example.com", " +33 1", " 23 45", "GB82 WEST", " 1234", "%40", "::1", "<redacted str len=5>", "[email]",
    "  ", "\u00a0", "٣", "",
])


def _batches(redactor: Redactor, chunks: list[str]) -> list[list[tuple[int, str]]]:
    """What each ``feed`` released, then what ``flush`` did."""
    stream = redactor.delta_stream()
    return [stream.feed(chunk, position) for position, chunk in enumerate(chunks)] + [stream.flush()]


def test_the_full_path_is_what_the_comparison_takes():
    assert FULL._scanner.triggers is None and FAST._scanner.triggers is not None


@settings(max_examples=600, deadline=None)
@given(chunks=st.lists(_PIECES, max_size=30))
def test_the_fast_path_releases_the_same_records_at_the_same_deltas(chunks):
    assert _batches(FAST, chunks) == _batches(FULL, chunks)


def test_a_plain_sentence_streams_through_the_fast_path_as_through_the_full_one():
    chunks = ["Sure", ", I can", " book a", " table for", " two on", " Friday", " evening", "."] * 3
    fast = _batches(FAST, chunks)
    assert fast == _batches(FULL, chunks)
    assert "".join(text for batch in fast for _, text in batch) == "".join(chunks)
    assert fast[2] == [(1, ", I can")]  # released once " book" shows ", I can" ended
