from click.testing import CliRunner

from otel_session.cli import main


def test_demo_records_a_complete_bundle(tmp_path):
    result = CliRunner().invoke(main, ["demo", "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("complete")
