"""``otel-session demo``: the whole stack on loopback; ``demo agent|llm|driver`` run one piece.

The pieces are what the compose stack's services run, so each has ``--help``.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import click

from otel_session.core import config
from otel_session.core.stop_signal import StopSignal

__all__ = ["demo"]

_PASS_THROUGH = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}


@click.group(invoke_without_command=True)
@config.bundle_dir_option
@click.option("--once", is_flag=True, help="Play the conversations, verify every bundle, stop; exit 0/1.")
@click.option("--viewer-port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="Port of the viewer (0 picks a free one).")
@click.option("--collector-grpc-port", type=click.IntRange(0, 65535), default=4317, show_default=True,
              help="Port of the collector's OTLP/gRPC receiver (0 picks a free one).")
@click.option("--collector-http-port", type=click.IntRange(0, 65535), default=4318, show_default=True,
              help="Port of the collector's OTLP/HTTP receiver (0 picks a free one).")
@click.option("--agent-port", type=click.IntRange(0, 65535), default=8780, show_default=True,
              help="Port of the booking agent (0 picks a free one).")
@click.option("--llm-port", type=click.IntRange(0, 65535), default=8781, show_default=True,
              help="Port of the mock LLM (0 picks a free one).")
@click.option("--seal-after", type=click.FloatRange(min=0.1), default=1.0, show_default=True, metavar="SECONDS",
              help="The collector seals a run this long after its last span.")
@click.option("--log-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where each process logs (default: a new temporary directory, named in the summary).")
@click.option("--export-to", multiple=True, metavar="URL",
              help="Also send the agent's spans to this OTLP/HTTP traces endpoint (repeatable), e.g. Phoenix or Jaeger.")
@click.pass_context
def demo(
    ctx: click.Context,
    bundle_root: Path | None,
    once: bool,
    viewer_port: int,
    collector_grpc_port: int,
    collector_http_port: int,
    agent_port: int,
    llm_port: int,
    seal_after: float,
    log_dir: Path | None,
    export_to: tuple[str, ...],
) -> None:
    """Run the demo: collector, viewer, mock LLM, booking agent and driver, all on 127.0.0.1.

    Prints the viewer URL and a summary, then serves until Ctrl-C. Ports given as 0 are picked free.
    """
    if ctx.invoked_subcommand is not None:
        return
    try:
        import openai  # noqa: F401
        import opentelemetry.instrumentation.openai_v2  # noqa: F401
    except ImportError as exc:
        raise click.ClickException(f"the demo needs its extra: pip install 'otel-session[demo]' ({exc})") from None
    from otel_session.demo.stack import DemoError, DemoPorts, DemoStack

    ports = DemoPorts(viewer_port, collector_grpc_port, collector_http_port, agent_port, llm_port)
    stack = DemoStack(
        config.bundle_dir(bundle_root), ports=ports, seal_after_s=seal_after, log_dir=log_dir, export_to=export_to
    )
    stop = StopSignal().install()
    try:
        click.echo("starting collector, viewer, mock LLM and agent …", err=True)
        stack.start()
        click.echo(f"playing the conversations against {stack.agent_url} …", err=True)
        conversations = stack.play()
        if once:
            stack.flush_agent()
        checks = stack.wait_sealed(conversations, timeout_s=max(30.0, 5 * seal_after))
        summary = stack.summary(conversations, checks)
        click.echo(str(summary))
        if once:
            codes = stack.stop()
            problems = stack.verify_all()
            for problem in problems:
                click.echo(f"  {problem}", err=True)
            failed = {name: code for name, code in codes.items() if code not in (0, None, -signal.SIGTERM)}
            for name, code in failed.items():
                click.echo(f"  {name} exited with code {code} (log: {stack.log_dir / (name + '.log')})", err=True)
            sys.exit(0 if summary.ok and not problems and not failed else 1)
        click.echo(
            f"\nOpen {stack.viewer_url} — talk to the agent yourself:\n"
            f"  curl -s {stack.agent_url}/calls -H 'X-Session-Id: me' -H 'Content-Type: application/json' \\\n"
            f"       -d '{{\"utterances\": [\"hi\", \"friday\", \"2 people\", \"yes\"]}}'\n"
            "Ctrl-C stops everything."
        )
        stop.wait()
    except DemoError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        stop.restore()
        stack.stop()


@demo.command(context_settings=_PASS_THROUGH, add_help_option=False)
@click.pass_context
def agent(ctx: click.Context) -> None:
    """The booking agent service (options: --help)."""
    from otel_session.demo.agent import main

    main(ctx.args)


@demo.command(context_settings=_PASS_THROUGH, add_help_option=False)
@click.pass_context
def llm(ctx: click.Context) -> None:
    """The deterministic OpenAI-compatible mock LLM, booking replies (options: --help)."""
    from otel_session.demo.booking_llm import main

    main(ctx.args)


@demo.command(context_settings=_PASS_THROUGH, add_help_option=False)
@click.pass_context
def driver(ctx: click.Context) -> None:
    """Play the scripted conversations against an agent (options: --help)."""
    from otel_session.demo.driver import main

    main(ctx.args)
