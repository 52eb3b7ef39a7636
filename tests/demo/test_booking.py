"""The booking dialogue logic: understanding, decisions and the tool, as plain functions."""

from __future__ import annotations

import pytest

from otel_session.demo.booking import (
    AvailabilityError,
    BookingState,
    check_availability,
    decide,
    understand,
)

S = BookingState


@pytest.mark.parametrize(
    ("utterance", "state", "slots"),
    [
        ("Friday please", S.ASK_DATE, {"date": "2026-12-04"}),
        ("tomorrow", S.ASK_DATE, {"date": "2026-12-02"}),
        ("December 24", S.ASK_DATE, {"date": "2026-12-24"}),
        ("2027-01-15 for 3 people", S.ASK_DATE, {"date": "2027-01-15", "party_size": 3}),
        ("sometime when the moon is blue", S.ASK_DATE, {}),
        ("two", S.ASK_PARTY_SIZE, {"party_size": 2}),
        ("two", S.ASK_DATE, {}),  # a bare number is a party size only when asked for one
        ("make it 6 people", S.CONFIRM, {"party_size": 6}),
        ("yes, book it", S.CONFIRM, {"confirmed": True}),
        ("yes", S.ASK_DATE, {}),
        ("mail jane@example.com or +1 415 555 0100", S.GREET, {"contact": "jane@example.com +1 415 555 0100"}),
    ],
)
def test_understand(utterance, state, slots):
    assert understand(utterance, state).slots == slots


@pytest.mark.parametrize(
    ("slots", "next_state"),
    [
        ({}, S.ASK_DATE),
        ({"date": "2026-12-04"}, S.ASK_PARTY_SIZE),
        ({"date": "2026-12-04", "party_size": 40}, S.ASK_PARTY_SIZE),
        ({"date": "2026-12-04", "party_size": 4}, S.CONFIRM),
        ({"date": "2026-12-04", "party_size": 4, "available": True}, S.CONFIRM),
        ({"date": "2026-12-04", "party_size": 4, "available": True, "confirmed": True}, S.DONE),
    ],
)
def test_decide_goes_to_the_first_state_with_missing_slots(slots, next_state):
    decision = decide(S.ASK_DATE, slots)
    assert decision.state is next_state
    assert set(decision.guards) == {"date_present", "party_size_valid", "availability_ok", "user_confirmed"}
    assert next_state.value in decision.candidates


def test_the_tool_fails_for_large_parties_and_answers_otherwise():
    assert check_availability("2026-12-05", 4) == {"available": True, "date": "2026-12-05", "party_size": 4, "time": "20:00"}
    with pytest.raises(AvailabilityError, match="timed out"):
        check_availability("2026-12-05", 10)


def _request(system, user, *extra, tools=None):
    request = {"model": "mock-gpt", "messages": [{"role": "system", "content": system},
                                                  {"role": "user", "content": user}, *extra]}
    if tools:
        request["tools"] = tools
    return request


def test_the_booking_llm_answers_each_instruction_and_repeats_contacts():
    from otel_session.demo.booking import INSTRUCTIONS
    from otel_session.demo.booking_llm import booking_reply

    ask = booking_reply(_request(INSTRUCTIONS[S.ASK_DATE], "hi, mail me at a@example.com"))
    assert ask.content == ("Thanks, I will send the confirmation to a@example.com. "
                           "I can book you a table. Which day would you like to come?")
    assert ask == booking_reply(_request(INSTRUCTIONS[S.ASK_DATE], "hi, mail me at a@example.com"))
    tool = {"type": "function", "function": {"name": "check_availability", "parameters": {}}}
    call = booking_reply(_request(INSTRUCTIONS[S.CONFIRM], "4 people", tools=[tool]))
    assert call.finish_reason == "tool_calls" and call.tool_calls[0].name == "check_availability"
    said = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                                  "function": {"name": "check_availability"}}]}
    result = '{"available": true, "date": "2026-12-04", "party_size": 4, "time": "19:30"}'
    offer = booking_reply(_request(INSTRUCTIONS[S.CONFIRM], "4 people", said,
                                   {"role": "tool", "tool_call_id": "c1", "content": result}, tools=[tool]))
    assert offer.content == "Good news: Friday 04 December at 19:30 is free for 4. Shall I book it?"
    failed = booking_reply(_request(INSTRUCTIONS[S.CONFIRM], "10 people", said,
                                    {"role": "tool", "tool_call_id": "c1", "content": "error: timed out"}))
    assert failed.content.startswith("Sorry, I could not check the reservation book (timed out)")
    assert booking_reply(_request("Say something.", "hello")).content == "You said: hello"  # the mock's default
