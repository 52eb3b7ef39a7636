"""Keyset cursors: where a page ended, as an opaque string the client hands back.

Contract::

    token = encode_cursor(sort, order, (value, created_at, path, origin))
    token = row_cursor(sort, order, row)          # the page that ends at ``row`` continues after it
    token = session_cursor(group)                 # the sessions page that ends at ``group``
    value, created_at, path, origin = decode_cursor(token, sort, order)   # BadQuery on anything else

A cursor names the last row of a page by its sort value, ``created_at``, ``path`` and ``origin``
(the row's key: the same path may be in two roots of a shared catalog), so the next page starts right after it however many runs arrived since. It is base64url of
a small JSON array, checked field by field on the way back: a forged or truncated cursor, or one
made for another order, is a :class:`BadQuery`, never reaches SQL but as bound parameters.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import orjson

from .model import BadQuery, Order, RunRow, SessionGroup, SortKey

__all__ = ["decode_cursor", "encode_cursor", "row_cursor", "session_cursor"]

_MAX_CURSOR_CHARS = 2048
_MAX_TEXT = 1024


def encode_cursor(sort: SortKey, order: Order, position: tuple[Any, str, str, str]) -> str:
    return base64.urlsafe_b64encode(orjson.dumps([sort.value, order.value, *position])).decode().rstrip("=")


def row_cursor(sort: SortKey, order: Order, row: RunRow) -> str:
    if sort is SortKey.TOKENS:
        value = row.tokens
    elif sort is SortKey.FEEDBACK:
        value = row.feedback_mean
    else:
        value = getattr(row, sort.value)
    return encode_cursor(sort, order, (value, row.created_at, row.path, row.origin))


def session_cursor(group: SessionGroup) -> str:
    return encode_cursor(SortKey.CREATED_AT, Order.DESC, (None, group.newest_created_at, group.directory, ""))


def decode_cursor(token: str, sort: SortKey, order: Order) -> tuple[Any, str, str, str]:
    """The position ``token`` names; :class:`BadQuery` unless this server made it for ``sort``/``order``."""
    if len(token) > _MAX_CURSOR_CHARS:
        raise BadQuery("cursor is too long: use the next_cursor of a previous answer")
    try:
        decoded = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError):
        raise BadQuery("cursor is not one this server gave: use the next_cursor of a previous answer") from None
    if not (isinstance(decoded, list) and len(decoded) == 6):
        raise BadQuery("cursor is not one this server gave: use the next_cursor of a previous answer")
    sort_name, order_name, value, created_at, path, origin = decoded
    if (sort_name, order_name) != (sort.value, order.value):
        raise BadQuery("cursor belongs to another sort or order: ask again without it")
    if not (all(isinstance(text, str) and len(text) <= _MAX_TEXT for text in (created_at, path, origin))
            and _is_value(value)):
        raise BadQuery("cursor is not one this server gave: use the next_cursor of a previous answer")
    return value, created_at, path, origin


def _is_value(value: Any) -> bool:
    if isinstance(value, str):
        return len(value) <= _MAX_TEXT
    return value is None or (type(value) in (int, float) and abs(value) < 2**62)
