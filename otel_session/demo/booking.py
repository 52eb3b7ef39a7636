"""The booking assistant's dialogue logic: states, required slots, understanding, the tool.

Pure and deterministic (no I/O, no telemetry): :mod:`otel_session.demo.agent` wraps each step in
``otel_session`` turns, slot writes, guards, verdicts and tool executions.

States run ``greet → ask_date → ask_party_size → confirm → done``; the next state is the first
whose required slots are not all filled, so an utterance the agent cannot understand keeps it in
the same state and it asks again (the "why did it ask twice" case).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

__all__ = [
    "DEMO_KEEP_SLOTS",
    "INSTRUCTIONS",
    "REQUIRED_SLOTS",
    "AvailabilityError",
    "BookingState",
    "Decision",
    "Understanding",
    "check_availability",
    "decide",
    "find_contacts",
    "understand",
]


class BookingState(str, Enum):
    GREET = "greet"
    ASK_DATE = "ask_date"
    ASK_PARTY_SIZE = "ask_party_size"
    CONFIRM = "confirm"
    DONE = "done"


REQUIRED_SLOTS: dict[BookingState, tuple[str, ...]] = {
    BookingState.GREET: (),
    BookingState.ASK_DATE: ("date",),
    BookingState.ASK_PARTY_SIZE: ("date", "party_size"),
    BookingState.CONFIRM: ("date", "party_size"),
    BookingState.DONE: ("date", "party_size", "confirmed"),
}
"""Slots a state needs filled before the dialogue can leave it."""

INSTRUCTIONS: dict[BookingState, str] = {
    BookingState.GREET: "Greet the caller.",
    BookingState.ASK_DATE: "Ask the caller which day they would like to come.",
    BookingState.ASK_PARTY_SIZE: "Ask the caller how many people the table is for.",
    BookingState.CONFIRM: "Offer the table you found and ask the caller to confirm.",
    BookingState.DONE: "Confirm the booking and say goodbye.",
}
"""The system prompt the agent sends the LLM for the state the dialogue moves to."""

DEMO_KEEP_SLOTS = ("date", "party_size", "available", "confirmed")
"""Booking facts stay readable in the demo's bundles; any other slot (the caller's contact) is hashed."""

MAX_PARTY_SIZE = 12
_TODAY = dt.date(2026, 12, 1)  # the demo's fixed "today": replies are reproducible
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
           "october", "november", "december")
_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
                 "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTH_DAY = re.compile(r"\b(" + "|".join(_MONTHS) + r")\s+(\d{1,2})\b", re.IGNORECASE)
_PARTY = re.compile(r"\b(\d{1,2}|" + "|".join(_NUMBER_WORDS) + r")\b(?:\s+(?:people|persons|guests|of us))?")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")
_PHONE = re.compile(r"\+?\d[\d ()-]{7,}\d")
_YES = re.compile(r"\b(yes|yep|sure|please do|book it|confirm)\b")


@dataclass(frozen=True)
class Understanding:
    """Slot values read from one user utterance (only what was found)."""

    slots: dict[str, Any] = field(default_factory=dict)


def _parse_date(text: str) -> str | None:
    if match := _ISO_DATE.search(text):
        try:
            return dt.date(*map(int, match.groups())).isoformat()
        except ValueError:
            return None
    if match := _MONTH_DAY.search(text):
        month = _MONTHS.index(match.group(1)) + 1
        try:
            day = dt.date(_TODAY.year, month, int(match.group(2)))
        except ValueError:
            return None
        return (day if day >= _TODAY else day.replace(year=_TODAY.year + 1)).isoformat()
    if "tomorrow" in text:
        return (_TODAY + dt.timedelta(days=1)).isoformat()
    for index, name in enumerate(_WEEKDAYS):
        if re.search(rf"\b{name}\b", text):
            ahead = (index - _TODAY.weekday()) % 7 or 7
            return (_TODAY + dt.timedelta(days=ahead)).isoformat()
    return None


def find_contacts(utterance: str) -> list[str]:
    """E-mail addresses, then phone numbers, as written (dates are never taken for phone numbers)."""
    without_dates = _MONTH_DAY.sub(" ", _ISO_DATE.sub(" ", utterance))
    return [*_EMAIL.findall(without_dates), *_PHONE.findall(_EMAIL.sub(" ", without_dates))]


def understand(utterance: str, state: BookingState) -> Understanding:
    """Read slot values from ``utterance``; a bare number counts as a party size only when asked."""
    text = utterance.lower()
    slots: dict[str, Any] = {}
    if date := _parse_date(text):
        slots["date"] = date
    without_dates = _MONTH_DAY.sub(" ", _ISO_DATE.sub(" ", utterance))
    contacts = find_contacts(utterance)
    for match in _PARTY.finditer(_PHONE.sub(" ", _EMAIL.sub(" ", without_dates.lower()))):
        explicit = match.group(0) != match.group(1)
        if explicit or state is BookingState.ASK_PARTY_SIZE:
            word = match.group(1)
            slots["party_size"] = int(word) if word.isdigit() else _NUMBER_WORDS[word]
            break
    if contacts:
        slots["contact"] = " ".join(contacts)
    if state is BookingState.CONFIRM and _YES.search(text):
        slots["confirmed"] = True
    return Understanding(slots)


@dataclass(frozen=True)
class Decision:
    """Where the dialogue goes after a turn, and why."""

    state: BookingState
    reason: str
    guards: dict[str, bool]
    candidates: tuple[str, ...]


def decide(state: BookingState, slots: dict[str, Any]) -> Decision:
    """The next state: the first state (from ``state`` on) whose required slots are missing."""
    party_size = slots.get("party_size")
    guards = {
        "date_present": bool(slots.get("date")),
        "party_size_valid": isinstance(party_size, int) and 1 <= party_size <= MAX_PARTY_SIZE,
        "availability_ok": slots.get("available") is True,
        "user_confirmed": slots.get("confirmed") is True,
    }
    candidates = tuple(s.value for s in BookingState if s is not BookingState.GREET)
    if not guards["date_present"]:
        return Decision(BookingState.ASK_DATE, "date missing", guards, candidates)
    if not guards["party_size_valid"]:
        return Decision(BookingState.ASK_PARTY_SIZE, "party size missing or out of range", guards, candidates)
    if not guards["availability_ok"]:
        return Decision(BookingState.CONFIRM, "date and party size known; availability to check", guards, candidates)
    if not guards["user_confirmed"]:
        return Decision(BookingState.CONFIRM, "table available; waiting for the user's yes", guards, candidates)
    return Decision(BookingState.DONE, "user confirmed an available table", guards, candidates)


class AvailabilityError(RuntimeError):
    """The reservation system could not answer."""


def check_availability(date: str, party_size: int) -> dict[str, Any]:
    """The demo's reservation system: deterministic, and it times out for parties over 8."""
    if party_size > 8:
        raise AvailabilityError(f"reservation system timed out looking up {party_size} seats")
    day = dt.date.fromisoformat(date)
    return {"available": True, "date": date, "party_size": party_size, "time": "19:30" if day.weekday() < 5 else "20:00"}
