"""Detectors: where free text holds personal data, and what replaces it (SPEC §6).

Contract::

    scanner = Scanner(DEFAULT_DETECTORS, patterns={"employee_id": r"EMP-\\d{6}"})
    scanner.scan("mail jane@example.com, EMP-123456")  # -> "mail [email], [employee_id]"
    scanner.edits("mail jane@example.com")             # -> [(5, 21, "[email]")]
    "table for 2" in scanner.clean                     # -> True once scanned: it holds no detection

Built-in detectors (each masks as ``[name]``): ``email`` (international domains, ``%40``-encoded),
``phone``, ``card`` (Luhn-checked, also glued to letters or ``_``), ``national_id`` (SSN, UK NI and
long digit runs), ``iban`` (mod-97 checked, spaced or not), ``ipv4``, ``ipv6`` (checked by
``ipaddress``; also after a word's dot, as in an attribute key ``peer.2001:db8::1``). Text holding
JSON string escapes (``\\u00a0``, ``\\u00fc``, ``\\n``, JSON inside a JSON string) is also read
decoded, and what the escapes hid is masked in place. A number's digits may be separated by up to three of space, tab, newline, NBSP,
U+2007, U+2009, U+202F, ``(``, ``)``, ``.``, ``-``. User patterns (label -> regex) are matched
within each word (a run without whitespace) and mask as ``[label]``; they never override a
built-in detection. Tokens this package emits are matched first and left as they are, so scanning
twice changes nothing; so are UUIDs (run ids, request ids), whose digit groups are random, not a
phone number (one UUID in twelve would otherwise lose a group as ``[phone]``).

Streaming (``stream.py``) relies on two properties. A detection holds whitespace only before one
of ``CONTINUES_AFTER_SPACE`` (a number's digits and separators, an IBAN's next group), so a text
cut right after whitespace, before any other character, scans the same whole or in parts. And a
text without any of ``TRIGGERS`` (a digit, "@" or the "%" of "%40", ":") holds no built-in
detection, whatever text comes before it: it needs no scan.
"""

from __future__ import annotations

import bisect
import ipaddress
import re
from collections.abc import Iterable, Mapping

__all__ = ["BUILTIN_DETECTORS", "CONTINUES_AFTER_SPACE", "DEFAULT_DETECTORS", "IS_MASK", "TRIGGERS", "Scanner"]

BUILTIN_DETECTORS = ("email", "phone", "card", "national_id", "iban", "ipv4", "ipv6")
DEFAULT_DETECTORS = BUILTIN_DETECTORS
CONTINUES_AFTER_SPACE = "0-9A-Z().\\-\\\\"
"""A regex class body: the characters a detection may hold right after whitespace."""
TRIGGERS = "\\d@%:"
"""A regex class body: every built-in detection holds one of these (see ``_left_out``)."""
LABEL = re.compile(r"[a-z][a-z0-9_]{0,31}")
"""What a detector's name (its token ``[name]``) may look like."""

# The mask a ``mask`` field mode writes (see ``Redactor``) and the error token, whole.
_MASK = r"<redacted (?:error|[A-Za-z_]\w{0,39} len=\d{1,19})>"
IS_MASK = re.compile(_MASK).fullmatch
_HASH = r"hmac-sha256:[0-9a-f]{16}"
_UUID = r"(?<![0-9A-Fa-f])[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}(?![0-9A-Fa-f])"
_SEPARATOR = "[ \\t\\n\\r\\u00a0\\u2007\\u2009\\u202f().\\-]"
_DIGITS = f"\\d(?:{_SEPARATOR}{{0,3}}\\d)"  # + a count: a run of digits, each after <= 3 separators
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
# An address may follow a "." that ends a word ("peer.2001:db8::1", an attribute key), not one
# after a digit (a longer dotted number is a version, not an address).
_AFTER_WORD_DOT = r"(?<=[^\W\d]\.)"

