"""The otel-session viewer: sessions, runs, per-turn facts and replay in the browser.

Installed as ``otel_session.viewer``; served by ``otel-session view --dir D``::

    from otel_session.viewer import create_app
    app = create_app({"BUNDLE_DIR": "otel-session-data"})

Configuration keys: ``BUNDLE_DIR`` (bundle root; default ``$OTEL_SESSION_DIR``, else
``./otel-session-data``), ``TOKEN`` (required on every request when set; default
``$OTEL_SESSION_VIEWER_TOKEN``), ``STREAM_POLL_SECONDS`` (0.05), ``STREAM_HEARTBEAT_SECONDS`` (15),
``RUN_CACHE_BYTES`` (256 MiB: what the per-run reads keep in memory, least recently used out first),
``CATALOG`` (the run catalog's URL; default ``$OTEL_SESSION_CATALOG``, else SQLite in the bundle
root; ``off`` for none), ``CATALOG_PASS_SECONDS`` (30: how often it catches up with the bundles) and
``STORE`` (a bundle store, ``s3://BUCKET[/PREFIX]``; default ``$OTEL_SESSION_STORE``: sessions this
root lacks are fetched from it when the catalog says where their runs are) and ``STORE_CACHE_BYTES``
(what those copies may hold, least recently used out first; default ``$OTEL_SESSION_STORE_CACHE_BYTES``,
else 1 GiB).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from flask import Flask

from otel_session.core import config

from . import api, dashboard, errors, pages, scores, security, stream, transcript
from .feedback import FeedbackIndex
from .run_reader import DEFAULT_CACHE_BYTES
from .listing import Listing
from .store import BundleStore
from otel_session.bundle.store import open_store

__all__ = ["ENV_VIEWER_TOKEN", "create_app"]

ENV_VIEWER_TOKEN = "OTEL_SESSION_VIEWER_TOKEN"


def create_app(test_config: Mapping[str, Any] | None = None) -> Flask:
    """Create and configure the viewer app over one bundle root."""
    app = Flask(__name__)
    app.config.from_mapping(
        BUNDLE_DIR=str(config.bundle_dir()),
        TOKEN=os.environ.get(ENV_VIEWER_TOKEN) or None,
        STREAM_POLL_SECONDS=0.05,
        STREAM_HEARTBEAT_SECONDS=15.0,
        MAX_CONTENT_LENGTH=64 * 1024,
        RUN_CACHE_BYTES=DEFAULT_CACHE_BYTES,
        CATALOG=None,
        STORE=None,
        STORE_CACHE_BYTES=None,
        CATALOG_PASS_SECONDS=30.0,
    )
    if test_config is not None:
        app.config.from_mapping(test_config)
    app.json.sort_keys = False
    app.url_map.merge_slashes = False  # "//etc" is a hostile id, never redirected to "/etc"
    remote = open_store(app.config["STORE"])  # a bad --store stops here, before any thread starts
    listing = Listing(app.config["BUNDLE_DIR"], app.config["CATALOG"], keeper_interval_s=app.config["CATALOG_PASS_SECONDS"])
    app.extensions["otel_session_listing"] = listing
    app.extensions["otel_session_store"] = BundleStore(app.config["BUNDLE_DIR"], cache_bytes=app.config["RUN_CACHE_BYTES"],
                                                       remote=remote, stored_paths=listing.stored_paths,
                                                       fetched_bytes=app.config["STORE_CACHE_BYTES"])
    app.extensions["otel_session_feedback"] = FeedbackIndex()

    errors.init_app(app)
    security.init_app(app)
    app.register_blueprint(api.bp)
    app.register_blueprint(stream.bp)
    app.register_blueprint(pages.bp)
    app.register_blueprint(dashboard.bp)
    app.register_blueprint(transcript.bp)
    app.register_blueprint(scores.bp)
    return app
