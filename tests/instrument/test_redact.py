"""The redactor: detectors, field modes, idempotence, errors, key handling, environment."""

from __future__ import annotations

import os
import stat

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_session.journal import EventType
from otel_session.normalize import JournalEvent
from otel_session.redact import (
    DEFAULT_DETECTORS,
    KEY_FILE,
    REDACTED_ERROR,
    FieldMode,
    RedactionPolicy,
    Redactor,
    _Scanner,
    load_or_create_key,
)

KEY = b"test-key"


@pytest.fixture
def redactor():
    return Redactor(RedactionPolicy(keep_slots={"party_size"}), key=KEY)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mail jane.doe+x@example.co.uk now", "mail [email] now"),
        ("call +1 (555) 123-4567", "call [phone]"),
        ("call 555-123-4567 or 030 1234567", "call [phone] or [phone]"),
        ("card 4111 1111 1111 1111 ok", "card [card] ok"),
        ("card 4111-1111-1111-1111", "card [card]"),
        ("ssn 123-45-6789", "ssn [national_id]"),
        ("NI AB123456C", "NI [national_id]"),
        ("id 987654321", "id [phone]"),
        ("on 2026-12-04 at 19:30 for 2", "on 2026-12-04 at 19:30 for 2"),
        ("party of 12, room 101", "party of 12, room 101"),
        ("no digits here", "no digits here"),
    ],
)
def test_text_detectors(redactor, text, expected):
    assert redactor.text(text) == expected


@pytest.mark.parametrize(
    ("mode", "value", "check"),
    [
        (FieldMode.HASH, "2026-12-04", lambda out: out.startswith("hmac-sha256:") and len(out) == 28),
        (FieldMode.HASH, {"a": [1, 2]}, lambda out: out.startswith("hmac-sha256:")),
        (FieldMode.MASK, "2026-12-04", lambda out: out == "<redacted str len=10>"),
        (FieldMode.MASK, {"a": 1}, lambda out: out == "<redacted object len=1>"),
        (FieldMode.KEEP, "2026-12-04", lambda out: out == "2026-12-04"),
        (FieldMode.SCAN, {"mail": "a@b.io", "n": 3}, lambda out: out == {"mail": "[email]", "n": 3}),
        (FieldMode.HASH, None, lambda out: out is None),
    ],
)
def test_slot_value_modes(mode, value, check):
    out = Redactor(RedactionPolicy(slot_values=mode), key=KEY).slot_value("date", value)
    assert check(out), out


def test_hash_is_keyed_and_deterministic():
    one, other = Redactor(key=b"one"), Redactor(key=b"two")
    assert one.slot_value("s", "x") == one.slot_value("s", "x")
    assert one.slot_value("s", "x") != other.slot_value("s", "x")
    assert one.slot_value("s", {"b": 1, "a": 2}) == one.slot_value("s", {"a": 2, "b": 1})


def test_keep_slots_allow_list(redactor):
    assert redactor.slot_value("party_size", 2) == 2
    assert redactor.slot_value("date", 2) != 2


@pytest.mark.parametrize("mode", list(FieldMode))
@pytest.mark.parametrize(
    "value",
    ["jane@example.com", "call 555-123-4567", "2026-12-04", {"card": "4111111111111111", "n": [5551234567]}, 42],
)
def test_redaction_is_idempotent(mode, value):
    redactor = Redactor(
        RedactionPolicy(slot_values=mode, text=mode, tool_arguments=mode, tool_results=mode), key=KEY
    )
    collector = Redactor(RedactionPolicy(), key=b"another key")  # a collector re-redacting with its own key
    pairs = [
        (redactor.tool_arguments, collector.tool_arguments),
        (redactor.tool_result, collector.tool_result),
        (lambda v: redactor.slot_value("s", v), lambda v: collector.slot_value("s", v)),
    ]
    for redact, redact_again in pairs:
        once = redact(value)
        assert redact(once) == once
        if mode in (FieldMode.MASK, FieldMode.HASH):
            assert redact_again(once) == once


def test_tool_arguments_keep_structure(redactor):
    args = {"who": {"email": "a@b.co", "tags": ["vip", "call 555-123-4567"]}, "size": 2, "ok": True}
    assert redactor.tool_arguments(args) == {
        "who": {"email": "[email]", "tags": ["vip", "call [phone]"]},
        "size": 2,
        "ok": True,
    }
    hashed = Redactor(RedactionPolicy(tool_arguments=FieldMode.HASH), key=KEY).tool_arguments(args)
    assert set(hashed) == {"who", "size", "ok"} and hashed["who"]["email"].startswith("hmac-sha256:")