# Each detector's pattern, in the order they are tried at a position (the first that matches wins).
_PATTERNS: dict[str, str] = {
    "email": r"[\w.%+\-]+(?:@|%40)[\w\-]+(?:\.[\w\-]+)*\.(?:xn--[\w\-]+|[^\W\d_]{2,})",
    "iban": r"\b[A-Z]{2}\d{2}(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{4}){2,7}(?: [A-Z0-9]{1,4})?)\b",
    "ipv4": rf"(?:{_AFTER_WORD_DOT}|(?<![\w.])){_OCTET}(?:\.{_OCTET}){{3}}(?!\w|\.\d)",
    "ipv6": rf"(?:{_AFTER_WORD_DOT}|(?<![\w:.]))" r"(?:[0-9A-Fa-f]{1,4}:|:)(?:[0-9A-Fa-f]{0,4}:){1,7}"
            r"(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9A-Fa-f]{1,4})?(?:%[\w\-]+)?(?![\w:]|\.\d)",
    "national_letters": r"\b[A-CEGHJ-PR-TW-Z]{2}\d{6}[A-D]\b",  # UK NI number shape
    # A run of digits with separators, not glued to a word: a phone, card or national id.
    "number": rf"(?<![\w+])\+?\(?{_DIGITS}{{5,}}(?!\w)",
    # Digits glued to letters or "_" ("ref4111…", "cc_4111…"): only a card number is taken there.
    "glued": rf"(?<![\d+]){_DIGITS}{{12,18}}(?!\d)",
}
# Which detector needs which pattern.
_NEEDS = {
    "email": ("email",), "iban": ("iban",), "ipv4": ("ipv4",), "ipv6": ("ipv6",),
    "national_id": ("national_letters", "number"), "phone": ("number",), "card": ("number", "glued"),
}
# Shortcuts (``TRIGGERS`` sums them up): a pattern is left out of a text that cannot hold its
# detections. Every detection but an e-mail or IPv6 address holds four digits, each after at most
# three separators (an IPv4 address's four numbers; a number, national id or card; the account
# number of every IBAN format); an e-mail holds "@" or "%40"; an IPv6 address "::" or six colons. A search for the digits and a
# few substring tests are much cheaper than the whole pattern on text without them.
_FOUR_DIGITS = re.compile(f"{_DIGITS}{{3}}")
# The same test without a regex for ASCII text (a regex call costs more than a short text's walk):
# digits become "0", separators go, every other character becomes "x"; four digits with only
# separators between them leave "0000" (necessary, not sufficient: ``_FOUR_DIGITS`` decides then).
_DIGIT_SHAPE = bytes(ord("0") if chr(byte).isdigit() else ord("x") for byte in range(256))
_ASCII_SEPARATORS = " \t\n\r().-".encode("ascii")
_NEED_DIGITS = frozenset({"iban", "ipv4", "national_letters", "number", "glued"})
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}|\d{2}[./-]\d{2}[./-]\d{4}|\d{4}[./]\d{2}[./]\d{2}")
_SSN = re.compile(r"\d{3}-\d{2}-\d{4}")
_WORD = re.compile(r"\S+")
# JSON string escapes a detection may hide behind (JSON held as text): decoded before a second look.
_ESCAPE = re.compile(r"\\(?:u[0-9A-Fa-f]{4}|[ntr/\"\\])")
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "/": "/", '"': '"', "\\": "\\"}
# Scanned texts are remembered (GenAI traffic repeats system prompts and whole histories): at most
# this many entries and this many characters in all, then the cache starts over.
_CACHE_SIZE = 4096
_CACHE_CHARS = 1 << 21
_CACHE_MAX_TEXT = 1 << 16

Edit = tuple[int, int, str]


def _luhn_valid(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if position % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def _iban_valid(candidate: str) -> bool:
    compact = candidate.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(char, 36)) for char in moved)) % 97 == 1


def _ipv6_valid(candidate: str) -> bool:
    address = candidate.split("%", 1)[0]
    if not any(char.isalnum() for char in address):
        return False  # "::" alone names no one
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return False
    return True


