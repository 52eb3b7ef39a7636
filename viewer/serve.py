"""``otel-session view``: serve the viewer with werkzeug's threaded WSGI server.

werkzeug's ``ThreadedWSGIServer`` gives each request its own (daemon) thread, so long-lived
Server-Sent Event streams do not block other requests; that is enough for a local, single-user
tool. Put a production WSGI server (gunicorn with threads, waitress) in front for anything else:
``otel_session.viewer:create_app()`` is a normal WSGI app factory.
"""

from __future__ import annotations

import os
from pathlib import Path

import click
from werkzeug.serving import make_server

from otel_session.core import config
from otel_session.core.log import get_logger

from . import ENV_VIEWER_TOKEN, create_app
from .security import is_loopback_host

__all__ = ["view"]


@click.command()
@config.bundle_dir_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind; beyond loopback a token is required.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="Port (0 picks a free one).")
@click.option("--token", default=None, help=f"Require this token on every request (default: ${ENV_VIEWER_TOKEN}).")
def view(bundle_root: Path | None, host: str, port: int, token: str | None) -> None:
    """Browse sessions, per-turn facts and replays of the bundles under --dir."""
    token = token or os.environ.get(ENV_VIEWER_TOKEN) or None
    if not is_loopback_host(host) and not token:
        raise click.UsageError(f"binding {host} (beyond loopback) needs --token or ${ENV_VIEWER_TOKEN}")
    root = config.bundle_dir(bundle_root)
    problem = config.missing_bundle_dir(bundle_root)
    if problem:  # served anyway: a recorder started later fills it, and the viewer follows live
        click.echo(f"warning: {problem}; sessions appear once something records there", err=True)
    app = create_app({"BUNDLE_DIR": str(root), "TOKEN": token})
    get_logger("werkzeug")  # its request lines name the sessions asked for: redacted like ours
    try:
        server = make_server(host, port, app, threaded=True)
    except OSError as exc:
        raise click.ClickException(f"cannot bind {host}:{port}: {exc.strerror or exc}") from None
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{server.server_port}/"
    click.echo(f"otel-session viewer on {url}{'?token=…' if token else ''} (bundles: {root}); Ctrl-C stops")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
