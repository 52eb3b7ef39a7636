"""``otel-session view``: serve the viewer with werkzeug's threaded WSGI server.

werkzeug's ``ThreadedWSGIServer`` gives each request its own (daemon) thread, so long-lived
Server-Sent Event streams do not block other requests; that is enough for a local, single-user
tool. Put a production WSGI server (gunicorn with threads, waitress) in front for anything else:
``otel_session.viewer:create_app()`` is a normal WSGI app factory.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
from pathlib import Path

import click
from werkzeug.serving import make_server

from otel_session.core import config
from otel_session.core.log import get_logger

from otel_session.bundle.store import BadStoreUrl

from . import ENV_VIEWER_TOKEN, create_app
from .security import is_loopback_host

__all__ = ["view"]


@click.command()
@config.bundle_dir_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind; beyond loopback a token is required.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="Port (0 picks a free one).")
@click.option("--token", default=None, help=f"Require this token on every request (default: ${ENV_VIEWER_TOKEN}).")
@click.option("--access-log", is_flag=True, help="Log a line for every request (redacted like every log line).")
@click.option("--store", default=None, metavar="s3://BUCKET[/PREFIX]",
              help="Fetch sessions this root lacks from this bundle store (default: $OTEL_SESSION_STORE).")
def view(bundle_root: Path | None, host: str, port: int, token: str | None, access_log: bool, store: str | None) -> None:
    """Browse sessions, per-turn facts and replays of the bundles under --dir."""
    token = token or os.environ.get(ENV_VIEWER_TOKEN) or None
    if not is_loopback_host(host) and not token:
        raise click.UsageError(f"binding {host} (beyond loopback) needs --token or ${ENV_VIEWER_TOKEN}")
    root = config.bundle_dir(bundle_root)
    problem = config.missing_bundle_dir(bundle_root)
    if problem:  # served anyway: a recorder started later fills it, and the viewer follows live
        click.echo(f"Warning: {problem}; sessions appear once something records there", err=True)
    try:
        app = create_app({"BUNDLE_DIR": str(root), "TOKEN": token, "STORE": store})
    except BadStoreUrl as exc:
        raise click.UsageError(str(exc)) from None
    # Its request lines name the sessions asked for: redacted like ours, and only when asked for.
    get_logger("werkzeug").setLevel(logging.INFO if access_log else logging.WARNING)
    listener = _listen(host, port)
    try:
        server = make_server(host, listener.getsockname()[1], app, threaded=True, fd=listener.fileno())
    finally:
        listener.close()  # the server holds a duplicate of it
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{server.server_address[1]}/"
    click.echo(f"otel-session viewer on {url}{'?token=…' if token else ''} (bundles: {root}); Ctrl-C stops")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``, or a one-line error that names ``--port`` (werkzeug's own
    bind prints a paragraph and exits)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=128)
    except OSError as exc:
        advice = "choose another with --port, or --port 0 for a free one" if exc.errno == errno.EADDRINUSE else "check --host"
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise click.ClickException(f"cannot listen on {host}:{port}: {reason}; {advice}") from None
