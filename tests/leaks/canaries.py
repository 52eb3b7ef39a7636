"""Canaries: distinct personal-data values of every kind the default policy detects, and the grep
that finds them in any output, in any encoding a leak could take (issue 15).

Contract::

    canaries = Canaries()
    value = canaries.mint("email", where="grpc span attribute str")   # a fresh, distinct value
    number = canaries.number("card", where="grpc span attribute int") # an int (card/phone/national id)
    found = canaries.grep(blob)     # [Found(kind, text, view)] of every canary shape in ``blob``
    canaries.where_of(found)        # where each found value was placed ("?" for a fragment)

Every value carries a serial number, so a value found in an output names the field and the entry
point it was put in. ``grep`` looks for each kind's *shape* (``zq0042x`` of an e-mail, ``1415…0199``
of a phone, ``4532…`` of a card…), not only the values minted, so a fragment or a re-formatted value
(digits without their separators) is found too. It looks in every view of a blob a leak may take:
as is (case-insensitively), JSON-unescaped (twice, for JSON held in a JSON string), URL-decoded, HTML-unescaped, base64-decoded runs,
and with number separators removed (a card as the digits of an int or a double).
"""

from __future__ import annotations

import base64
import binascii
import functools
import html
import re
import urllib.parse
from dataclasses import dataclass

__all__ = ["Canaries", "Found", "KINDS", "NUMBER_KINDS", "USER_PATTERNS"]

USER_PATTERNS = {"ticket": "TKT-[a-z]{8}"}
"""The user detector the canary run sets in ``OTEL_SESSION_REDACT_PATTERNS``."""

_SEPARATORS = " \t\n\r\u00a0\u2007\u2009\u202f().-"
_STRIP = re.compile(f"[{re.escape(_SEPARATORS)}]")


def _luhn_completed(digits: str) -> str:
    """``digits`` with the check digit that makes them Luhn-valid."""
    for check in "0123456789":
        candidate = digits + check
        total = 0
        for position, char in enumerate(reversed(candidate)):
            value = int(char) * (2 if position % 2 else 1)
            total += value - 9 if value > 9 else value
        if total % 10 == 0:
            return candidate
    raise AssertionError("unreachable")


def _iban(bank: str, account: str) -> str:
    """A mod-97-valid British IBAN."""
    moved = f"{bank}{account}GB00"
    remainder = int("".join(str(int(char, 36)) for char in moved)) % 97
    return f"GB{98 - remainder:02d}{bank}{account}"


