"""Repeated asks with no code: the assistant asking the same question again (SPEC §7.2).

Contract::

    questions_of("Great. Which day? And for how many?")  # -> ["Which day?", "And for how many?"]
    same_question("Which day would you like?", "What date works for you?")  # -> True
    asked_again(turns)   # -> for each turn, the earlier question it repeats, or None

Recorded turns with required slots answer "why did it ask twice?" from the slots still missing
(``repeated_asks``). A conversation recorded with no code has no slots, so this module answers it
from the words: a turn *asks again* when one of its assistant questions asks for the same thing as
a question of an earlier turn, with a user message in between that did not settle it.

The rule (measured on ``fixtures/repeated_asks/labelled.jsonl``; ``tests/replay/test_asks.py``
prints its precision and recall and holds precision at ≥ 0.9):

1. A question is a sentence of an assistant reply that ends with ``?``.
2. Its *intent* is the set of its content words: lower-cased, stop words and politeness dropped,
   a light stemmer (``days`` → ``day``, ``booking`` → ``book``), and each word mapped to its
   concept when it has one (``day``, ``date``, ``when`` → ``date``; ``people``, ``guests``,
   ``party``, ``many`` → ``party_size``), so different words for one slot compare equal.
3. Two questions ask the same thing when their intents share a concept, or when their content
   words overlap by a Jaccard index of at least 0.5.

Matching on concepts errs towards "the same" for two questions about one slot ("Which day?" and
"Is Friday the right day?"), which is what a user reading facts wants flagged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["JACCARD_THRESHOLD", "asked_again", "intent", "questions_of", "same_question"]

JACCARD_THRESHOLD = 0.5

_SENTENCE = re.compile(r"[^.!?\n]+[?]+")
_WORD = re.compile(r"[a-z0-9']+")

_STOP_WORDS = frozenset("""
a about again also am an and any are as at be been being but by can could did do does for from
had has have here how i if in is it its just kindly let like me my need of on or our please shall
should so that the their them then there these they this to too up us want was we were what when
where which who whom whose why will with would you your yours okay ok great thanks thank sure right
now may might one just still tell give let's i'd you'd we'd
""".split())

# Words that name one slot, mapped to it: different words for one thing are one intent.
_CONCEPTS = {
    "date": ("day", "date", "when", "weekday", "monday", "tuesday", "wednesday", "thursday", "friday",
             "saturday", "sunday", "today", "tomorrow", "tonight"),
    "time": ("time", "hour", "clock", "o'clock", "pm", "evening", "morning", "afternoon"),
    "party_size": ("people", "person", "guest", "party", "many", "size", "adult", "seat"),
    "name": ("name", "called", "surname"),
    "phone": ("phone", "number", "mobile", "cell", "call"),
    "email": ("email", "mail", "e-mail", "address"),
    "location": ("where", "location", "city", "place", "branch"),
    "confirm": ("confirm", "correct", "right", "ok", "proceed"),
}
_CONCEPT_OF = {word: concept for concept, words in _CONCEPTS.items() for word in words}
# Concepts too generic to mark two questions as one intent on their own.
_WEAK_CONCEPTS = frozenset({"confirm"})


def questions_of(text: str | None) -> list[str]:
    """The sentences of ``text`` that are questions (end with ``?``), stripped."""
    return [match.group(0).strip() for match in _SENTENCE.finditer(text or "")]


def _stem(word: str) -> str:
    for suffix, keep in (("ing", 4), ("ies", 3), ("es", 4), ("ed", 4), ("s", 3)):
        if word.endswith(suffix) and len(word) - len(suffix) >= keep - 1:
            stem = word[: -len(suffix)]
            return stem + "y" if suffix == "ies" else stem
    return word


def intent(question: str) -> tuple[frozenset[str], frozenset[str]]:
    """(content words, concepts) of ``question`` (rule 2 of the module docstring)."""
    raw = _WORD.findall(question.lower())
    concepts = {_CONCEPT_OF[word] for word in raw if word in _CONCEPT_OF}
    words = {_stem(word) for word in raw if word not in _STOP_WORDS}
    concepts |= {_CONCEPT_OF[word] for word in words if word in _CONCEPT_OF}
    return frozenset(words), frozenset(concepts)


def same_question(first: str, second: str) -> bool:
    """Whether two questions ask for the same thing (rule 3 of the module docstring)."""
    words_a, concepts_a = intent(first)
    words_b, concepts_b = intent(second)
    if (concepts_a & concepts_b) - _WEAK_CONCEPTS:
        return True
    union = words_a | words_b
    return bool(union) and len(words_a & words_b) / len(union) >= JACCARD_THRESHOLD


def _assistant_texts(turn: dict[str, Any]) -> Iterable[str]:
    return (message["text"] for message in turn["messages"] if message["role"] == "assistant" and message["text"])


def asked_again(turns: Sequence[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """For each turn (facts turns, in order), the earlier question it asks again, or None.

    An entry names the question, the earlier turn (its position in ``turns``, its ``turn_index``
    and, for session-wide facts, its ``run_id``), the earlier question, and ``answer``: the user's
    first message after it, which did not settle it."""
    asked: list[tuple[int, str]] = []  # (position, question), oldest first
    found: list[dict[str, Any] | None] = []
    for position, turn in enumerate(turns):
        questions = [question for text in _assistant_texts(turn) for question in questions_of(text)]
        match = None
        for question in questions:
            earlier = next(((where, before) for where, before in reversed(asked)
                            if where < position and same_question(before, question)), None)
            if earlier is not None:
                where, before = earlier
                answer = next((later["ask"] for later in turns[where + 1 : position + 1] if later.get("ask")), None)
                if answer is None:
                    continue  # no user message in between: a repeat within one reply, not an ask again
                match = {"question": question, "earlier_question": before, "earlier_turn": where,
                         "earlier_turn_index": turns[where]["turn_index"], "earlier_run_id": turns[where].get("run_id"),
                         "answer": answer}
                break
        found.append(match)
        asked += [(position, question) for question in questions]
    return found
