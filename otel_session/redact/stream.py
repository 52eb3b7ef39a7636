"""Streaming redaction: one content block's deltas, redacted record by record (SPEC §6).

Contract::

    stream = redactor.delta_stream()            # one streamed content block
    stream.feed("mail jane@exa", 1)             # -> [] (held: the address may go on)
    stream.feed("mple.com now", 2)              # -> [(1, "mail [email]")] ("now" may go on)
    stream.flush()                              # -> [(2, " now")]: N deltas in, N records out

The released texts concatenate to ``redactor.text(whole)`` for any split: the stream cuts only
where the detectors' property (``detectors.CONTINUES_AFTER_SPACE``) makes the whole text scan the
same as its parts, and scans each part with the text before it as context. A part without any of
``detectors.TRIGGERS`` holds no detection: the common delta costs one match (its cut), no scan.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from otel_session.core.log import get_logger
from otel_session.redact.detectors import CONTINUES_AFTER_SPACE, TRIGGERS
from otel_session.redact.policy import REDACTED_ERROR, FieldMode

if TYPE_CHECKING:
    from otel_session.redact import Redactor

__all__ = ["DeltaStream"]

logger = get_logger(__name__)

# Where a streamed block may be cut: right after whitespace, before a character that no detection
# continues with across whitespace. No detection holds such a position, so the text scans the same
# whole or cut there.
_CUT = re.compile(f"(?<=\\s)[^\\s{CONTINUES_AFTER_SPACE}]")
_LAST_CUT = re.compile(r"(?s:.*)" + _CUT.pattern)
# A redaction token (``<redacted …>``, the only one holding whitespace) is at most this long: a
# position with an unclosed "<" this close before it may be inside one, and is no cut.
_TOKEN_SPAN = 80
_CONTEXT = 64  # the text before a part, for the patterns' look-behinds
# The fast path, one match a delta: a delta without a character a detection needs (``TRIGGERS``)
# or a token starts with, up to its last cut if it has one (else the match is empty).
_QUIET_CUT = re.compile(f"(?=[^{TRIGGERS}<]*+\\Z)(?:{_LAST_CUT.pattern})?").match

# A block that streams this many characters with no cut (text without spaces: Chinese or Japanese,
# JSON, code, a long URL) is cut anyway, where it scans the same whole as in its parts, at least
# _SAFE_SPAN characters before its end (longer than any detection can be): a live view lags, but
# not to the end of the block.
_MAX_HELD = 512
_SAFE_SPAN = 256
_FORCED_TRIES = 8

T = TypeVar("T")


class DeltaStream(Generic[T]):
    """One content block streamed in deltas, redacted record by record (``Redactor.delta_stream``).

    ``feed(chunk, item)`` takes one delta and returns the ``(item, redacted text)`` records now
    released; ``flush()`` releases the rest when the block ends. Every item fed is released exactly
    once, in feed order, with its own text redacted: text outside detections stays in its record,
    a detection spanning records is masked in the record where it starts (the others' share of it
    is dropped). The released texts concatenate to ``redactor.text(whole)`` for any split.

    In ``scan`` mode a record is held until a later delta shows a cut after it (see ``_CUT``: a
    word or number can no longer go on), so a live view lags by a token, never past the block's
    end; text that streams on with no such cut (no spaces) is cut once more than ``_MAX_HELD``
    characters wait, where it scans the same whole as in parts (``_forced_cut``). ``keep`` releases each record at once; ``mask``/``hash`` redact the whole block, so the
    block's records wait for ``flush`` (the first gets the token, the others ""). Not thread-safe
    (a block streams from one producer).
    """

    __slots__ = ("_before", "_cut", "_edits", "_length", "_mode", "_quiet", "_raw", "_records", "_redactor",
                 "_tail", "_trigger")

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._mode = redactor.policy.text
        self._edits = redactor._scanner.edits
        triggers = redactor._scanner.triggers
        self._trigger = re.compile(f"[{triggers}]").search if triggers is not None else None
        self._records: list[list[Any]] = []
        """Records not yet released, oldest first: [item, end offset in the block, redacted text so far]."""
        self._raw: list[str] = []
        """The block's raw text after the last cut (not yet scanned)."""
        self._cut = 0
        self._length = 0
        self._tail = ""
        """The block's last ``_TOKEN_SPAN`` characters before the newest delta."""
        self._before = ""
        """The block's last ``_CONTEXT`` characters before the last cut."""
        self._quiet = self._trigger is not None
        """Whether the raw text after the last cut holds none of the scanner's ``triggers``."""

    def feed(self, chunk: str, item: T) -> list[tuple[T, str]]:
        mode = self._mode
        if mode is FieldMode.KEEP:
            return [(item, chunk)]
        start = self._length
        length = self._length = start + len(chunk)
        if mode is not FieldMode.SCAN:
            self._records.append([item, length, ""])
            self._raw.append(chunk)
            return []
        tail = self._tail
        window = tail + chunk
        self._tail = window[-_TOKEN_SPAN:]
        cut = None
        if self._quiet and "<" not in window and (match := _QUIET_CUT(window, len(tail))) is not None:
            if (end := match.end()) > len(tail):  # the common case: a cut, nothing to scan
                return self._release_quiet(window, item, len(tail), end - 1)
        else:
            self._quiet = self._quiet and not self._trigger(chunk)  # type: ignore[misc]
            cut = self._last_cut(window, len(tail))
        self._records.append([item, length, ""])
        self._raw.append(chunk)
        if cut is None and length - self._cut > _MAX_HELD:
            cut = self._forced_cut()
            if cut is not None:
                return self._scan_to(cut)
        if cut is None:
            return self._released() if not chunk else []  # an empty delta after a cut goes at once
        return self._scan_to(start - len(tail) + cut)

    def flush(self) -> list[tuple[T, str]]:
        if self._mode is FieldMode.SCAN:
            return self._scan_to(self._length)
        records, self._records = self._records, []
        whole, self._raw = "".join(self._raw), []
        text = self._redactor.text(whole)
        return [(record[0], text if position == 0 else "") for position, record in enumerate(records)]

    @staticmethod
    def _last_cut(window: str, start: int) -> int | None:
        """The last cut in ``window[start:]`` (the newest delta), else None."""
        match = _LAST_CUT.search(window, start)
        if match is None:
            return None
        position = match.end() - 1
        if "<" not in window[max(0, position - _TOKEN_SPAN) : position]:
            return position  # the common case: no redaction token can hold it
        for match in reversed(list(_CUT.finditer(window, start))):
            position = match.start()
            before = window[max(0, position - _TOKEN_SPAN) : position]
            if before.rfind("<") <= before.rfind(">"):
                return position
        return None

    def _forced_cut(self) -> int | None:
        """A block offset, at least ``_SAFE_SPAN`` characters before the end of what is held, where
        the held text scans exactly as its two parts do (no detection crosses it, none appears or
        changes on either side, no redaction token holds it); None when the last tries find none."""
        raw = "".join(self._raw)
        context = self._before
        edits = self._edits
        try:
            whole = edits(context + raw, len(context))
        except Exception:  # noqa: BLE001 - keep holding: flush redacts (or replaces) it whole
            return None
        shift = len(context)
        whole = [(begin - shift, end - shift, token) for begin, end, token in whole]
        position = len(raw) - _SAFE_SPAN
        for _ in range(_FORCED_TRIES):
            if position <= 0:
                return None
            before = raw[max(0, position - _TOKEN_SPAN) : position]
            if before.rfind("<") <= before.rfind(">") and not any(begin < position < end for begin, end, _ in whole):
                left_context = context + raw[:position]
                right_context = left_context[-_CONTEXT:]
                left = [(b - shift, e - shift, t) for b, e, t in edits(left_context, shift)]
                right = [(b - len(right_context) + position, e - len(right_context) + position, t)
                         for b, e, t in edits(right_context + raw[position:], len(right_context))]
                if left + right == whole:
                    return self._cut + position
            position -= _CONTEXT
        return None

    def _release_quiet(self, window: str, item: T, start: int, cut: int) -> list[tuple[T, str]]:
        """``feed`` of the delta ``window[start:]`` with a cut at ``window[cut]`` where no detection
        can be (neither it nor the raw text after the last cut holds a trigger, no token is near):
        what ``_scan_to`` gives, without a scan or sharing out. The records pending end before the
        delta: each is released with its raw rest; the new record keeps its text up to the cut and
        waits."""
        raw = self._raw
        pending = raw[0] if len(raw) == 1 else "".join(raw)
        offset = begin = self._cut
        released = []
        for record in self._records:
            end = record[1]
            released.append((record[0], record[2] + pending[begin - offset : end - offset]))
            begin = end
        self._records = [[item, self._length, window[start:cut]]]
        self._raw = [window[cut:]]
        self._cut = self._length - len(window) + cut
        # The text before the cut: the tail (the block's last _TOKEN_SPAN characters) and the delta's head.
        self._before = window[max(0, cut - _CONTEXT) : cut]
        return released

    def _scan_to(self, cut: int) -> list[tuple[T, str]]:
        """Scan the raw text up to block offset ``cut``, share it out to its records, release those
        that end by ``cut``."""
        raw = "".join(self._raw)
        split = cut - self._cut
        segment, rest = raw[:split], raw[split:]
        self._raw = [rest] if rest else []
        self._quiet = self._trigger is not None and not self._trigger(rest)
        start, self._cut = self._cut, cut
        if segment:
            context = self._before + segment
            self._before = context[-_CONTEXT:]
            offset = len(context) - len(segment)
            try:
                edits = [(begin - offset, end - offset, token) for begin, end, token in self._edits(context, offset)]
            except Exception:  # noqa: BLE001 - never release a segment unredacted
                logger.warning("redaction of a delta failed; its text was replaced", exc_info=True)
                edits = [(0, len(segment), REDACTED_ERROR)]
            self._share_out(segment, start, edits)
        return self._released()

    def _share_out(self, segment: str, start: int, edits: list[tuple[int, int, str]]) -> None:
        """Append to each pending record its share of ``segment`` (at block offset ``start``, which
        every pending record ends after), redacted by ``edits``: sorted, disjoint
        ``(start, end, replacement)`` in segment offsets."""
        records = self._records
        size = len(segment)
        index = cursor = 0
        for edit_start, edit_end, replacement in [*edits, (size, size, "")]:
            while cursor < edit_start:  # text outside detections: to the records it came from
                end = min(edit_start, records[index][1] - start)
                if end > cursor:
                    records[index][2] += segment[cursor:end]
                    cursor = end
                if cursor < edit_start:
                    index += 1
            if edit_start < size:  # a detection: its token to the record where it starts
                while records[index][1] - start <= edit_start:
                    index += 1
                records[index][2] += replacement
                cursor = edit_end

    def _released(self) -> list[tuple[T, str]]:
        records = self._records
        cut = self._cut
        if not records or records[0][1] > cut:
            return []
        count = 1
        while count < len(records) and records[count][1] <= cut:
            count += 1
        released = [(record[0], record[2]) for record in records[:count]]
        del records[:count]
        return released
