"""``otel-session collect`` and ``otel-session import`` (registered on the main CLI group)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from otel_session import config
from otel_session.stop_signal import StopSignal

__all__ = ["collect", "import_command"]



def _address(value: str) -> str | None:
    return None if value.lower() in ("", "off", "none") else value


@click.command()
@config.bundle_dir_option
@click.option("--grpc", "grpc_address", default="127.0.0.1:4317", show_default=True,
              help="OTLP/gRPC listen address (HOST:PORT; port 0 picks one; 'off' disables).")
@click.option("--http", "http_address", default="127.0.0.1:4318", show_default=True,
              help="OTLP/HTTP listen address for POST /v1/traces and /v1/logs ('off' disables).")
@click.option("--forward", metavar="URL", default=None,
              help="Also send everything received to this OTLP endpoint (e.g. http://127.0.0.1:6006; see --forward-protocol).")
@click.option("--forward-protocol", type=click.Choice(["http/protobuf", "grpc"]), default="http/protobuf",
              show_default=True, help="OTLP protocol of --forward (grpc: http://HOST:4317, or https:// for TLS).")
@click.option("--forward-raw", is_flag=True,
              help="Forward payloads unredacted (default: redacted with the bundle redaction policy).")
@click.option("--seal-after", type=click.FloatRange(min=0), default=10.0, show_default=True, metavar="SECONDS",
              help="Seal a run this long after its root span arrived and nothing else did.")
@click.option("--seal-rootless-after", type=click.FloatRange(min=0), default=3600.0, show_default=True,
              metavar="SECONDS", help="Seal a run whose root span never arrived (as interrupted) after this long quiet.")
@click.option("--hold-logs", type=click.FloatRange(min=0), default=300.0, show_default=True, metavar="SECONDS",
              help="How long GenAI log events wait for their span before they are counted unmatched.")
@click.option("--status-interval", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
              metavar="SECONDS", help="How often the counters status line is logged.")
def collect(
    bundle_root: Path | None,
    grpc_address: str,
    http_address: str,
    forward: str | None,
    forward_protocol: str,
    forward_raw: bool,
    seal_after: float,
    seal_rootless_after: float,
    hold_logs: float,
    status_interval: float,
) -> None:
    """Receive OTLP traces from any service and record them as redacted run bundles.

    One trace is one run. GenAI message events sent as OTLP logs join the spans they belong to. Stops cleanly on SIGTERM/SIGINT: in-flight requests finish, open runs
    are sealed (as interrupted when their root span never arrived).
    """
    from otel_session.collector.server import Collector

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    root = config.bundle_dir(bundle_root)
    try:
        collector = Collector(
            root,
            grpc_address=_address(grpc_address),
            http_address=_address(http_address),
            forward=forward,
            forward_redacted=not forward_raw,
            forward_protocol=forward_protocol,
            seal_after_s=seal_after,
            seal_rootless_after_s=seal_rootless_after,
            hold_logs_s=hold_logs,
            status_interval_s=status_interval,
        )
        collector.start()
    except (OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    stop = StopSignal().install()  # for the rest of the process: SIGTERM/SIGINT stop the collector
    forwarding = (f", forwarding to {collector.forwarder.url} over {forward_protocol} ({'redacted' if not forward_raw else 'raw'})"
                  if forward else "")
    click.echo(
        f"otel-session collector: grpc={_shown(grpc_address, collector.grpc_port)} "
        f"http={_shown(http_address, collector.http_port)} dir={root}{forwarding}"
    )
    sys.stdout.flush()
    stop.wait()
    collector.stop()
    click.echo(f"otel-session collector stopped: {collector.counters.status_line()}")


def _shown(address: str, port: int | None) -> str:
    return "off" if port is None else f"{address.rpartition(':')[0]}:{port}"


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
        f"{len(report.runs_already_imported)} already imported, {report.no_session_spans} span(s) without a session"
    )
    if report.log_events:
        click.echo(f"{report.log_events} GenAI log event(s), {report.log_events_unmatched} without their span")
    for problem in report.errors + report.rejected:
        click.echo(f"error: {problem}", err=True)
    sys.exit(0 if report.ok else 1)
