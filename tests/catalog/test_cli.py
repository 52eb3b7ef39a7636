"""``otel-session sessions`` pages from the catalog; ``otel-session reindex`` rebuilds it."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from otel_session.bundle.write import BundleWriter
from otel_session.catalog import open_catalog
from otel_session.cli import main
from otel_session.core.journal import format_timestamp

from .conftest import BASE_NS, write_runs


def invoke(*args: str, **env: str):
    return CliRunner().invoke(main, list(args), env=env or None)


def _sessions(root: Path, *args: str) -> list[dict]:
    result = invoke("sessions", "--dir", str(root), "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def many(root: Path, writer) -> Path:
    """60 sessions of one run each (``m0``…``m59``, newest last), and three of ``s0``-``s2`` older."""
    for number in range(60):
        run = writer.open_run(session_id=f"m{number}", run_id=f"run-{uuid.uuid4()}", agent="many",
                              created_at_ns=BASE_NS + (100 + number) * 10**9)
        run.append("run_started", {"kind": "live"}, at_ns=BASE_NS)
        run.close(run_status="error" if number == 7 else "ok")
    write_runs(writer, 3)
    evaluation = writer.open_run(session_id="m1", run_id=f"run-{uuid.uuid4()}", kind="eval", eval_id="nightly",
                                 created_at_ns=BASE_NS)
    evaluation.close(run_status="ok")
    assert evaluation.wait_sealed(10) and writer.force_flush(10_000)
    return root


def test_sessions_shows_the_newest_fifty_then_more_on_request(many: Path):
    listed = _sessions(many)
    assert len(listed) == 50 and listed[0]["session_id"] == "m59" and listed[-1]["session_id"] == "m10"
    assert len(_sessions(many, "--limit", "5")) == 5
    assert len(_sessions(many, "--all")) == 63
    text = invoke("sessions", "--dir", str(many), "--limit", "2").output
    assert "m59" in text and "m57" not in text and "--limit N or --all" in text


@pytest.mark.parametrize(("args", "expected"), [
    (("--agent", "agent1"), {"s1"}),
    (("--status", "error"), {"m7"}),
    (("--since", format_timestamp(BASE_NS + 159 * 10**9)[:19]), {"m59"}),
    (("--eval", "nightly"), {"m1"}),
    (("--search", "M42"), {"m42"}),
])
def test_sessions_filters(many: Path, args, expected):
    listed = _sessions(many, "--all", *args)
    assert {session["session_id"] for session in listed} == expected


def test_sessions_eval_runs_only_when_asked(many: Path):
    m1 = {session["directory"]: session for session in _sessions(many, "--all", "--evals") if session["session_id"] == "m1"}
    assert {directory: [run["kind"] for run in session["runs"]] for directory, session in m1.items()} == {
        "sessions/m1": ["live"], "evals/nightly/sessions/m1": ["eval"]}
    (m1,) = [session for session in _sessions(many, "--all") if session["session_id"] == "m1"]
    assert {run["kind"] for run in m1["runs"]} == {"live"}


def test_a_bad_time_is_a_usage_error_with_one_line(many: Path):
    result = invoke("sessions", "--dir", str(many), "--since", "yesterday'; DROP TABLE runs; --")
    assert result.exit_code == 2 and "RFC 3339" in result.output and "SELECT" not in result.output


def test_reindex_rebuilds_the_catalog_of_bundles_written_without_it(root: Path):
    writer = BundleWriter(root)
    try:
        write_runs(writer, 7)
    finally:
        writer.shutdown()
    result = invoke("reindex", "--dir", str(root))
    assert result.exit_code == 0, result.output
    assert "indexed 7 run(s)" in result.output
    catalog = open_catalog(root)
    try:
        assert catalog.count() == 7
    finally:
        catalog.close()


def test_without_a_catalog_sessions_reads_every_bundle_and_says_so(many: Path):
    result = CliRunner().invoke(main, ["sessions", "--dir", str(many), "--json", "--catalog", "off"])
    assert result.exit_code == 0
    assert "warning: the catalog is turned off" in result.stderr
    assert len(json.loads(result.stdout)) == 50


@pytest.mark.sqlite_only
def test_reindex_makes_a_malformed_catalog_new(root: Path, writer):
    write_runs(writer, 30)
    writer.shutdown()
    database = root / ".catalog.sqlite3"
    data = bytearray(database.read_bytes())
    data[4096:] = b"\xff" * (len(data) - 4096)  # every page but the first (the header) is garbage
    database.write_bytes(bytes(data))
    result = invoke("reindex", "--dir", str(root))
    assert result.exit_code == 0, result.output
    assert "indexed 30 run(s)" in result.output
    assert len(_sessions(root)) == 3


def test_a_catalog_url_with_a_password_is_never_shown(root: Path, writer):
    write_runs(writer, 1)
    result = invoke("reindex", "--dir", str(root), "--catalog", "postgresql://reader:s3cret@127.0.0.1:1/none")
    assert result.exit_code == 1 and "s3cret" not in result.output and "cannot open the catalog" in result.output


@pytest.mark.sqlite_only
def test_sessions_imports_neither_the_redactor_nor_the_normalizer(root: Path, writer):
    """A list reads the catalog: the store's fetch path (the redactor, the normalizer: tens of ms
    of a fresh process's CPU) is imported only by ``--store``."""
    write_runs(writer, 2)
    script = ("import sys\nfrom otel_session.cli import main\n"
              "main(['sessions', '--dir', sys.argv[1], '--json'], standalone_mode=False)\n"
              "print(sorted(name for name in sys.modules if name.startswith(('otel_session.redact', 'otel_session.normalize'))))")
    done = subprocess.run([sys.executable, "-c", script, str(root)], capture_output=True, text=True, timeout=120,
                          check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


def _cli(root: Path, *args: str) -> list:
    """The CLI's entry point in a fresh process: what it prints, then which heavy modules it imported."""
    done = subprocess.run([sys.executable, "-c", _CHILD, str(root), *args], capture_output=True, text=True, timeout=120,
                          check=True)
    *printed, imported = done.stdout.strip().splitlines()
    return [json.loads("\n".join(printed)), json.loads(imported)]


_CHILD = """
import sys
from otel_session.cli import main
try:
    main(['sessions', '--dir', sys.argv[1], '--json', *sys.argv[2:]], standalone_mode=False)
finally:
    heavy = ('sqlalchemy', 'otel_session.catalog.sql', 'otel_session.bundle.read', 'otel_session.bundle.store')
    print(__import__('json').dumps(sorted(name for name in heavy if name in sys.modules)))
"""


@pytest.mark.sqlite_only
def test_a_fresh_sessions_on_a_warm_catalog_imports_no_sqlalchemy(root: Path, writer):
    """A list answered from the catalog's stored statements (``catalog.direct``): SQLAlchemy's import
    alone was ≈ 250 ms of a fresh process's CPU."""
    write_runs(writer, 8)
    writer.shutdown()
    first, imported = _cli(root)  # the runs' figures are counted and written: through SQLAlchemy
    assert "sqlalchemy" in imported
    assert [session["session_id"] for session in first] == ["s1", "s0", "s2"]
    again, imported = _cli(root)
    assert (again, imported) == (first, [])
    filtered, imported = _cli(root, "--agent", "agent1", "--search", "S")
    assert "sqlalchemy" in imported and len(filtered) == 3  # a shape no list had asked for
    assert _cli(root, "--agent", "agent1", "--search", "S") == [filtered, []]  # the shape was stored
