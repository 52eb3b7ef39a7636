"""What a model call's input adds to the conversation, parsing as little of the input as it can.

Contract::

    items, after_assistant = new_items(value)   # the items of ``gen_ai.input.messages`` after its
                                                # last assistant message, and whether it had one
    role = structured_role(item)                # the role an item maps to (None: not a message)

A model call's input repeats the whole conversation so far; only the items after its last
assistant message are new (``genai_messages.new_inputs``). The answer is always what a fresh
parse (``json_list``) and a scan from its end give, for any value, valid or not.

How: the value is cut before every ``{"role":"assistant"`` (either spacing of ``json.dumps``) into
pieces; only the last piece is parsed. The text before it must be valid JSON for the value to be:
* an agent's next call continues its previous input (the same head: system prompt, first user
  message; its history grown, or its window slid): when the text between the first and last cut is
  the end of the conversation's previous input, byte for byte, it is valid (one comparison);
* otherwise each piece is checked once, when first seen, and kept in bounded sets shared by all runs
  (a piece's validity does not depend on where it occurs).
A value that does not cut into valid pieces, or whose last piece holds no assistant message, is
parsed whole.
"""

from __future__ import annotations

from typing import Any

import orjson

from otel_session.normalize.spans import json_list, json_value

__all__ = ["MAX_KNOWN_CHARS", "MAX_KNOWN_PIECES", "new_items", "structured_role"]

MAX_KNOWN_PIECES = 4096  # per set; a full set starts over (~1 MB of typical pieces)
MAX_KNOWN_CHARS = 16 * 1024 * 1024  # all texts kept, counted as they are kept: past it, all start over
_MARKERS = ('{"role":"assistant"', '{"role": "assistant"')
_SEPARATORS = (",", ", ")  # what follows an item in compact and in default json.dumps output

# The last input of each conversation (by head) whose markers are all cuts between valid pieces.
_CONVERSATIONS: dict[str, tuple[str, str]] = {}
# Texts known to be valid: heads ``[`` + items + separator (a value's text before its first cut),
# and middles (a piece between two cuts: marker + piece is items + separator). Two sets: a middle
# piece starting with ``[`` is invalid, yet could equal a known head.
_HEADS: set[str] = set()
_MIDDLES: set[str] = set()
_kept_chars = 0  # text added to the three since they last started over (replaced entries included)


def structured_role(item: Any) -> str | None:
    """The role ``genai_messages`` gives ``item`` (a ``gen_ai.choice`` body's inner message's)."""
    if not isinstance(item, dict):
        return None
    inner = item.get("message")
    if isinstance(inner, dict):
        return str(inner.get("role") or "assistant")
    return str(item.get("role") or "assistant")


def new_items(value: Any) -> tuple[list[Any], bool]:
    """The input's items after its last assistant message and True; all of them and False when
    it has none. Items are shared read-only (string items holding JSON decoded)."""
    if value.__class__ is str and value[:1] == "[":
        for marker in _MARKERS:
            last = value.rfind(marker)
            if last >= 0:
                found = _from_last_piece(value, marker, last)
                if found is not None:
                    return found
                break
        return _after_last_assistant(_parsed_whole(value))
    return _after_last_assistant(json_list(value))


def _from_last_piece(value: str, marker: str, last: int) -> tuple[list[Any], bool] | None:
    """The answer from the last piece alone, when every piece before it is valid; else None."""
    try:
        tail = orjson.loads("[" + value[last:])
    except orjson.JSONDecodeError:
        return None
    for position in range(len(tail) - 1, -1, -1):  # string items decoded on the way: those after it
        item = tail[position]
        if item.__class__ is str:
            item = tail[position] = json_value(item)
        if item.__class__ is dict and "message" not in item:  # the common item, as structured_role takes it
            role = item.get("role")
            if not role or role == "assistant":
                break
            if role.__class__ is str:
                continue
        if structured_role(item) == "assistant":
            break
    else:  # an item cut at the marker is not an assistant message after all
        return None
    first = value.find(marker)
    head = value[:first]
    if not _continues(value, marker, head, first, last):
        if not _valid_pieces(value, marker, head):
            return None
        rest = value[last:].rstrip()  # the last piece: a middle one of the next call to take this route
        if rest.endswith("]"):
            _remember(_MIDDLES, rest[len(marker) : -1])
    if value[-1:] == "]":  # every marker in it a cut between valid pieces: the next call may continue it
        if len(_CONVERSATIONS) >= MAX_KNOWN_PIECES:
            _CONVERSATIONS.clear()
        _keep(len(value))
        _CONVERSATIONS[head] = (value, marker)
    return tail[position + 1 :], True


