"""What the framework instrumentors (``agents_sdk``, ``langgraph``) share.

* :class:`Opened`: an ``otel_session`` section (session, run, turn, message, tool execution)
  entered in a ``contextvars.Context`` of its own, because a framework reports the start and the
  end of a thing from different tasks or threads, where ``with`` cannot be used;
* :func:`replace_methods`: an instrumentor's wrappers set on a framework class, and put back.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Opened", "replace_methods"]


class Opened:
    """``section`` entered in a copy of ``parent`` (else of the current context)."""

    def __init__(self, parent: contextvars.Context | None, section: Any) -> None:
        self.context = parent.copy() if parent is not None else contextvars.copy_context()
        self.section = section
        self.handle = self.context.run(section.__enter__)

    def run(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call ``function`` inside this section (in a copy: what it opens stays independent)."""
        return self.context.copy().run(function, *args, **kwargs)

    def close(self, error: BaseException | None = None) -> None:
        self.context.run(self.section.__exit__, type(error) if error is not None else None, error, None)





def replace_methods(owner: type, wrappers: Mapping[str, Callable[..., Any]]) -> Callable[[], None]:
    """Set ``wrappers`` as methods of ``owner``; the function returned puts the originals back."""
    originals = {name: owner.__dict__[name] for name in wrappers}
    for name, wrapper in wrappers.items():
        setattr(owner, name, wrapper)

    def restore() -> None:
        for name, original in originals.items():
            setattr(owner, name, original)

    return restore
