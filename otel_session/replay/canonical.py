"""Canonical JSON: the byte-exact form both reducers (Python and ``viewer/static/reducer.js``) write.

Contract::

    canonical_json(value) -> bytes   # UTF-8, no whitespace, keys in UTF-16 order, numbers as JavaScript writes them
    js_number(float) -> str          # ECMAScript Number::toString

The shared fixtures in ``fixtures/replay/`` compare states in this form, byte for byte.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["MAX_SAFE_INTEGER", "canonical_json", "js_number"]

_SURROGATE = re.compile("[\ud800-\udfff]")
MAX_SAFE_INTEGER = 2**53


def js_number(value: float) -> str:
    """Format a float exactly as ECMAScript ``Number.prototype.toString`` (hence ``JSON.stringify``)."""
    if not math.isfinite(value):
        return "null"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    text = repr(abs(value))  # the shortest round-trip digits, as in JavaScript
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    significant = (whole + fraction).lstrip("0")
    # value = 0.<digits> * 10**n, with digits free of leading and trailing zeros (ECMA-262 Number::toString)
    n = len(whole) + int(exponent or 0) - (len(whole + fraction) - len(significant))
    digits = significant.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * -n + digits
    else:
        e = n - 1
        body = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return sign + body


def _escape_surrogates(text: str) -> str:
    """Escape lone surrogates as ``JSON.stringify`` does (they cannot be encoded as UTF-8)."""
    if _SURROGATE.search(text):
        return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
    return text


def _js_string(value: str) -> str:
    return _escape_surrogates(json.dumps(value, ensure_ascii=False))


def _utf16_order(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _encode(value: Any, parts: list[str]) -> None:
    if isinstance(value, str):
        parts.append(_js_string(value))
    elif value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, int):
        parts.append(str(value) if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER else js_number(float(value)))
    elif isinstance(value, float):
        parts.append(js_number(value))
    elif isinstance(value, dict):
        parts.append("{")
        items = sorted(((str(key), item) for key, item in value.items()), key=lambda pair: _utf16_order(pair[0]))
        for position, (key, item) in enumerate(items):
            if position:
                parts.append(",")
            parts.append(_js_string(key))
            parts.append(":")
            _encode(item, parts)
        parts.append("}")
    elif isinstance(value, (list, tuple)):
        parts.append("[")
        for position, item in enumerate(value):
            if position:
                parts.append(",")
            _encode(item, parts)
        parts.append("]")
    else:
        raise TypeError(f"{type(value).__name__} is not a JSON value")


def _plain(value: Any) -> bool:
    """True when the C ``json`` encoder already writes the canonical form: no floats, integers
    within ±2**53, ASCII object keys (so code point order is UTF-16 order)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str or item is None or kind is bool:
            continue
        if kind is int:
            if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                return False
        elif kind is dict:
            for key in item:
                if type(key) is not str or not key.isascii():
                    return False
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
        else:
            return False
    return True


def canonical_json(value: Any) -> bytes:
    """Return the canonical JSON of ``value``: UTF-8, no whitespace, object keys sorted by UTF-16
    code units, numbers and string escapes exactly as JavaScript's ``JSON.stringify`` writes them
    (non-finite numbers become ``null``, lone surrogates are escaped as ``\\udxxx``)."""
    if _plain(value):
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        return _escape_surrogates(text).encode("utf-8")
    parts: list[str] = []
    _encode(value, parts)
    return "".join(parts).encode("utf-8")