def _letters(n: int) -> str:
    return "".join(chr(ord("a") + (n // 26**i) % 26) for i in range(4))


def _card(n: int) -> str:
    return _luhn_completed(f"4532{n:06d}12345")


# kind -> (value of serial n, shape regex that finds any value of the kind in a view).
_KINDS: dict[str, tuple] = {
    "email": (lambda n: f"zq{n:05d}x@mail-canary.example", r"zq\d{5}x"),
    "email_idn": (lambda n: f"zi{n:05d}x@bücher-canary.example", r"zi\d{5}x"),
    "email_url": (lambda n: f"zu{n:05d}x%40mail-canary.example", r"zu\d{5}x"),
    "phone": (lambda n: f"+1 415 {n:05d} 0199", r"1415\d{5}0199"),
    "phone_nbsp": (lambda n: f"+33\u00a06\u00a0{n // 1000:02d}\u00a0{n % 1000:03d}\u00a098\u00a076\u00a054",
                   r"336\d{5}987654"),
    "card": (lambda n: " ".join(_card(n)[i:i + 4] for i in range(0, 16, 4)), r"4532\d{6}12345\d"),
    "card_glued": (lambda n: f"ref{_card(n)}", r"4532\d{6}12345\d"),
    "card_nbsp": (lambda n: "\u00a0".join(_card(n)[i:i + 4] for i in range(0, 16, 4)), r"4532\d{6}12345\d"),
    "national_id": (lambda n: f"078-{n // 10000:02d}-{n % 10000:04d}", r"078-\d{2}-\d{4}"),
    "national_id_uk": (lambda n: f"AB{n:06d}C", r"AB\d{6}C"),
    "iban": (lambda n: _iban("CANA", f"{n:06d}{n:08d}"), r"GB\d\dCANA\d{14}"),
    "ipv4": (lambda n: f"198.{51 + n // 10000}.{100 + n // 100 % 100}.{100 + n % 100}", r"198\.5\d\.1\d\d\.1\d\d"),
    "ipv6": (lambda n: f"2001:db8:cafe:{n:04x}::17", r"2001:db8:cafe:[0-9a-f]{4}::17"),
    "ticket": (lambda n: f"TKT-canr{_letters(n)}", r"TKT-canr[a-z]{4}"),
}
KINDS = tuple(_KINDS)
NUMBER_KINDS = {"card": lambda n: int(_card(n)), "phone": lambda n: int(f"1415{n:05d}0199")}
"""The kinds that can be sent as an integer or a double (their digits)."""

# Shapes with letters are matched ignoring case, but for the UK NI number (two letters, digits,
# one letter: lowercase, that is hex, which every keyed hash is).
_SHAPES = {kind: re.compile(shape, 0 if kind == "national_id_uk" else re.IGNORECASE) for kind, (_, shape) in _KINDS.items()}
_BASE64_RUN = re.compile(rb"[A-Za-z0-9+/_-]{8,}={0,2}")
_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\(.)")
_JSON_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


@dataclass(frozen=True)
class Placed:
    kind: str
    value: str
    where: str
    control: bool = False


@dataclass(frozen=True)
class Found:
    kind: str
    text: str
    view: str


class Canaries:
    """Every canary placed in one run of the stack (see the module's docstring)."""

    def __init__(self) -> None:
        self.placed: list[Placed] = []
        self._by_key: dict[str, Placed] = {}
        self._serial = 0

    def mint(self, kind: str, where: str, *, control: bool = False) -> str:
        """A fresh value of ``kind``, remembered as placed at ``where``."""
        self._serial += 1
        value = _KINDS[kind][0](self._serial)
        self._remember(Placed(kind, value, where, control))
        return value

    def number(self, kind: str, where: str) -> int:
        """A fresh ``kind`` (a key of ``NUMBER_KINDS``) as an integer."""
        self._serial += 1
        number = NUMBER_KINDS[kind](self._serial)
        value = _KINDS[kind][0](self._serial)
        self._remember(Placed(kind, value, where))
        return number

    def adopt(self, placed: list[tuple[str, str, str, bool]], serial: int) -> None:
        """Canaries another process placed (kind, value, where, control), minted from ``serial`` on."""
        for kind, value, where, control in placed:
            self._remember(Placed(kind, value, where, control))
        self._serial = max(self._serial, serial + len(placed))
        assert self._serial < 100_000, "the shapes hold five-digit serials"

    def all_kinds(self, where: str) -> dict[str, str]:
        """One fresh value of every kind, by kind."""
        return {kind: self.mint(kind, f"{where} [{kind}]") for kind in KINDS}

    def _remember(self, placed: Placed) -> None:
        self.placed.append(placed)
        for shape in _SHAPES.values():
            for view in (placed.value, _STRIP.sub("", placed.value)):
                for match in shape.finditer(view):
                    self._by_key[_key(match.group())] = placed

    def placed_at(self, prefix: str) -> list[Placed]:
        return [placed for placed in self.placed if placed.where.startswith(prefix)]

    def where_of(self, found: Found) -> str:
        placed = self._by_key.get(_key(found.text))
        if placed is None:
            return f"{found.kind} fragment {found.text!r} (in the {found.view} view)"
        control = " (control)" if placed.control else ""
        return f"{placed.kind} {placed.value!r} put in {placed.where}{control}, found in the {found.view} view"

    def placed_where(self, found: Found) -> str:
        """Where ``found`` was placed ("" for a fragment no canary is)."""
        placed = self._by_key.get(_key(found.text))
        return "" if placed is None else placed.where

    def is_control(self, found: Found) -> bool:
        placed = self._by_key.get(_key(found.text))
        return placed is not None and placed.control

    @staticmethod
    def grep(blob: bytes | str) -> list[Found]:
        """Every canary shape in any view of ``blob`` (see the module's docstring)."""
        return list(_grep(blob.encode("utf-8", "surrogatepass") if isinstance(blob, str) else blob))


@functools.lru_cache(maxsize=512)
def _grep(blob: bytes) -> tuple[Found, ...]:
    found: dict[str, Found] = {}
    for view, text in _views(blob):
        for kind, shape in _SHAPES.items():
            for match in shape.finditer(text):
                found.setdefault(_key(match.group()), Found(kind, match.group(), view))
    return tuple(found.values())


def _key(text: str) -> str:
    """What two sightings of one value have in common (a card's digits, with or without spaces)."""
    return _STRIP.sub("", text).lower()


def _views(data: bytes) -> list[tuple[str, str]]:
    text = data.decode("utf-8", "replace")
    unescaped = _json_unescaped(_json_unescaped(text))  # twice: JSON in a JSON string
    decoded = urllib.parse.unquote(urllib.parse.unquote_plus(unescaped))
    views = [("plain", text), ("JSON-unescaped", unescaped), ("URL-decoded", decoded),
             ("HTML-unescaped", html.unescape(unescaped))]
    views.append(("base64-decoded", _json_unescaped(_json_unescaped(_base64_decoded(data)))))
    views += [(f"{name}, separators removed", _STRIP.sub("", view)) for name, view in list(views)]
    return views


def _json_unescaped(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return chr(int(match.group(1), 16))
        return _JSON_SIMPLE.get(match.group(2), match.group(2))

    return _JSON_ESCAPE.sub(replace, text)


def _base64_decoded(data: bytes) -> str:
    """The runs of ``data`` that look like base64, decoded at each of the four alignments."""
    parts = []
    for run in _BASE64_RUN.finditer(data):
        token = run.group().rstrip(b"=").replace(b"-", b"+").replace(b"_", b"/")
        for offset in range(4):
            piece = token[offset:]
            piece = piece[:-1] if len(piece) % 4 == 1 else piece
            piece += b"=" * (-len(piece) % 4)
            try:
                parts.append(base64.b64decode(piece).decode("utf-8", "replace"))
            except (binascii.Error, ValueError):
                continue
    return "\n".join(parts)
