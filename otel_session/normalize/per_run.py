"""State a run keeps while it is open, one instance per run, found by the run's own object.

Contract::

    class Links(PerRun): ...        # a class of per-run state (its ``__init__`` takes no argument)
    links = Links.of(run)           # the one kept for ``run`` (any object: a run handle), weakly held

Both paths keep such state: the collector's open run holds its instances as attributes; in
process, the span processor and the API find the run handle's with ``of``.
"""

from __future__ import annotations

import weakref
from typing import Any, ClassVar, TypeVar

__all__ = ["PerRun"]

_Self = TypeVar("_Self", bound="PerRun")


class PerRun:
    """A base class: ``of(owner)`` makes an instance on first use, gone with ``owner``."""

    __slots__ = ()
    _by_owner: ClassVar[weakref.WeakKeyDictionary[Any, Any]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._by_owner = weakref.WeakKeyDictionary()

    @classmethod
    def of(cls: type[_Self], owner: object) -> _Self:
        """The instance kept for ``owner``, made on first use and gone with ``owner``."""
        found = cls._by_owner.get(owner)
        if found is None:
            found = cls._by_owner.setdefault(owner, cls())
        return found