class Exploding:
    def __eq__(self, other):
        raise RuntimeError("boom")

    def __str__(self):
        raise RuntimeError("boom")

    def __len__(self):
        raise RuntimeError("boom")


@pytest.mark.parametrize("mode", [FieldMode.SCAN, FieldMode.MASK, FieldMode.HASH])
def test_redactor_error_redacts_whole_value(mode):
    redactor = Redactor(RedactionPolicy(slot_values=mode, text=mode, tool_arguments=mode), key=KEY)
    hostile = {"a": Exploding()} if mode is not FieldMode.HASH else Exploding()
    results = [redactor.slot_value("s", hostile), redactor.text(Exploding())]
    if mode is FieldMode.SCAN:
        results = [redactor.text(Exploding())]
    for result in results:
        assert result == REDACTED_ERROR or "boom" not in str(result)
    assert redactor.text(Exploding()) == REDACTED_ERROR


_STREAM_TOKENS = st.sampled_from([
    "hello", "table", "for", "2", "on", "friday", "19:00", "ref", "B12T3", "jane.doe@example.com", "x@y.co",
    "+33 1 23 45 67 89", "(555) 123-4567", "4111 1111 1111 1111", "AB123456C", "123-45-6789", "2026-12-04", "café",
])
_STREAM_SEPARATORS = st.sampled_from([" ", ", ", ". ", "\n", "! ", " (", ") "])


def _split(text: str, cuts: list[int]) -> list[str]:
    points = sorted(cut % (len(text) + 1) for cut in cuts)  # repeated points: empty deltas
    return [text[start:end] for start, end in zip([0, *points], [*points, len(text)], strict=True)]


def _stream(redactor: Redactor, chunks: list[str]) -> list[tuple[int, str]]:
    stream = redactor.delta_stream()
    released = []
    for position, chunk in enumerate(chunks):
        released += stream.feed(chunk, position)
    return released + stream.flush()


def _records_of_the_whole(redactor: Redactor, chunks: list[str]) -> list[str]:
    """Each delta's expected text, from the whole text's detections: a character outside them
    stays with its delta, a detection's token goes to the delta holding its first character."""
    whole = "".join(chunks)
    owner = [position for position, chunk in enumerate(chunks) for _ in chunk]
    records = [""] * len(chunks)
    cursor = 0
    for start, end, replacement in [*redactor._scanner.edits(whole), (len(whole), len(whole), "")]:
        for offset in range(cursor, start):
            records[owner[offset]] += whole[offset]
        if start < len(whole):
            records[owner[start]] += replacement
        cursor = end
    return records


def _assert_record_level(redactor: Redactor, chunks: list[str]) -> None:
    released = _stream(redactor, chunks)
    assert [item for item, _ in released] == list(range(len(chunks)))  # N in, N out, in order
    assert "".join(text for _, text in released) == redactor.text("".join(chunks))
    assert [text for _, text in released] == _records_of_the_whole(redactor, chunks)


@settings(max_examples=400, deadline=None)
@given(
    words=st.lists(st.tuples(_STREAM_TOKENS, _STREAM_SEPARATORS), min_size=1, max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=24),
)
def test_a_delta_stream_gives_each_delta_its_own_redacted_text(words, cuts):
    """However a text is cut into deltas: one record per delta, in order, each with its share of
    the whole text's redaction (no part of a detection released before the delta completing it)."""
    text = "".join(word + separator for word, separator in words)
    _assert_record_level(Redactor(RedactionPolicy(), key=KEY), _split(text, cuts))


_ANY_TEXT = st.text(alphabet=st.sampled_from(list("ab Z9017+-.()@<>_=x\t\n\u00a0\u202f,é[]")), max_size=80)


@settings(max_examples=400, deadline=None)
@given(text=_ANY_TEXT, cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=24))
def test_a_delta_stream_of_any_text_matches_the_whole(text, cuts):
    _assert_record_level(Redactor(RedactionPolicy(), key=KEY), _split(text, cuts))


@pytest.mark.parametrize(
    "chunks",
    [
        ["a.", "b+", "1", " 415 555 0199-word+"],  # issue 15: released raw, the whole text masked
        ["x" * 10_000],
        list("x" * 10_000),  # one 10,000-character token, a character a delta
        ["call +33 1", " 23 45 67 89", " now"],
        ["<redacted str ", "len=5> ", "and 4111 1111 1111 111", "1 end"],
    ],
)
def test_a_delta_stream_examples(redactor, chunks):
    _assert_record_level(redactor, chunks)


