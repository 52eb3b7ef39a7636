"""Patch a framework when the app imports it, never by importing it first (issue 29).

Contract::

    patch = on_import("agents", apply)   # apply(module) -> undo: now when the app imported it
                                         # already, else right after it does (a wrapt post-import hook)
    patch.state                          # PatchState.PENDING | APPLIED | FAILED | UNDONE
    patch.active                         # PENDING or APPLIED: installing again would patch twice
    patch.undo()                         # undo the applied patch, or cancel the pending one; idempotent

An instrumentor that imported its framework to patch it would make every process started by
``opentelemetry-instrument`` pay for importing every framework installed (seconds each), whether
the app uses it or not. ``apply`` runs at most once per patch; what it raises is logged once and
never fails the app's import (the framework then runs unrecorded). wrapt cannot remove a hook:
a cancelled one stays registered and does nothing when its module is imported.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from enum import Enum
from types import ModuleType

import wrapt

from otel_session.instrument._log import warn_once

__all__ = ["PatchState", "PendingPatch", "on_import"]

Undo = Callable[[], None]


class PatchState(Enum):
    PENDING = "pending"
    """Waiting for the app to import the module."""
    APPLIED = "applied"
    FAILED = "failed"
    """``apply`` raised (logged once); nothing to undo."""
    UNDONE = "undone"
    """Undone, or cancelled before the module was imported."""


class PendingPatch:
    """One framework patch, applied when its module is imported (see the module docstring)."""

    def __init__(self, module: str, apply: Callable[[ModuleType], Undo]) -> None:
        self.module = module
        self.state = PatchState.PENDING
        self._apply = apply
        self._undo: Undo | None = None
        self._lock = threading.RLock()

    @property
    def active(self) -> bool:
        return self.state in (PatchState.PENDING, PatchState.APPLIED)

    def imported(self, module: ModuleType) -> None:
        """The post-import hook: apply the patch, unless it was cancelled (or applied) already."""
        with self._lock:
            if self.state is not PatchState.PENDING:
                return
            try:
                self._undo = self._apply(module)
                self.state = PatchState.APPLIED
            except Exception:  # noqa: BLE001 - never fail the app's import
                self.state = PatchState.FAILED
                warn_once(f"patch:{self.module}", "otel_session: could not instrument %s; it runs unrecorded",
                          self.module, exc_info=True)

    def undo(self) -> None:
        with self._lock:
            undo, self._undo = self._undo, None
            self.state = PatchState.UNDONE
            if undo is not None:
                undo()


def on_import(module: str, apply: Callable[[ModuleType], Undo]) -> PendingPatch:
    """A patch of ``module`` by ``apply``, applied now if the app imported it, else when it does."""
    patch = PendingPatch(module, apply)
    wrapt.register_post_import_hook(patch.imported, module)
    return patch
