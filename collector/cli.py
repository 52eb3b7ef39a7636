"""``otel-session collect`` and ``otel-session import`` (registered on the main CLI group)."""

from __future__ import annotations

import errno
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from otel_session.core import config
from otel_session.collector.options import SETTINGS, CollectorOptions, parse_address
from otel_session.core.log import redact_root_handlers
from otel_session.core.stop_signal import StopSignal

__all__ = ["collect", "import_command"]


def _option(flag: str, name: str, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A ``collect`` option for the setting ``name``: its help, default and variable from ``SETTINGS``."""
    setting = SETTINGS[name]
    default = "off" if setting.default is None else setting.default
    return click.option(flag, name, default=None, help=f"{setting.help} [default: {default}; ${setting.env}]", **kwargs)


_SECONDS = {"type": click.FloatRange(min=0), "metavar": "SECONDS"}


def _parse_bytes(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    try:
        return None if value is None else SETTINGS[param.name].parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


_BYTES = {"metavar": "BYTES", "callback": _parse_bytes}


@click.command()
@config.bundle_dir_option
@_option("--grpc", "grpc_address", metavar="HOST:PORT")
@_option("--http", "http_address", metavar="HOST:PORT")
@_option("--forward", "forward", metavar="URL")
@_option("--forward-protocol", "forward_protocol", type=click.Choice(["http/protobuf", "grpc"]))
@_option("--forward-queue-bytes", "forward_queue_bytes", type=click.IntRange(min=0), metavar="BYTES")
@click.option("--forward-raw", is_flag=True, default=None,
              help=f"{SETTINGS['forward_redacted'].help} [${SETTINGS['forward_redacted'].env}]")
@_option("--seal-after", "seal_after_s", **_SECONDS)
@_option("--seal-rootless-after", "seal_rootless_after_s", **_SECONDS)
@_option("--hold-unrouted", "hold_unrouted_s", **_SECONDS)
@_option("--hold-logs", "hold_logs_s", **_SECONDS)
@_option("--http-header-timeout", "http_header_timeout_s", **_SECONDS)
@_option("--http-connection-limit", "http_connection_limit", type=click.IntRange(min=1), metavar="N")
@_option("--shutdown-timeout", "shutdown_timeout_s", **_SECONDS)
@_option("--max-held-bytes", "max_held_bytes", **_BYTES)
@_option("--max-queued-bytes", "max_queued_bytes", **_BYTES)
@_option("--max-run-queue-bytes", "max_run_queue_bytes", **_BYTES)
@_option("--status-interval", "status_interval_s", type=click.FloatRange(min=0.1), metavar="SECONDS")
@_option("--store", "store", metavar="s3://BUCKET[/PREFIX]")
@_option("--max-unstored-bytes", "max_unstored_bytes", **_BYTES)
@_option("--claim-lease", "claim_lease_s", **_SECONDS)
@click.option("--keep-local", "keep_local", is_flag=True, default=None,
              help=f"{SETTINGS['keep_local'].help} [${SETTINGS['keep_local'].env}]")
@click.option("--span-records/--no-span-records", "span_records", default=None,
              help=f"{SETTINGS['span_records'].help} [default: off; ${SETTINGS['span_records'].env}]")
def collect(bundle_root: Path | None, forward_raw: bool | None, **given: Any) -> None:
    """Receive OTLP traces from any service and record them as redacted run bundles.

    One trace is one run. GenAI message log events sent as OTLP logs join the spans they belong to.
    Every option also reads an OTEL_SESSION_* environment variable (docs/collector.md); the flag
    wins. Stops cleanly on SIGTERM/SIGINT: in-flight requests finish, open runs are sealed (as
    interrupted when their root span never arrived), within --shutdown-timeout whatever the disk
    does (exit 1 when the time ran out: runs not sealed are left for the next collector to resume).
    Raises the soft open-files limit to the hard one. Prometheus counters: GET /metrics on --http.
    """
    from otel_session.collector.server import Collector, ListenError, Stopped, raise_open_files_limit, settle_heap_for_serving

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    redact_root_handlers()
    root = config.bundle_dir(bundle_root)
    raise_open_files_limit()
    values = {name: value for name, value in given.items() if value is not None}
    for name in ("grpc_address", "http_address"):
        if name in values:
            values[name] = parse_address(values[name])
    if forward_raw:
        values["forward_redacted"] = False
    try:
        options = CollectorOptions().with_values(**values)
        collector = Collector(root, options)
        collector.start()
    except ListenError as exc:
        busy = " (is another collector running?)" if exc.errno == errno.EADDRINUSE else ""
        raise click.ClickException(
            f"{exc}{busy}; choose another with {exc.flag} HOST:PORT (or ${SETTINGS[exc.setting].env}), "
            f"or {exc.flag} off"
        ) from None
    except (OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    stop = StopSignal().install()  # for the rest of the process: SIGTERM/SIGINT stop the collector
    settle_heap_for_serving()
    forwarding = (
        f", forwarding to {collector.forwarder.url} over {options.forward_protocol} "
        f"({'redacted' if options.forward_redacted else 'raw'})" if collector.forwarder is not None else ""
    )
    click.echo(
        f"otel-session collector: grpc={_shown(options.grpc_address, collector.grpc_port)} "
        f"http={_shown(options.http_address, collector.http_port)} dir={root}{forwarding}"
    )
    sys.stdout.flush()
    stop.wait()
    stopped = collector.stop()
    if stopped is not Stopped.CLEAN:
        why = "timed out" if stopped is Stopped.TIMED_OUT else "failed"
        click.echo(f"otel-session collector stopped (shutdown {why}): {collector.counters.status_line()}")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)  # a thread is blocked in the disk: no interpreter exit (atexit, joins) waits for it
    click.echo(f"otel-session collector stopped: {collector.counters.status_line()}")


def _shown(address: str | None, port: int | None) -> str:
    return "off" if address is None or port is None else f"{address.rpartition(':')[0]}:{port}"


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@config.bundle_dir_option
def import_command(files: tuple[Path, ...], bundle_root: Path | None) -> None:
    """Import OTLP JSON lines files (OpenTelemetry Collector file exporter format) as bundles.

    Idempotent: runs already imported are sealed and left unchanged. Exit 1 when a line was
    malformed or spans were rejected (the rest is still imported).
    """
    from otel_session.collector.importer import import_files
    from otel_session.collector.server import default_redactor

    root = config.bundle_dir(bundle_root)
    total = sum(path.stat().st_size for path in files)
    with click.progressbar(length=total, label="importing", file=sys.stderr) as bar:
        report = import_files(files, root, redactor=default_redactor(root), progress=bar.update)
    click.echo(
        f"{report.spans} spans: {len(report.runs_written)} run(s) written, "
        f"{len(report.runs_already_imported)} already imported"
        + (" (left unchanged: importing a file again changes nothing)" if report.runs_already_imported else "")
        + (f" ({report.runs_session_derived} named no session: each recorded as a session of its own)"
           if report.runs_session_derived else "")
    )
    if report.log_events:
        click.echo(f"{report.log_events} GenAI log event(s), {report.log_events_unmatched} without their span")
    for problem in report.errors + report.rejected:
        click.echo(f"Error: {problem}", err=True)
    sys.exit(0 if report.ok else 1)
