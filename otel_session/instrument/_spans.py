"""The instrumentation's own span writing: a fast ``add_event`` for its own events, redacted errors.

Contract::

    add_event = event_adder(span)        # add_event(name, attributes, timestamp_ns)
    mark_error(span, exc, redactor)      # like span.record_exception, message and stack redacted
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import Event as _SdkEvent
from opentelemetry.trace import Status, StatusCode

from otel_session import semconv as sc
from otel_session.redact import Redactor

__all__ = ["event_adder", "mark_error"]


def event_adder(span: trace.Span) -> Callable[[str, dict[str, Any], int], None]:
    """``span.add_event`` for attributes this module built itself (known types, few keys).

    The SDK's ``add_event`` re-validates every attribute into a ``BoundedAttributes``; that is most
    of its cost. For our own events the values are already valid, so the event is appended as an
    immutable mapping directly. Falls back to the public ``add_event`` when the SDK's internals
    differ or an attribute length/count limit would have to be applied.
    """
    append = getattr(span, "_add_event", None)
    limits = getattr(span, "_limits", None)
    if (
        append is None
        or limits is None
        or limits.max_attribute_length is not None
        or (limits.max_event_attributes is not None and limits.max_event_attributes < 8)
    ):
        return lambda name, attributes, timestamp: span.add_event(name, attributes, timestamp=timestamp)

    def add_event(name: str, attributes: dict[str, Any], timestamp: int) -> None:
        append(_SdkEvent(name, MappingProxyType(attributes), timestamp))

    return add_event



def mark_error(span: trace.Span, exc: BaseException, redactor: Redactor) -> None:
    """Like ``span.record_exception``, but the message and stack trace are redacted first."""
    error_type = type(exc).__qualname__
    span.add_event(
        "exception",
        {
            "exception.type": error_type,
            "exception.message": redactor.text(str(exc)),
            "exception.stacktrace": redactor.text("".join(traceback.format_exception(exc))),
        },
    )
    span.set_attribute(sc.ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, error_type))

