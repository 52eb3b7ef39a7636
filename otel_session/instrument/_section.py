"""The section base: a context manager that is also a decorator, and how labels become text.

Contract::

    class turn(Section): ...           # ``with turn(0): ...`` or ``@turn(0)`` on a sync/async function
    Nothing(("finish",), index=None)   # what a section yields when it records nothing
    label(State.ASK) == "ask"          # an Enum member by its value, anything else as str; None stays None
    labels([State.ASK, "x"]) == ["ask", "x"]
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Sequence
from enum import Enum
from typing import Any, TypeVar

__all__ = ["F", "Nothing", "Section", "label", "labels"]

F = TypeVar("F", bound=Callable[..., Any])


def label(value: Any) -> Any:
    """A state, name, role or source as text (Enum members by their value); None stays None."""
    if value is None or type(value) is str:
        return value
    if isinstance(value, Enum):
        value = value.value
    return str(value)


def labels(values: Sequence[Any] | None) -> list[str]:
    return [label(value) for value in values or ()]


class Section:
    """A context manager that is also a decorator (sync or async); each call gets a fresh section."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._init_args = (args, kwargs)

    def _fresh(self) -> Section:
        args, kwargs = self._init_args
        return type(self)(*args, **kwargs)

    def __call__(self, function: F) -> F:
        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                with self._fresh():
                    return await function(*args, **kwargs)

            return run_async  # type: ignore[return-value]

        @functools.wraps(function)
        def run_sync(*args: Any, **kwargs: Any) -> Any:
            with self._fresh():
                return function(*args, **kwargs)

        return run_sync  # type: ignore[return-value]



class Nothing:
    """What a section yields when it records nothing (outside a run, recording off or failed): a
    handle's ``methods``, each doing nothing, and its ids as the given ``attributes`` (None)."""

    def __init__(self, methods: Iterable[str] = (), **attributes: Any) -> None:
        for name in methods:
            setattr(self, name, _do_nothing)
        self.__dict__.update(attributes)


def _do_nothing(*args: Any, **kwargs: Any) -> None:
    return None
