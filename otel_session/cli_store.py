"""``--store`` on the reading commands (``sessions``, ``facts``, ``replay``, ``verify``, ``reindex``):
the runs of a bundle store, for a host with no bundles of its own.

Contract::

    @store_option                                   # --store s3://BUCKET[/PREFIX] (default: $OTEL_SESSION_STORE)
    store = open_cli_store(store_url)               # S3Store (None without one); --store checked at once
    with store_errors(): ...                        # StoreUnavailable as ``Error: …``, exit 1
    root = reading_root(bundle_root, store)         # the bundle root; with a store, made when missing
    fetched = fetched_runs(root, store, catalog_url)   # bundle.fetched.FetchedRuns; the catalog says where runs are

A bad URL is a usage error (exit 2), as on ``collect`` and ``view``; a store that cannot be used
(an unreachable endpoint, a missing bucket, refused credentials) is one line and exit 1: checked
before anything is read when given by ``--store``, when first used when it comes from
``$OTEL_SESSION_STORE`` (a command that reads only local bundles never waits on it). Runs fetched from the store are kept, checked, under
``<root>/.store-cache`` (bounded, least recently used out: ``$OTEL_SESSION_STORE_CACHE_BYTES``),
the viewer's cache.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import os
import sys

import click

from otel_session.catalog import CatalogError, open_catalog
from otel_session.core import config
from otel_session.core.config import ENV_STORE

if TYPE_CHECKING:
    from otel_session.bundle.fetched import FetchedRuns
    from otel_session.bundle.store import S3Store

__all__ = ["fetched_runs", "open_cli_store", "reading_root", "store_errors", "store_option"]

store_option = click.option(
    "--store", "store_url", default=None, metavar="s3://BUCKET[/PREFIX]",
    help=f"Read the runs kept in this bundle store too (default: ${ENV_STORE}).")


@contextmanager
def store_errors() -> Iterator[None]:
    """A store that cannot be used, as one line (exit 1)."""
    try:
        yield
    except Exception as exc:
        # Only the store's module raises StoreUnavailable: a command that never imported it (a list
        # from the catalog) does not import it here either.
        store = sys.modules.get("otel_session.bundle.store")
        if store is not None and isinstance(exc, store.StoreUnavailable):
            raise click.ClickException(str(exc)) from None
        raise


def open_cli_store(url: str | None) -> S3Store | None:
    """The store ``--store`` (else ``$OTEL_SESSION_STORE``) names; None when neither is set. One
    given by ``--store`` is checked to answer at once; one from the environment when first used
    (a local read never waits on a store it does not need)."""
    if not (url or os.environ.get(ENV_STORE, "").strip()):
        return None  # the store's module (tarfile, hashlib): only a command with a store pays for it
    from otel_session.bundle.store import BadStoreUrl, open_store

    try:
        store = open_store(url)
    except BadStoreUrl as exc:
        raise click.UsageError(str(exc)) from None
    if store is not None and url:
        with store_errors():
            store.check()
    return store


def reading_root(bundle_root: Path | None, store: S3Store | None) -> Path:
    """The bundle root; a missing one is an error unless a store is given: then it is made (0700),
    to hold the default catalog and the fetched copies."""
    problem = config.missing_bundle_dir(bundle_root)
    root = config.bundle_dir(bundle_root)
    if problem and store is None:
        raise click.ClickException(problem)
    if problem:
        from otel_session.bundle.files import make_private_dirs

        try:
            make_private_dirs(root, root)
        except OSError as exc:
            raise click.ClickException(f"{problem}, and it cannot be made: {exc}") from None
    return root


def fetched_runs(root: Path, store: S3Store, catalog_url: str | None) -> FetchedRuns:
    """The store's runs as the CLI reads them: where a session's runs are comes from the catalog."""
    from otel_session.bundle.fetched import FetchedRuns  # the redactor's keys: only a fetch needs them

    def stored_paths(session_id: str) -> list[str]:
        try:
            catalog = open_catalog(root, catalog_url)
            if catalog is None:
                return []
            try:
                return catalog.stored_paths(session_id)
            finally:
                catalog.close()
        except CatalogError as exc:
            raise click.ClickException(str(exc)) from None

    return FetchedRuns(store, root, stored_paths)