def test_a_delta_stream_holds_a_record_until_a_later_delta_shows_its_token_ended(redactor):
    stream = redactor.delta_stream()
    assert stream.feed("Hi, call +33 1", "a") == []  # the number and the word may go on
    assert stream.feed(" 23 45 67 89 now", "b") == [("a", "Hi, call [phone]")]
    assert stream.feed(", thanks!", "c") == [("b", " now")]
    assert stream.feed(" Bye", "d") == [("c", ", thanks!")]
    assert stream.flush() == [("d", " Bye")]


@pytest.mark.parametrize("mode", [FieldMode.KEEP, FieldMode.MASK, FieldMode.HASH])
def test_a_delta_stream_in_a_whole_value_mode(mode):
    redactor = Redactor(RedactionPolicy(text=mode), key=KEY)
    chunks = ["mail jane@exa", "mple.com", " now"]
    released = _stream(redactor, chunks)
    assert [item for item, _ in released] == [0, 1, 2]
    assert "".join(text for _, text in released) == redactor.text("".join(chunks))


def _delta(message_id, index, text) -> JournalEvent:
    return JournalEvent(EventType.ASSISTANT_DELTA.value, 1, {"index": index, "kind": "text", "delta": text},
                        message_id=message_id)


def test_redact_events_streams_each_block_and_keeps_one_record_a_delta(redactor):
    events = [
        _delta("m1", 0, "mail jane@exa"),
        _delta("m1", 1, "call +33 1"),
        JournalEvent(EventType.SLOT_WRITE.value, 1, {"slot": "s", "value": "jane@example.com", "previous": None}),
        _delta("m1", 0, "mple.com now"),
        _delta("m1", 1, " 23 45 67 89"),
        _delta("m2", 0, "jane@exa"),  # another message: its own stream
        _delta("m1", [0], "jane@example.com"),  # a malformed index: redacted on its own
    ]
    redacted = redactor.redact_events(events)
    assert [event.payload.get("delta") for event in redacted] == [
        "mail [email]", "call [phone]", None, " now", "", "jane@exa", "[email]",
    ]
    assert redacted[2].payload["value"].startswith("hmac-sha256:")
    assert redacted is events  # redacted in place


@pytest.mark.parametrize(
    ("event_type", "payload", "expected"),
    [
        (EventType.SLOT_WRITE, {"slot": "party_size", "value": 2, "previous": None, "source": "nlu"},
         {"slot": "party_size", "value": 2, "previous": None, "source": "nlu"}),
        (EventType.ASSISTANT_DELTA, {"index": 0, "kind": "text", "delta": "a@b.co"},
         {"index": 0, "kind": "text", "delta": "[email]"}),
        (EventType.MESSAGE_FINISHED, {"settled": True, "content": [{"index": 0, "kind": "text", "text": "a@b.co"}]},
         {"settled": True, "content": [{"index": 0, "kind": "text", "text": "[email]"}]}),
        (EventType.TOOL_EXECUTION_FINISHED, {"status": "error", "error": "no card 4111111111111111"},
         {"status": "error", "error": "no card [card]"}),
        (EventType.TRANSITION_VERDICT, {"from": "a", "to": "b", "reason": "x@y.io", "candidates": ["b", "call 5551234567"]},
         {"from": "a", "to": "b", "reason": "[email]", "candidates": ["b", "call [phone]"]}),
        ("some_future_type", {"kind": "x", "note": "a@b.co"}, {"kind": "x", "note": "[email]"}),
    ],
)
def test_redact_event_by_type(redactor, event_type, payload, expected):
    event_type = getattr(event_type, "value", event_type)
    event = JournalEvent(event_type, 1, payload, turn_index=3)
    redacted = redactor.redact_event(event)
    assert redacted.payload == expected
    assert redacted.turn_index == 3
    assert event.payload == payload  # the input is not changed


def test_slot_diff_value_hashed(redactor):
    out = redactor.redact_event(JournalEvent("slot_diff", 1, {"slot": "date", "value": "x", "previous": None}))
    assert out.payload["value"].startswith("hmac-sha256:") and out.payload["previous"] is None


def test_key_file_is_made_once_with_0600(tmp_path, monkeypatch):
    monkeypatch.delenv("OTEL_SESSION_REDACTION_KEY", raising=False)
    key = load_or_create_key(tmp_path / "root")
    assert load_or_create_key(tmp_path / "root") == key
    mode = stat.S_IMODE(os.stat(tmp_path / "root" / KEY_FILE).st_mode)
    assert mode == 0o600


def test_key_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("OTEL_SESSION_REDACTION_KEY", "secret")
    assert load_or_create_key(tmp_path) == b"secret"
    assert not (tmp_path / KEY_FILE).exists()


