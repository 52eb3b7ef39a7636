"""Repeated asks with no code (otel_session.replay.asks): the rule on a labelled set, and in facts."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from otel_session.bundle.read import read_bundle
from otel_session.replay.asks import asked_again, questions_of, same_question
from otel_session.replay.facts import build_session_facts

LABELLED = Path(__file__).resolve().parents[2] / "fixtures" / "repeated_asks" / "labelled.jsonl"


def test_the_rule_is_precise_on_the_labelled_set():
    pairs = [orjson.loads(line) for line in LABELLED.read_text().splitlines() if line.strip()]
    assert len(pairs) >= 40 and sum(pair["same"] for pair in pairs) >= 15
    found = [(same_question(pair["a"], pair["b"]), pair["same"]) for pair in pairs]
    true_positives = sum(got and same for got, same in found)
    flagged = sum(got for got, _ in found)
    precision, recall = true_positives / flagged, true_positives / sum(same for _, same in found)
    print(f"repeated-ask rule on {len(pairs)} labelled pairs: precision {precision:.2f}, recall {recall:.2f}")
    assert precision >= 0.9
    assert recall >= 0.8


@pytest.mark.parametrize(("text", "questions"), [
    ("Great. Which day? And for how many?", ["Which day?", "And for how many?"]),
    ("Booked for Friday.", []),
    (None, []),
])
def test_questions_are_the_sentences_that_end_with_a_question_mark(text, questions):
    assert questions_of(text) == questions


def _turn(index: int, ask: str | None, reply: str) -> dict:
    return {"turn_index": index, "ask": ask, "messages": [{"role": "assistant", "text": reply}]}


def test_a_question_asked_again_after_an_answer_names_the_earlier_turn_and_the_answer():
    turns = [_turn(0, "A table please", "Sure. Which day would you like?"),
             _turn(1, "Is there parking?", "Yes, there is parking. What date works for you?"),
             _turn(2, "Friday", "Booked.")]
    first, second, third = asked_again(turns)
    assert first is None and third is None
    assert second == {"question": "What date works for you?", "earlier_question": "Which day would you like?",
                      "earlier_turn": 0, "earlier_turn_index": 0, "earlier_run_id": None, "answer": "Is there parking?"}


def test_the_same_question_twice_in_one_reply_is_not_an_ask_again():
    assert asked_again([_turn(0, "Hi", "Which day? Sorry, which day?")]) == [None]


def test_facts_of_a_conversation_recorded_with_no_code_flag_the_ask_again(record_run):
    def message(message_id, role, text):
        ids = {"message_id": message_id}
        return [("message_started", {"role": role}, ids),
                ("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": text}]}, ids)]

    script = [*message("u1", "user", "A table for two"), *message("a1", "assistant", "Which day would you like?"),
              *message("u2", "user", "Do you have parking?"), *message("a2", "assistant", "We do. What date works for you?"),
              *message("u3", "user", "Friday"), *message("a3", "assistant", "Booked for Friday.")]
    facts = build_session_facts(read_bundle(record_run("call-asks", script)))
    assert [turn["asked_again"] is not None for turn in facts["turns"]] == [False, True, False]
    again = facts["turns"][1]["asked_again"]
    assert (again["earlier_turn_index"], again["answer"]) == (0, "Do you have parking?")
    assert facts["asked_again"] == [{"turn_index": 1, **again}]


def test_the_cli_says_which_question_was_asked_again_and_what_the_user_answered(record_run, tmp_path):
    from click.testing import CliRunner

    from otel_session.cli import main

    def message(message_id, role, text):
        ids = {"message_id": message_id}
        return [("message_started", {"role": role}, ids),
                ("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": text}]}, ids)]

    record_run("call-cli-asks", [*message("u1", "user", "Hi"), *message("a1", "assistant", "For how many people?"),
                                 *message("u2", "user", "Is it quiet?"), *message("a2", "assistant", "How many guests?")])
    result = CliRunner().invoke(main, ["facts", "call-cli-asks", "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert ("asked again in turn 1: 'How many guests?' (asked in turn 0: 'For how many people?'; "
            "the user answered 'Is it quiet?')") in result.output
