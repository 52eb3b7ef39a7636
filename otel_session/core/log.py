"""Log lines: every record of ours is redacted before any handler formats it (SPEC §6, issue 15).

Contract::

    logger = get_logger(__name__)            # the one way a module of ours makes a logger
    logger.warning("capture of %s failed: %s", log_id(session_id), exc)   # ids marked, the rest scanned
    get_logger("werkzeug")                   # a third-party logger whose lines name our ids: redacted too
    redact_root_handlers()                   # after a CLI's basicConfig: every line its handlers print
    redact_with(factory)                     # the redactor, asked per record (set by ``otel_session.redact``)

A record's arguments are redacted by kind before it is formatted, and the record then carries only
the redacted message (``args`` empty):

- an id marked with :func:`log_id`, or a path (whose ids are stored ids already, component by
  component), by ``Redactor.identifier``: the form the bundle stores, as given under
  ``OTEL_SESSION_REDACT_IDENTIFIERS=keep``; a directory name that is an id's digest is kept;
- a setting the operator gave (marked with :func:`log_setting`: an address) as it is;
- a number by its digits (``Redactor.scan_value``: a card number as an int is masked);
- anything else (text, exceptions, reprs) as free text (``Redactor.text``), so a raw id nobody
  marked is masked, never printed; URL-encoded text is scanned decoded too (a request line).

A message without arguments is scanned whole, and so are the traceback (``exc_info``) and
``stack_info``; ``exc_info`` is dropped from the record once its redacted text is kept, so no
handler formats the raw exception again. A record that cannot be redacted keeps only its fixed
message text: a log line never raises and never prints a value raw. ``tests/hostile/test_log_lines.py``
fails on a module that makes a logger any other way (``logging.getLogger``, the root logger).

The redactor is the environment's policy (``OTEL_SESSION_REDACT_*``) with the key of
``OTEL_SESSION_REDACTION_KEY`` or one of this process's: the ids our lines name are stored ids
already, and ``Redactor.identifier`` leaves those as they are.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from otel_session.core.layout import is_encoded_dir_name

__all__ = ["LOG_UNREDACTABLE", "LogRedactor", "get_logger", "log_id", "log_setting", "redact_root_handlers", "redact_record", "redact_with"]

LOG_UNREDACTABLE = "<argument left out: it could not be redacted>"


class LogRedactor(Protocol):
    """What a log record's redaction needs of a ``Redactor``."""

    def identifier(self, value: str) -> str: ...
    def text(self, value: str) -> str: ...
    def scan_value(self, value: Any) -> Any: ...


class log_id(str):  # noqa: N801 - used like a function, at the call site
    """A log argument that is an id (session, run, eval): printed as ``Redactor.identifier`` gives it."""

    __slots__ = ()


class log_setting(str):  # noqa: N801
    """A log argument the operator configured (a listen or forward address): printed as given, so
    a line says which host it means (``127.0.0.1`` is an IPv4 address to the detectors)."""

    __slots__ = ()


_NUMBER_CONVERSION = re.compile(r"%((?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?)[diouxXeEfFgGc]")
_factory: Callable[[], LogRedactor] | None = None
_busy = threading.local()
_REDACTED = "_otel_session_redacted"


def redact_with(factory: Callable[[], LogRedactor]) -> None:
    """Take log records' redactor from ``factory`` (asked per record: it follows the environment)."""
    global _factory
    _factory = factory


def get_logger(name: str) -> logging.Logger:
    """The logger ``name`` (a module's ``__name__``), whose every record is redacted first."""
    logger = logging.getLogger(name)
    _add_filter(logger)
    return logger


def redact_root_handlers() -> None:
    """Redact every record the root logger's handlers emit (a CLI's ``basicConfig``): third-party
    lines (waitress, grpc) that reach them too."""
    for handler in logging.getLogger().handlers:
        _add_filter(handler)


def _add_filter(target: logging.Filterer) -> None:
    if redact_record not in target.filters:
        target.addFilter(redact_record)


def redact_record(record: logging.LogRecord) -> bool:
    """Redact ``record`` in place (once); always keeps it. A ``logging`` filter."""
    if getattr(record, _REDACTED, False):
        return True
    setattr(record, _REDACTED, True)
    nested = getattr(_busy, "on", False)
    _busy.on = True
    try:
        _redact(record, _factory() if _factory is not None and not nested else None)
    except Exception:  # noqa: BLE001 - a log line never raises; it keeps its fixed text only
        _leave_out(record)
    finally:
        _busy.on = nested
    return True


def _redact(record: logging.LogRecord, redactor: LogRedactor | None) -> None:
    if redactor is None:  # a line logged while the redactor is built: only its fixed text is kept
        _leave_out(record)
        return
    if record.args:
        record.msg = _format(record.msg, record.args, redactor)
    else:
        record.msg = _text(str(record.msg), redactor)
    record.args = ()
    if record.exc_info:
        record.exc_text = redactor.text(logging.Formatter().formatException(record.exc_info))
        record.exc_info = None
    elif record.exc_text:
        record.exc_text = redactor.text(record.exc_text)
    if record.stack_info:
        record.stack_info = redactor.text(record.stack_info)


def _leave_out(record: logging.LogRecord) -> None:
    template = record.msg if isinstance(record.msg, str) else type(record.msg).__name__
    record.msg = f"{template} ({LOG_UNREDACTABLE})" if record.args or record.exc_info else template
    record.args = ()
    record.exc_info = record.exc_text = record.stack_info = None


def _format(msg: object, args: Any, redactor: LogRedactor) -> str:
    if isinstance(args, Mapping) and "%(" in str(msg):  # named conversions: the keys are the template's
        redacted: Any = {key: _argument(value, redactor) for key, value in args.items()}
    elif isinstance(args, Mapping):  # one mapping logged with %s: keys and values printed, all scanned
        redacted = (_text(str(args), redactor),)
    else:
        redacted = tuple(_argument(value, redactor) for value in args)
    try:
        return str(msg) % redacted
    except (TypeError, ValueError):  # a number masked where %d stood: its token printed as text
        return _NUMBER_CONVERSION.sub(r"%\1s", str(msg)) % redacted


def _argument(value: Any, redactor: LogRedactor) -> Any:
    if isinstance(value, log_setting):
        return str(value)
    if isinstance(value, log_id):
        return redactor.identifier(str(value))
    if isinstance(value, os.PathLike):
        return _path(value, redactor)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return redactor.scan_value(value)
    return _text(value if isinstance(value, str) else str(value), redactor)


def _path(path: os.PathLike[Any], redactor: LogRedactor) -> str:
    """``path`` component by component, each by ``Redactor.identifier`` (a stored id is left as it
    is), except a directory name that is a digest of an id (``~`` and 40 hex digits): its digits
    may look like a card or phone number to the detectors, and it holds none."""
    parts = str(os.fspath(path)).split(os.sep)
    return os.sep.join(part if is_encoded_dir_name(part) else redactor.identifier(part) for part in parts)


def _text(text: str, redactor: LogRedactor) -> str:
    """``text`` scanned; URL-encoded text (a request line's path) is scanned decoded as well, and
    printed decoded and redacted when that finds something (``%2B1%20415…``, ``4532+0151+…``)."""
    if "%" in text:
        decoded = urllib.parse.unquote_plus(text)  # a query's "+" is a space: "4532+0151+…" is a card
        if decoded != text:
            redacted = redactor.text(decoded)
            if redacted != decoded:
                return redacted
    return redactor.text(text)
