"""The ``otel-session`` command line."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
import orjson

from otel_session.core import config
from otel_session.catalog import (
    ENV_CATALOG, BadQuery, CatalogError, RunQuery, Scope, StatusFilter, open_catalog, time_prefix,
)
from otel_session.cli_store import open_cli_store, reading_root, store_errors, store_option

if TYPE_CHECKING:
    from otel_session.bundle.read import BundleRead
    from otel_session.bundle.store import S3Store
    from otel_session.catalog.sync import Reindexed


def _echo_json(value: object) -> None:
    click.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())


class LazyGroup(click.Group):
    """Subcommands imported when run (or listed by ``--help``): a command pays only for its own
    imports (the collector's gRPC, the viewer's Flask, the demo are not loaded by ``sessions``)."""

    LAZY = {
        "collect": "otel_session.collector.cli:collect",
        "import": "otel_session.collector.cli:import_command",
        "facts": "otel_session.cli_replay:facts",
        "replay": "otel_session.cli_replay:replay",
        "export-html": "otel_session.cli_replay:export_html",
        "view": "otel_session.viewer.serve:view",
        "demo": "otel_session.demo.commands:demo",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.LAZY and cmd_name not in self.commands:
            module, _, name = self.LAZY[cmd_name].partition(":")
            self.add_command(getattr(importlib.import_module(module), name), cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="otel-session")
def main() -> None:
    """Record, verify, inspect and replay conversational agent runs."""


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@store_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of one line per bundle.")
@click.option("--allow-recording", is_flag=True, help="Accept bundles whose capture is still recording.")
@click.option("--strict", is_flag=True, help="Fail on warnings too (torn tail, upstream drops).")
def verify(paths: tuple[Path, ...], store_url: str | None, as_json: bool, allow_recording: bool, strict: bool) -> None:
    """Check the integrity of bundles at or below PATHS, or in tar archives (the viewer's download),
    and with --store (or with no PATHS and $OTEL_SESSION_STORE) of every run in the store, each
    fetched and checked (size and checksum), shown by its location.

    Exit 0 when every bundle is complete (or recording, with --allow-recording), 1 otherwise.
    """
    from otel_session.bundle.archive import is_bundle_archive, read_bundle_archive  # tarfile: verify's own
    from otel_session.bundle.fetched import read_stored
    from otel_session.bundle.read import BundleStatus, find_bundles, read_bundle

    store = open_cli_store(store_url) if store_url or not paths else None
    if not paths and store is None:
        raise click.UsageError("Missing argument 'PATHS...' (or --store s3://BUCKET[/PREFIX]).")
    results: list[tuple[str, BundleRead]] = []
    for path in paths:
        if is_bundle_archive(path):
            results += [(str(result.path), result) for result in read_bundle_archive(path)]
        else:
            results += [(str(found), read_bundle(found)) for found in find_bundles([path])]
    if store is not None:
        with store_errors():
            results += [(store.location(relative), result) for relative, result in read_stored(
                store, store.list_runs(), lambda _scratch, path: read_bundle(path))]
    if as_json:
        _echo_json([{**result.as_json(), "path": shown} for shown, result in results])
    else:
        for shown, result in results:
            click.echo(_verify_line(result, shown))
        if not results:
            where = [*map(str, paths), *([store.url] if store is not None else [])]
            click.echo("Error: no bundles found under " + ", ".join(where), err=True)
    accepted = {BundleStatus.COMPLETE} | ({BundleStatus.RECORDING} if allow_recording else set())
    ok = bool(results) and all(
        result.status in accepted and not (strict and result.has_warnings) for _, result in results
    )
    sys.exit(0 if ok else 1)


def _verify_line(result: BundleRead, shown: str) -> str:
    line = f"{result.status.value:<9} {len(result.events):>7} events  {shown}"
    details = "; ".join(f"{d.severity.value} {d.code.value}: {d.message}" for d in result.diagnostics)
    return f"{line}  ({details})" if details else line


_catalog_option = click.option(
    "--catalog", "catalog_url", default=None, metavar="URL",
    help=f"The run catalog (default: ${ENV_CATALOG}, else SQLite in the bundle root; 'off' reads every bundle).")


def _time_option(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    try:
        return time_prefix(f"--{param.name}", value) if value else None
    except BadQuery as exc:
        raise click.BadParameter(str(exc)) from None


@main.command()
@config.bundle_dir_option
@_catalog_option
@store_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 100_000), help="Sessions to show, newest first.")
@click.option("--all", "show_all", is_flag=True, help="Show every session.")
@click.option("--runs", "runs_per_session", default=20, show_default=True, type=click.IntRange(1, 100_000),
              help="Runs to show per session, newest first.")
@click.option("--agent", default=None, help="Only runs of this agent.")
@click.option("--status", type=click.Choice([status.value for status in StatusFilter]), default=None,
              help="Only runs with this outcome (capture_failed: a failed capture or an invalid bundle).")
@click.option("--since", default=None, callback=_time_option, help="Only runs created from this time (2026-11-30T10:00).")
@click.option("--eval", "eval_id", default=None, help="Only the runs of this eval.")
@click.option("--evals", is_flag=True, help="Include eval runs (never part of the live index).")
@click.option("--search", default=None, help="Only runs whose ids, agent or message text hold this (any case).")
def sessions(bundle_root: Path | None, catalog_url: str | None, store_url: str | None, as_json: bool, limit: int, show_all: bool,
             runs_per_session: int, agent: str | None, status: str | None, since: str | None, eval_id: str | None,
             evals: bool, search: str | None) -> None:
    """List sessions and their runs, newest first, from the run catalog, each run with its
    integrity (as ``verify`` reads it). A run whose ``run.json`` cannot be read is listed too,
    under its session directory. With --store, a host with no bundles lists the store's runs (a
    catalog made new here is filled from the store; ``reindex --store`` brings it up to date)."""
    from otel_session.replay.listing import list_sessions  # the SQL library: not every command's

    store = open_cli_store(store_url)
    root = reading_root(bundle_root, store)
    query = RunQuery(
        agent=agent, status=StatusFilter(status) if status else None, since=since, eval_id=eval_id,
        search=search, scope=None if evals or eval_id else Scope.LIVE, limit=10**9 if show_all else limit,
        with_total=False,
    )
    with store_errors():
        listed = list_sessions(root, query, url=catalog_url, runs_per_session=runs_per_session, limited=not show_all,
                               store=store)
    if listed.warning:
        click.echo(f"warning: {listed.warning}", err=True)
    if as_json:
        _echo_json(listed.as_json())
    else:
        click.echo("\n".join(listed.lines()))


@main.command()
@config.bundle_dir_option
@_catalog_option
@store_option
def reindex(bundle_root: Path | None, catalog_url: str | None, store_url: str | None) -> None:
    """Rebuild the run catalog from the bundles under --dir (the bundles are the truth), and with
    --store from every run in the store (the bucket listed, each bundle read): the store's rows."""
    from otel_session.catalog.sync import reindex as catalog_reindex, run_paths  # the bundle reader: reindex's own

    store = open_cli_store(store_url)
    root = reading_root(bundle_root, store)
    try:
        catalog = open_catalog(root, catalog_url)
    except CatalogError as exc:
        raise click.ClickException(str(exc)) from None
    if catalog is None:
        raise click.ClickException("the catalog is turned off (--catalog off or $OTEL_SESSION_CATALOG=off)")
    try:
        total = sum(1 for _ in run_paths(root))
        try:
            catalog.clear()
        except CatalogError as exc:  # a malformed database: the bundles are the truth, make it new
            click.echo(f"warning: {exc}; making the catalog new", err=True)
            catalog.make_new()
        with click.progressbar(length=total, label="indexing runs", file=sys.stderr) as bar:
            result = catalog_reindex(catalog, root, progress=bar.update)
        if store is not None:
            result = _reindex_store(root, catalog_url, store, result)
    except CatalogError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        catalog.close()
    rate = result.runs / result.seconds if result.seconds else 0.0
    click.echo(f"indexed {result.runs} run(s) in {result.seconds:.1f} s ({rate:,.0f} runs/s) into {catalog.shown_url}")


def _reindex_store(root: Path, catalog_url: str | None, store: S3Store, local: Reindexed) -> Reindexed:
    """The store's rows rebuilt after the root's (``catalog.stored``); both counted in one result."""
    from otel_session.catalog.stored import reindex_store, store_origin
    from otel_session.catalog.sync import Reindexed

    stored = open_catalog(root, catalog_url, origin=store_origin(store))
    try:
        with store_errors():
            relatives = list(store.list_runs())
            with click.progressbar(length=len(relatives), label=f"indexing {store.url}", file=sys.stderr) as bar:
                result = reindex_store(stored, store, progress=bar.update, relatives=relatives)
    finally:
        stored.close()
    return Reindexed(local.runs + result.runs, local.seconds + result.seconds)


if __name__ == "__main__":  # pragma: no cover
    main()
