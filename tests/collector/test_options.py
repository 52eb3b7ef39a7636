"""Collector settings live in one dataclass, read from OTEL_SESSION_* like the SDK's defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from otel_session.cli import main
from otel_session.collector.options import SETTINGS, CollectorOptions
from otel_session.collector.server import Collector
from otel_session.collector.sink import BundleSink
from otel_session.bundle.write import BundleWriter

DOCS = Path(__file__).resolve().parents[2] / "docs" / "collector.md"


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch):
    for setting in SETTINGS.values():
        monkeypatch.delenv(setting.env, raising=False)


def test_the_cli_and_the_collector_share_one_set_of_defaults(tmp_path, redactor):
    collector = Collector(tmp_path, grpc_address=None, http_address=None, redactor=redactor)
    try:
        assert collector.options == CollectorOptions(grpc_address=None, http_address=None)
        assert collector.options.status_interval_s == SETTINGS["status_interval_s"].default == 10.0
    finally:
        collector.writer.shutdown()
    help_text = CliRunner().invoke(main, ["collect", "--help"]).output
    assert "[default: 10.0; $OTEL_SESSION_STATUS_INTERVAL]" in " ".join(help_text.split())


def test_environment_variables_set_what_no_argument_gave(tmp_path, monkeypatch, redactor):
    monkeypatch.setenv("OTEL_SESSION_SEAL_AFTER", "2.5")
    monkeypatch.setenv("OTEL_SESSION_HOLD_LOGS", "7")
    monkeypatch.setenv("OTEL_SESSION_GRPC_ADDRESS", "off")
    monkeypatch.setenv("OTEL_SESSION_HTTP_ADDRESS", "127.0.0.1:0")
    collector = Collector(tmp_path, redactor=redactor, hold_logs_s=9)  # an argument wins
    collector.start()
    try:
        assert collector.grpc_port is None and collector.http_port
        assert (collector.sink.seal_after_s, collector.sink.hold_logs_s) == (2.5, 9)
    finally:
        collector.stop()
    writer = BundleWriter(tmp_path / "sink")
    assert BundleSink(writer, redactor).seal_after_s == 2.5
    writer.shutdown()


def test_a_bad_value_names_its_variable(monkeypatch):
    monkeypatch.setenv("OTEL_SESSION_SEAL_AFTER", "soon")
    with pytest.raises(ValueError, match="OTEL_SESSION_SEAL_AFTER='soon'"):
        CollectorOptions()
    result = CliRunner().invoke(main, ["collect", "--grpc", "off", "--http", "off"])
    assert result.exit_code == 1 and "OTEL_SESSION_SEAL_AFTER='soon'" in result.output


def test_unknown_settings_are_refused(tmp_path, redactor):
    with pytest.raises(TypeError, match="seal_afterr"):
        Collector(tmp_path, seal_afterr=1, redactor=redactor)


def test_every_setting_is_documented():
    text = DOCS.read_text()
    missing = [setting.env for setting in SETTINGS.values() if f"`{setting.env}`" not in text]
    assert not missing