def _continues(value: str, marker: str, head: str, first: int, last: int) -> bool:
    """Whether ``value`` before its last cut is the conversation's previous input (same head) with
    its last piece followed by a separator, less any pieces from its start: an agent's next call,
    its history grown or its window slid."""
    known = _CONVERSATIONS.get(head)
    if known is None or known[1] != marker:
        return False
    if first == last:  # nothing between the head (known valid) and the last piece
        return True
    previous = known[0]
    if value[last - 1] == ",":
        end = last - 1
    elif value[last - 2 : last] == ", ":
        end = last - 2
    else:
        return False
    # Where the previous input's remaining pieces begin (a marker, as ``value`` has one at ``first``);
    # never inside its head, nor a negative index.
    cut = len(previous) - 1 - (end - first)
    return cut >= first and value.startswith(previous[cut:-1], first)


def _valid_pieces(value: str, marker: str, head: str) -> bool:
    """Whether the head and every middle piece (between two markers) are valid, each checked once."""
    if not (head in _HEADS or _valid_head(head)):
        return False
    middles = value.split(marker)[1:-1]
    if not _MIDDLES.issuperset(middles):
        for piece in middles:
            if piece not in _MIDDLES and not _valid_middle(piece, marker):
                return False
    return True


def _parsed_whole(value: str) -> list[Any]:
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError:
        return json_list(value)
    if parsed and value[-1:] == "]":  # the next call's head, when it appends to this input
        _remember(_HEADS, value[:-1])
    return json_list(parsed)


def _valid_head(head: str) -> bool:
    rest = head.rstrip()
    if rest == "[":
        return True
    if not rest.endswith(","):
        return False
    try:
        valid = bool(orjson.loads(rest[:-1] + "]"))  # at least one item before the separator
    except orjson.JSONDecodeError:
        return False
    if valid:
        _remember(_HEADS, rest[:-1])
    return valid


def _valid_middle(piece: str, marker: str) -> bool:
    rest = piece.rstrip()
    if not rest.endswith(","):
        return False
    try:
        orjson.loads("[" + marker + rest[:-1] + "]")
    except orjson.JSONDecodeError:
        return False
    _remember(_MIDDLES, rest[:-1])
    _keep(len(piece))
    _MIDDLES.add(piece)  # as it is spaced here, when that is neither separator
    return True


def _remember(known: set[str], items: str) -> None:
    """``items`` (a valid text) followed by either separator, as its pieces will look."""
    if len(known) >= MAX_KNOWN_PIECES:
        known.clear()
    _keep(2 * len(items))
    for separator in _SEPARATORS:
        known.add(items + separator)


def _keep(chars: int) -> None:
    """Count ``chars`` more text kept; past ``MAX_KNOWN_CHARS`` (long inputs) forget everything."""
    global _kept_chars
    _kept_chars += chars
    if _kept_chars > MAX_KNOWN_CHARS:
        _kept_chars = chars
        _CONVERSATIONS.clear()
        _HEADS.clear()
        _MIDDLES.clear()


def _after_last_assistant(items: list[Any]) -> tuple[list[Any], bool]:
    for position in range(len(items) - 1, -1, -1):
        if structured_role(items[position]) == "assistant":
            return items[position + 1 :], True
    return items, False
