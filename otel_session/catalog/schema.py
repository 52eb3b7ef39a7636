"""The catalog's tables (SQLAlchemy Core): one row a run, one a session, the facet values.

Contract::

    runs, sessions, facets, meta_table     # Table objects of ``metadata``
    compiled_statements                    # the list's statements as SQLite text (``statements``, ``direct``)
    SCHEMA_VERSION                         # a catalog of another version is made new (no migrations)

Text keys compare bytewise in both engines (SQLite's default, PostgreSQL's ``COLLATE "C"``), so
sorts and cursors agree on SQLite and PostgreSQL.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Float, Index, Integer, MetaData, String, Table, Text, literal_column

from .settings import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "compiled_statements", "facets", "meta_table", "metadata", "runs", "sessions"]

KEY_TEXT = Text().with_variant(Text(collation="C"), "postgresql")
"""Text that sorts and compares bytewise in both engines (SQLite's default; PostgreSQL's ``"C"``)."""
metadata = MetaData()
meta_table = Table("catalog_meta", metadata, Column("key", String(64), primary_key=True), Column("value", Text))
runs = Table(
    "runs", metadata,
    Column("origin", KEY_TEXT, primary_key=True),
    Column("path", KEY_TEXT, primary_key=True),
    Column("directory", KEY_TEXT, nullable=False),
    Column("scope", String(8), nullable=False),
    Column("session_id", KEY_TEXT),
    Column("run_id", KEY_TEXT, nullable=False),
    Column("kind", KEY_TEXT, nullable=False),
    Column("created_at", KEY_TEXT, nullable=False),
    Column("eval_id", KEY_TEXT),
    Column("agent", KEY_TEXT),
    Column("service", KEY_TEXT),
    Column("capture_status", KEY_TEXT),
    Column("integrity", KEY_TEXT, nullable=False),
    Column("status", KEY_TEXT, nullable=False),
    Column("started_at", KEY_TEXT),
    Column("finished_at", KEY_TEXT),
    Column("duration_ms", Float),
    *(Column(name, Integer, nullable=False) for name in (
        "event_count", "turns", "messages", "model_calls", "tool_calls", "tool_errors", "guards_blocked",
        "repeated_asks", "feedback_count")),
    Column("input_tokens", BigInteger),
    Column("output_tokens", BigInteger),
    Column("tokens", BigInteger),
    Column("models", Text, nullable=False),
    Column("latency_p50_ms", Float),
    Column("latency_p95_ms", Float),
    Column("turn_p50_ms", Float),
    Column("turn_p95_ms", Float),
    Column("usage_by_model", Text, nullable=False),
    Column("problems", Text, nullable=False),
    Column("diagnostics", Text, nullable=False),
    Column("feedback_mean", Float),
    Column("search_text", Text, nullable=False),
    Column("stamp", Text, nullable=False),
    Column("location", Text),
    *(Column(name, Text, nullable=False) for name in ("tags", "metadata", "scores")),
    Index("runs_by_created", "created_at", "path", "origin"),
    Index("runs_by_directory", "directory", "created_at"),
    Index("runs_by_session", "session_id"),
)
PENDING = runs.c.stamp == literal_column("''")
runs_pending = Index("runs_pending", runs.c.path, sqlite_where=PENDING)
"""The rows whose figures the writer's hook left to count (``RunRow.figures_pending``), found without a
scan. A literal: SQLite's partial index serves no bound value. ``postgresql_where`` is added as a
PostgreSQL catalog is made (here it imported those dialects, 40 ms)."""
sessions = Table(
    "sessions", metadata,
    Column("directory", KEY_TEXT, primary_key=True),
    Column("scope", String(8), nullable=False),
    Column("session_id", KEY_TEXT),
    Column("newest_created_at", KEY_TEXT, nullable=False),
    Column("run_count", Integer, nullable=False),
    Index("sessions_by_newest", "scope", "newest_created_at", "directory"),
)
facets = Table("facets", metadata, Column("name", String(16), primary_key=True), Column("value", KEY_TEXT, primary_key=True))
compiled_statements = Table(
    "compiled_statements", metadata,
    Column("name", Text, primary_key=True),
    Column("version", Text, primary_key=True),
    Column("sql", Text, nullable=False),
    Column("parameters", Text, nullable=False),
)
"""The SQLite text of a list's read statements, compiled here by SQLAlchemy (``statements``), that
a fresh process reads with the standard library (``direct``); ``version`` says which code made it,
``parameters`` (JSON) the names of its ``?`` in order and the values of those that are constants."""
