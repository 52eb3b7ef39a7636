"""Text that streams with no spaces (Chinese or Japanese, JSON, code, a long URL) is released while
it streams, not only when its block ends: after ``_MAX_HELD`` characters wait with no cut, the stream
cuts where the held text scans the same whole as in its parts. N deltas still give N records, and
their texts still concatenate to the redaction of the whole."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_session.redact import RedactionPolicy, Redactor

pytestmark = pytest.mark.slow

REDACTOR = Redactor(RedactionPolicy(), key=b"stream-tests")

TEXTS = {
    "chinese": "我想预订明天晚上七点两个人的座位谢谢" * 30,
    "json": '{"a":"b","c":[1,2,3],"mail":"jane@example.com","card":"4111111111111111"}' * 8,
    "url": "https://example.com/" + "/".join(["path", "to", "jane@example.com", "x"] * 40),
}


def _stream(chunks: list[str]) -> tuple[list[tuple[int, str]], int]:
    stream = REDACTOR.delta_stream()
    released: list[tuple[int, str]] = []
    for index, chunk in enumerate(chunks):
        released += stream.feed(chunk, index)
    live = len(released)
    return released + stream.flush(), live


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_a_block_without_spaces_is_released_while_it_streams(name):
    text = TEXTS[name]
    released, live = _stream(list(text))  # one character a delta
    assert live >= len(text) - 2 * 512  # the live view lags by at most twice the bound, not to the end
    assert [index for index, _ in released] == list(range(len(text)))
    assert "".join(part for _, part in released) == REDACTOR.text(text)
    assert "jane@example.com" not in "".join(part for _, part in released)


_PIECE = st.sampled_from(["中文", "x", "{", '"', ":", ",", "1", "415", "555", "0199", "jane@", "example.com",
                          "4111", "1111", "<", ">", "-", "_", "DE89370400440532013000", "é"])


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(_PIECE, min_size=200, max_size=500), cuts=st.lists(st.integers(0, 4000), max_size=60))
def test_any_split_of_a_long_text_without_spaces_redacts_as_the_whole(pieces, cuts):
    text = "".join(pieces)
    points = sorted({0, len(text), *(cut % (len(text) + 1) for cut in cuts)})
    chunks = [text[start:end] for start, end in zip(points, points[1:])]
    released, _ = _stream(chunks)
    assert [index for index, _ in released] == list(range(len(chunks)))
    assert "".join(part for _, part in released) == REDACTOR.text(text)