class Scanner:
    """The enabled detectors, compiled once; ``scan`` and ``edits`` are pure functions of a text.

    A candidate a checksum or shape check rejects (a date, a non-Luhn number, a bad IBAN) is
    scanned again without its detector, so it never hides another detection. Results of ``scan``
    are kept in a bounded cache (raw text in memory only, like the values the caller holds).
    """

    def __init__(self, detectors: Iterable[str], patterns: Mapping[str, str] | None = None) -> None:
        self._enabled = frozenset(detectors)
        self._kinds = tuple(kind for kind in _PATTERNS if any(kind in _NEEDS[name] for name in self._enabled))
        self._kind_set = frozenset(self._kinds)
        labels = sorted({*BUILTIN_DETECTORS, *(patterns or {})})
        self._token = re.compile(f"{_HASH}|{_MASK}|\\[(?:{'|'.join(labels)})\\]")
        self._user = [(f"[{label}]", re.compile(pattern)) for label, pattern in (patterns or {}).items()]
        self._patterns: dict[frozenset[str], re.Pattern[str]] = {}
        self.clean: set[str] = set()
        """Texts seen to hold no detection: for a plain ``str``, ``text in scanner.clean`` says
        ``scan(text) is text`` without a call (a caller's fast path; bounded with the cache)."""
        self._cache: dict[str, str] = {}  # texts seen to hold detections -> scanned
        self._cached_chars = 0
        self._builtin_only = not self._user
        self.triggers = None if self._user else TRIGGERS
        """``TRIGGERS``, or None with user patterns (they may match any text)."""

    def _pattern(self, without: frozenset[str]) -> re.Pattern[str]:
        pattern = self._patterns.get(without)
        if pattern is None:
            parts = [f"(?P<redacted>{self._token.pattern}|{_UUID})"]
            parts += [f"(?P<{kind}>{_PATTERNS[kind]})" for kind in self._kinds if kind not in without]
            pattern = self._patterns[without] = re.compile("|".join(parts))
        return pattern

    def scan(self, text: str) -> str:
        """``text`` with its detections replaced; ``text`` itself (the same object) when it holds
        none, so callers may test ``scan(value) is value``."""
        if type(text) is not str:  # a subclass may compare, hash or search unlike its text
            text = str.__str__(text)
        clean = self.clean
        if text in clean:
            return text
        cache = self._cache
        scanned = cache.get(text)
        if scanned is None:
            # The common new text, in line: no pattern can match it, no user pattern, no escape.
            if self._builtin_only and self._kind_set <= _left_out(text, 0) and "\\" not in text:
                edits = []
            else:
                edits = self.edits(text)
            scanned = _apply(text, edits) if edits else text
            size = len(text)
            if size <= _CACHE_MAX_TEXT:
                if len(cache) + len(clean) >= _CACHE_SIZE or self._cached_chars + size > _CACHE_CHARS:
                    cache.clear()
                    clean.clear()
                    self._cached_chars = 0
                if edits:
                    cache[text] = scanned
                else:
                    clean.add(text)
                self._cached_chars += size  # approximate under threads; it only bounds the cache
        return scanned

    def edits(self, text: str, start: int = 0) -> list[Edit]:
        """The detections in ``text[start:]`` (``text[:start]`` is context a pattern may look
        back at) as sorted, disjoint ``(start, end, replacement)`` in ``text``'s offsets."""
        if type(text) is not str:
            text = str.__str__(text)
        without = _left_out(text, start)
        edits: list[Edit] = []
        if not self._kind_set <= without:
            self._find(text, start, len(text), without, edits)
        if self._user:
            edits = self._with_user_matches(text, start, edits)
        if "\\" in text and _ESCAPE.search(text, start) is not None:
            edits = self._with_escaped(text, start, edits)
        return edits

    def _with_escaped(self, text: str, start: int, edits: list[Edit]) -> list[Edit]:
        """``edits`` and the detections in ``text`` read with its JSON string escapes decoded
        (``\\u00a0``, ``\\n``…: JSON kept as text, a delta streaming a tool call's arguments),
        mapped back onto ``text``; overlapping edits merge into one."""
        decoded, begins, ends = _decode_escapes(text)
        found = self.edits(decoded, bisect.bisect_left(begins, start))
        if not found:
            return edits
        mapped = [(begins[first], ends[last - 1], token) for first, last, token in found]
        merged: list[Edit] = []
        for begin, end, token in sorted(edits + mapped):
            if merged and begin < merged[-1][1]:
                previous = merged[-1]
                merged[-1] = (previous[0], max(previous[1], end), previous[2])
            else:
                merged.append((begin, end, token))
        return merged

    def _find(self, text: str, start: int, end: int, without: frozenset[str], edits: list[Edit]) -> None:
        position = start
        while (found := self._next(text, position, end, without)) is not None:
            begin, finish, label = found
            if label is not None:
                edits.append((begin, finish, f"[{label}]"))
            position = finish

    def _next(self, text: str, start: int, end: int, without: frozenset[str]) -> tuple[int, int, str | None] | None:
        """The next detection at or after ``start`` as ``(begin, end, label)``, a span to pass over
        (a token this package wrote, a rejected candidate) with label None, or None when none.

        A rejected candidate (an "address" ``:0:4111`` that is none) is searched again without its
        detector, and a detection that starts inside it wins even where it runs past its end (the
        card ``4111 1111 1111 1111``): a rejected candidate never cuts another detection short."""
        match = self._pattern(without).search(text, start, end)
        if match is None:
            return None
        kind = match.lastgroup or ""
        if kind == "redacted":
            return match.start(), match.end(), None
        label = self._label(kind, match.group())
        if label is not None:
            return match.start(), match.end(), label
        inner = self._next(text, match.start(), end, without | {kind})
        if inner is not None and inner[0] < match.end():
            return inner
        return match.start(), match.end(), None

    def _label(self, kind: str, candidate: str) -> str | None:
        """The detection a candidate of pattern ``kind`` is, or None to leave it."""
        if kind == "number":
            return self._number(candidate)
        if kind == "glued":
            digits = "".join(char for char in candidate if char.isdigit())
            return "card" if "card" in self._enabled and _luhn_valid(digits) else None
        if kind == "national_letters":
            return "national_id"
        if kind == "iban":
            return "iban" if _iban_valid(candidate) else None
        if kind == "ipv6":
            return "ipv6" if _ipv6_valid(candidate) else None
        return kind

    def _number(self, candidate: str) -> str | None:
        enabled = self._enabled
        digits = "".join(char for char in candidate if char.isdigit())
        if "card" in enabled and 13 <= len(digits) <= 19 and _luhn_valid(digits):
            return "card"
        if "national_id" in enabled and _SSN.fullmatch(candidate):
            return "national_id"
        if _ISO_DATE.fullmatch(candidate):
            return None
        if "phone" in enabled and 7 <= len(digits) <= 15:
            return "phone"
        if "national_id" in enabled and len(digits) >= 9:
            return "national_id"
        return None

    def _with_user_matches(self, text: str, start: int, edits: list[Edit]) -> list[Edit]:
        """``edits`` and the user patterns' matches within each word that overlap none of them nor
        a token this package wrote
        (of overlapping user matches, the first to start wins, then the longest, then the first pattern)."""
        found = [
            (match.start(), -match.end(), order, token)
            for word in _WORD.finditer(text, start)
            for order, (token, pattern) in enumerate(self._user)
            for match in pattern.finditer(text, word.start(), word.end())
            if match.end() > match.start()
        ]
        if not found:
            return edits
        taken = sorted([*((begin, end) for begin, end, _ in edits),
                        *(match.span() for match in self._token.finditer(text, start))])
        added: list[Edit] = []
        index = 0
        for begin, negative_end, _, token in sorted(found):
            end = -negative_end
            if added and begin < added[-1][1]:
                continue  # overlaps the user match before it
            while index < len(taken) and taken[index][1] <= begin:
                index += 1
            if index < len(taken) and taken[index][0] < end:
                continue  # overlaps a built-in detection or a token
            added.append((begin, end, token))
        return sorted(edits + added) if added else edits


