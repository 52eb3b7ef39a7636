"""``otel-session sessions``: a page of sessions from the run catalog, as lines or JSON.

Contract::

    listed = list_sessions(root, query, url=None, runs_per_session=20)   # ListedSessions
    listed.lines()       # the text the command prints
    listed.as_json()     # [{"session_id", "directory", "run_count", "runs": [...]}]
    listed.warning       # why it was answered from a scan (None from the catalog)

Each run shows its integrity as ``verify`` reads it (``status``: complete, recording, failed,
invalid, with the diagnostic codes as ``problems``) and the catalog's columns (``outcome``, counts,
tokens, latency). A run whose ``run.json`` cannot be read is listed too, under its session
directory. A catalog made new here (none yet, another schema, a corrupt file) is filled from the
bundles first (and from a bundle store's runs, given one); one that cannot be used at all is
replaced by a scan, with a warning. A warm SQLite catalog is read with the standard library from
the statements SQLAlchemy compiled and stored in it (``catalog.direct``): a fresh process lists
without importing SQLAlchemy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from otel_session.catalog.direct import direct_sessions_page
from otel_session.catalog.model import CatalogError, RunQuery, RunRow, SessionsPage

if TYPE_CHECKING:
    from otel_session.bundle.store import BundleStore
    from otel_session.catalog.sql import SqlCatalog

__all__ = ["ListedSessions", "list_sessions", "run_entry"]


def run_entry(row: RunRow) -> dict[str, Any]:
    """A run as ``sessions --json`` shows it: ``status`` is its integrity, ``problems`` its diagnostic codes."""
    entry = row.as_json()
    entry.update(status=row.integrity, outcome=row.status, problems=list(row.diagnostics),
                 problem_details=list(row.problems))
    return entry


def _status_text(row: RunRow) -> str:
    return f"{row.integrity} ({', '.join(row.diagnostics)})" if row.diagnostics else row.integrity


@dataclass(frozen=True)
class ListedSessions:
    root: Path
    page: SessionsPage
    limited: bool
    warning: str | None = None

    def as_json(self) -> list[dict[str, Any]]:
        return [{"session_id": group.session_id, "directory": group.directory, "run_count": group.run_count,
                 "runs": [run_entry(row) for row in group.runs]} for group in self.page.sessions]

    def lines(self) -> list[str]:
        if not self.page.sessions:
            return [f"no sessions under {self.root}"]
        lines = []
        for group in self.page.sessions:
            for key in dict.fromkeys(row.session_key for row in group.runs):  # runs without run.json: apart
                lines.append(key)
                lines += [f"  {row.run_id}  {row.kind:<4}  {row.created_at or '?':<27}  {_status_text(row)}"
                          for row in group.runs if row.session_key == key]
            if group.run_count > len(group.runs):
                lines.append(f"  … {group.run_count - len(group.runs)} older run(s)")
        if self.limited and self.page.next_cursor is not None:
            lines.append(f"(the newest {len(self.page.sessions)} sessions; --limit N or --all for more)")
        return lines


def _page(catalog: SqlCatalog, root: Path, query: RunQuery, runs_per_session: int) -> SessionsPage:
    """The page, each run shown with its figures counted (``complete_rows``: pending ones read now)."""
    from otel_session.catalog.sync import complete_rows

    page = catalog.sessions_page(query, runs_per_session=runs_per_session)
    rows = iter(complete_rows(catalog, root, [row for group in page.sessions for row in group.runs]))
    return replace(page, sessions=[replace(group, runs=[next(rows) for _ in group.runs]) for group in page.sessions])


def _from_store(fill: Callable[[], object]) -> str | None:
    """``fill()`` (rows from the store's runs); why the store's runs are not listed, else None (a
    store that is down never stops a list of the local runs)."""
    from otel_session.bundle.store import StoreUnavailable

    try:
        fill()
    except StoreUnavailable as exc:
        return f"the store's runs are not listed: {exc}"
    return None


def _fill_from_store(root: Path, url: str | None, store: BundleStore) -> None:
    """The store's rows, under the store's origin (``catalog.stored``)."""
    from otel_session.catalog import open_catalog
    from otel_session.catalog.stored import reindex_store, store_origin

    catalog = open_catalog(root, url, origin=store_origin(store))
    try:
        reindex_store(catalog, store)
    finally:
        catalog.close()


def list_sessions(root: Path, query: RunQuery, *, url: str | None = None, runs_per_session: int = 20,
                  limited: bool = True, store: BundleStore | None = None) -> ListedSessions:
    """The sessions page ``query`` selects (``limited``: it says when more are left). With a
    ``store``, a catalog made new here is filled from the store's runs too (and so is a scan).
    Read with the standard library from the catalog's stored statements where they answer
    (``catalog.direct``: no SQLAlchemy imported), else through SQLAlchemy."""
    page = direct_sessions_page(root, query, url=url, runs_per_session=runs_per_session)  # a catalog to fill: None
    if page is not None:
        return ListedSessions(root, page, limited)
    from otel_session.catalog import catch_up, open_catalog, scan_catalog
    from otel_session.catalog.stored import reindex_store
    from otel_session.catalog.sync import complete_pending

    try:
        catalog = open_catalog(root, url)
        if catalog is not None:
            try:
                store_warning = None
                if catalog.rebuilt:
                    catch_up(catalog, root)
                    if store is not None:
                        store_warning = _from_store(lambda: _fill_from_store(root, url, store))
                complete_pending(catalog, root)  # runs sealed since the last pass: filters see their figures
                return ListedSessions(root, _page(catalog, root, query, runs_per_session), limited, store_warning)
            finally:
                catalog.close()
        warning = "the catalog is turned off ($OTEL_SESSION_CATALOG=off): every bundle was read"
    except CatalogError as exc:
        if isinstance(exc, ValueError):  # BadQuery: the caller's to report
            raise
        warning = f"the catalog is unusable ({exc}): every bundle was read"
    scanned = scan_catalog(root)
    if store is not None:
        warning = "; ".join(filter(None, [warning, _from_store(lambda: reindex_store(scanned, store))]))
    try:
        return ListedSessions(root, _page(scanned, root, query, runs_per_session), limited, warning)
    finally:
        scanned.close()