def test_policy_from_environment(monkeypatch):
    monkeypatch.setenv("OTEL_SESSION_REDACT_KEEP_SLOTS", "party_size, date")
    monkeypatch.setenv("OTEL_SESSION_REDACT_SLOT_VALUES", "mask")
    monkeypatch.setenv("OTEL_SESSION_REDACT_TEXT", "hash")
    monkeypatch.setenv("OTEL_SESSION_REDACT_TOOL_RESULTS", "bogus")
    monkeypatch.setenv("OTEL_SESSION_REDACT_DETECTORS", "email")
    policy = RedactionPolicy.from_env()
    assert policy.keep_slots == {"party_size", "date"}
    assert policy.slot_values is FieldMode.MASK and policy.text is FieldMode.HASH
    assert policy.tool_results is FieldMode.SCAN  # an unknown mode keeps the default, with a warning
    assert Redactor(RedactionPolicy.from_env(RedactionPolicy(text=FieldMode.SCAN)), key=KEY).text(
        "a@b.co 555-123-4567"
    ).startswith("hmac")


def test_unknown_detector_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown detectors"):
        RedactionPolicy(detectors=("email", "dna"))


def test_scan_cache_gives_the_same_answer_and_stays_bounded(monkeypatch):
    """Scanned texts are cached; a hit, a text after the cache starts over, and a str subclass
    (never cached) all redact exactly as a fresh scan does."""
    import otel_session.redact as redact

    monkeypatch.setattr(redact, "_SCAN_CACHE_SIZE", 3)
    redactor = Redactor(key=KEY)
    texts = [f"guest {n} mail g{n}@example.com card 4111 1111 1111 1111" for n in range(10)]
    expected = [f"guest {n} mail [email] card [card]" for n in range(10)]
    assert [redactor.text(text) for text in texts] == expected
    assert [redactor.text(text) for text in reversed(texts)] == expected[::-1]
    assert len(redactor._scanner._cache) <= 3

    class Text(str):
        def __hash__(self) -> int:
            raise AssertionError("a str subclass must not be looked up in the cache")

    assert redactor.text(Text(texts[0])) == expected[0]
    assert redactor.text("call 555-123-4567") == "call [phone]"  # texts without a cached twin still scan


_SCAN_ALPHABET = st.sampled_from(
    list("0123456789 ().-+@_%:/abzABCEZ٣") + ["jane@example.com", "4111 1111 1111 1111", "AB123456C", "[email]"]
)


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(_SCAN_ALPHABET, max_size=30).map("".join),
    detectors=st.sets(st.sampled_from(DEFAULT_DETECTORS)),
)
def test_scan_shortcuts_change_no_result(text, detectors):
    """The scanner's shortcuts (texts that cannot hold a detection, the pattern without its e-mail
    branch, the cache) give exactly what the whole pattern gives."""
    scanner = _Scanner(detectors)
    whole = scanner._pattern.sub(scanner._replacement, text)
    assert scanner.scan(text) == whole
    assert scanner.scan(text) == whole  # from the cache when it needed the pattern


@pytest.mark.parametrize(
    ("event_type", "clean", "dirty", "expected"),
    [
        (EventType.MESSAGE_FINISHED, {"settled": True, "content": [{"index": 0, "kind": "text", "text": "table for 2"}]},
         {"settled": True, "content": [{"index": 0, "kind": "text", "text": "ok"}, {"index": 1, "text": "a@b.co"}]},
         {"settled": True, "content": [{"index": 0, "kind": "text", "text": "ok"}, {"index": 1, "text": "[email]"}]}),
        (EventType.MESSAGE_STARTED, {"role": "user"}, {"role": "user", "via": "call 555-123-4567"},
         {"role": "user", "via": "call [phone]"}),
        (EventType.TURN_STARTED, {"state": "start"}, {"state": "start", "required_slots": ["a@b.co"]},
         {"state": "start", "required_slots": ["[email]"]}),
    ],
)
def test_redact_event_copies_only_what_it_redacts(redactor, event_type, clean, dirty, expected):
    """An event whose payload redacts to itself comes back as is; any other is a new event with a
    redacted copy, the input left as it was."""
    event = JournalEvent(event_type, 1, clean, turn_index=3)
    assert redactor.redact_event(event) is event and event.payload == clean
    dirty_copy = orjson.loads(orjson.dumps(dirty))
    event = JournalEvent(event_type, 1, dirty, turn_index=3)
    out = redactor.redact_event(event)
    assert out is not event and out.payload == expected and out.turn_index == 3
    assert event.payload == dirty_copy
