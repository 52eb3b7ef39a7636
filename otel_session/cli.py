"""The ``otel-session`` command line."""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import click
import orjson

from otel_session.core import config
from otel_session.bundle.archive import is_bundle_archive, read_bundle_archive
from otel_session.cli_replay import facts, replay
from otel_session.collector.cli import collect, import_command
from otel_session.demo.commands import demo
from otel_session.replay.listing import ListedRun
from otel_session.bundle.read import BundleRead, BundleStatus, find_bundles, iter_run_dirs, read_bundle
from otel_session.viewer.serve import view


def _echo_json(value: object) -> None:
    click.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="otel-session")
def main() -> None:
    """Record, verify, inspect and replay conversational agent runs."""


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of one line per bundle.")
@click.option("--allow-recording", is_flag=True, help="Accept bundles whose capture is still recording.")
@click.option("--strict", is_flag=True, help="Fail on warnings too (torn tail, upstream drops).")
def verify(paths: tuple[Path, ...], as_json: bool, allow_recording: bool, strict: bool) -> None:
    """Check the integrity of bundles at or below PATHS, or in tar archives (the viewer's download).

    Exit 0 when every bundle is complete (or recording, with --allow-recording), 1 otherwise.
    """
    results: list[BundleRead] = []
    for path in paths:
        if is_bundle_archive(path):
            results += read_bundle_archive(path)
        else:
            results += [read_bundle(found) for found in find_bundles([path])]
    if as_json:
        _echo_json([result.as_json() for result in results])
    else:
        for result in results:
            click.echo(_verify_line(result))
        if not results:
            click.echo("Error: no bundles found under " + ", ".join(map(str, paths)), err=True)
    accepted = {BundleStatus.COMPLETE} | ({BundleStatus.RECORDING} if allow_recording else set())
    ok = bool(results) and all(
        result.status in accepted and not (strict and result.has_warnings) for result in results
    )
    sys.exit(0 if ok else 1)


def _verify_line(result: BundleRead) -> str:
    line = f"{result.status.value:<9} {len(result.events):>7} events  {result.path}"
    details = "; ".join(f"{d.severity.value} {d.code.value}: {d.message}" for d in result.diagnostics)
    return f"{line}  ({details})" if details else line


@main.command()
@config.bundle_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--evals", is_flag=True, help="Include eval runs (never part of the live index).")
def sessions(bundle_root: Path | None, as_json: bool, evals: bool) -> None:
    """List sessions and their runs, newest first, each with its integrity (as ``verify`` reads it).

    A run whose ``run.json`` cannot be read is listed too, under its session directory.
    """
    problem = config.missing_bundle_dir(bundle_root)
    if problem:
        raise click.ClickException(problem)
    root = config.bundle_dir(bundle_root)
    by_session: dict[str, list[ListedRun]] = defaultdict(list)
    for path in iter_run_dirs(root, include_evals=evals):
        run = ListedRun.of(path, root)
        by_session[run.session_key].append(run)
    for runs in by_session.values():
        runs.sort(key=lambda run: (run.created_at, run.run_id), reverse=True)
    ordered = sorted(by_session.items(), key=lambda item: item[1][0].created_at, reverse=True)
    if as_json:
        _echo_json([{"session_id": runs[0].session_id, "runs": [run.as_json() for run in runs]} for _, runs in ordered])
        return
    if not ordered:
        click.echo(f"no sessions under {root}")
    for session_key, runs in ordered:
        click.echo(session_key)
        for run in runs:
            click.echo(f"  {run.run_id}  {run.kind:<4}  {run.created_at or '?':<27}  {run.status_text}")


for command in (collect, import_command, facts, replay, view, demo):
    main.add_command(command)

if __name__ == "__main__":  # pragma: no cover
    main()