def _left_out(text: str, start: int) -> frozenset[str]:
    """The patterns that can find nothing in ``text[start:]`` (see ``_FOUR_DIGITS``)."""
    rest = text[start:] if start else text
    return _LEFT_OUT[
        ("@" not in rest and "%40" not in rest)
        | ("::" not in rest and rest.count(":") < 6) << 1
        # bytes.find, not "in": "in" tries its operand as an int first and pays for the TypeError.
        | (rest.isascii() and rest.encode("ascii").translate(_DIGIT_SHAPE, _ASCII_SEPARATORS).find(b"0000") < 0
           or _FOUR_DIGITS.search(rest) is None) << 2
    ]


# _left_out's answers, made once: bit 0 no e-mail, bit 1 no IPv6 address, bit 2 no four digits.
_LEFT_OUT = tuple(
    frozenset(({"email"} if mask & 1 else set()) | ({"ipv6"} if mask & 2 else set()) | (_NEED_DIGITS if mask & 4 else set()))
    for mask in range(8)
)


def _decode_escapes(text: str) -> tuple[str, list[int], list[int]]:
    """``text`` with its JSON escapes decoded, and where each decoded character begins and ends in ``text``."""
    parts: list[str] = []
    begins: list[int] = []
    ends: list[int] = []
    cursor = 0
    for match in _ESCAPE.finditer(text):
        parts.append(text[cursor:match.start()])
        begins += range(cursor, match.start())
        ends += range(cursor + 1, match.start() + 1)
        escape = match.group()
        parts.append(chr(int(escape[2:], 16)) if escape[1] == "u" else _SIMPLE_ESCAPES[escape[1]])
        begins.append(match.start())
        ends.append(match.end())
        cursor = match.end()
    parts.append(text[cursor:])
    begins += range(cursor, len(text))
    ends += range(cursor + 1, len(text) + 1)
    return "".join(parts), begins, ends


def _apply(text: str, edits: list[Edit]) -> str:
    parts = []
    cursor = 0
    for start, end, replacement in edits:
        parts.append(text[cursor:start])
        parts.append(replacement)
        cursor = end
    parts.append(text[cursor:])
    return "".join(parts)
