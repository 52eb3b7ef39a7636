"""One delta, one record (issue 14 §3): N ``message.delta()`` calls give exactly N ``assistant_delta``
records and N span events, each with the time of its own call and its own redacted text; the
held-back text is never flushed as an extra record, and the fold of the deltas is the final content."""

from __future__ import annotations

import pytest

import otel_session
from otel_session.instrument import _clock
from otel_session.core.journal import format_timestamp
from otel_session.testing import capture_bundle

BASE_NS = 1_800_000_000 * 10**9
EMAIL = "jane.doe@example.com"
PII_TEXT = f"mail {EMAIL} or call 415 555 0199 today"


class SetClock:
    """The API's clock, set by the test before each call (every delta at a time of its own)."""

    def __init__(self) -> None:
        self.now_ns = BASE_NS

    def __call__(self) -> int:
        return self.now_ns


def stream(chunks: list[str], monkeypatch: pytest.MonkeyPatch):
    """Stream ``chunks`` as one assistant message, each delta at its own microsecond; return the
    delta records, their span events, the final content record, and each delta's call time."""
    clock = SetClock()
    monkeypatch.setattr(_clock, "now_ns", clock)
    times = []
    with capture_bundle() as captured:
        with otel_session.session("s"), otel_session.run(agent="a"):
            with otel_session.message("assistant") as message:
                for number, chunk in enumerate(chunks):
                    clock.now_ns = BASE_NS + (number + 1) * 1_000
                    times.append(clock.now_ns)
                    message.delta(chunk)
                clock.now_ns = BASE_NS + (len(chunks) + 10) * 1_000  # the end of the message is later
    deltas = captured.events("assistant_delta")
    [finished] = captured.events("message_finished")
    span = next(span for span in captured.spans if span.name == "message assistant")
    return deltas, list(span.events), finished, times


def check(chunks: list[str], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    deltas, span_events, finished, times = stream(chunks, monkeypatch)
    texts = [record["payload"]["delta"] for record in deltas]
    assert len(deltas) == len(chunks)
    assert [record["at"] for record in deltas] == [format_timestamp(at) for at in times]
    assert "".join(texts) == finished["payload"]["content"][0]["text"]
    kept = min(len(chunks), 128)  # the SDK's default event limit; the journal stays whole
    assert [event.timestamp for event in span_events[:kept]] == times[:kept]
    assert [event.attributes["otel_session.delta.text"] for event in span_events[:kept]] == texts[:kept]
    return texts


def test_words(monkeypatch):
    words = "Sure, I can book a table for two on Friday evening.".split(" ")
    assert check([word + " " for word in words], monkeypatch) == [word + " " for word in words]


def test_digits_one_by_one(monkeypatch):
    texts = check(list("table 42, call 4155550199"), monkeypatch)
    assert "".join(texts) == "table 42, call [phone]"  # the number masked where it starts, in parts nowhere


def test_ten_thousand_deltas(monkeypatch):
    chunks = [f"w{number % 10} " for number in range(10_000)]
    deltas, _, finished, times = stream(chunks, monkeypatch)
    assert len(deltas) == 10_000  # was 10,001: the held-back rest came out as an extra record
    assert [record["payload"]["delta"] for record in deltas] == chunks
    assert deltas[-1]["at"] == format_timestamp(times[-1])


@pytest.mark.parametrize("position", range(1, len(PII_TEXT)))
def test_pii_split_at_every_position(monkeypatch, position):
    texts = check([PII_TEXT[:position], PII_TEXT[position:]], monkeypatch)
    joined = "".join(texts)
    assert EMAIL not in joined and "0199" not in joined
    assert not any(part in text for text in texts for part in ("jane", "example.com", "555"))


def test_pii_char_by_char(monkeypatch):
    texts = check(list(PII_TEXT), monkeypatch)
    assert EMAIL not in "".join(texts) and "555" not in "".join(texts)


@pytest.mark.parametrize("chunk_size", [100, 10_000])
def test_one_ten_thousand_character_token(monkeypatch, chunk_size):
    token = "x" * 10_000
    chunks = [token[start:start + chunk_size] for start in range(0, len(token), chunk_size)]
    texts = check(chunks, monkeypatch)
    assert "".join(texts) == token
