"""The command line's first hour: clear answers for a wrong --dir, honest listings, the viewer's download."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from otel_session.cli import main
from otel_session.viewer import create_app

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "bundles"
RUN_ID = "run-5f1c2a7e-0b7d-4c3e-9a51-3d2e8f9b6c10"


def invoke(*args: str, **env: str):
    return CliRunner().invoke(main, list(args), env=env or None)


def bundle_root(tmp_path: Path, *samples: str) -> Path:
    """A root with each sample bundle as a run of session call-42 (their manifests say so)."""
    root = tmp_path / "root"
    for index, sample in enumerate(samples):
        target = root / "sessions" / "call-42" / RUN_ID.replace("3d2e8f9b6c10", f"3d2e8f9b6c1{index}")
        shutil.copytree(SAMPLES / sample, target)
    return root


@pytest.mark.parametrize("via_env", [False, True])
def test_sessions_with_a_root_that_does_not_exist_says_so(tmp_path, via_env):
    missing = tmp_path / "no-such-root"
    result = invoke("sessions", **{"OTEL_SESSION_DIR": str(missing)}) if via_env else invoke("sessions", "--dir", str(missing))
    assert result.exit_code == 1
    assert f"no bundle root at {missing}" in result.output
    assert ("$OTEL_SESSION_DIR" if via_env else "--dir") in result.output
    assert "no sessions" not in result.output


def test_sessions_in_an_empty_root_says_where_it_looked(tmp_path):
    (tmp_path / "empty").mkdir()
    result = invoke("sessions", "--dir", str(tmp_path / "empty"))
    assert result.exit_code == 0 and result.output.strip() == f"no sessions under {tmp_path / 'empty'}"


def test_view_with_a_root_that_does_not_exist_warns_and_serves(tmp_path):
    missing = tmp_path / "no-such-root"
    process = subprocess.Popen(
        [sys.executable, "-c", "from otel_session.cli import main; main(prog_name='otel-session')",
         "view", "--dir", str(missing), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert f"no bundle root at {missing}" in process.stderr.readline()
        assert "otel-session viewer on http://127.0.0.1:" in process.stdout.readline()
    finally:
        process.terminate()
        process.wait(10)


def test_sessions_shows_each_runs_integrity_and_the_runs_with_a_broken_manifest(tmp_path):
    root = bundle_root(tmp_path, "complete", "count-mismatch")
    broken = root / "sessions" / "call-42" / RUN_ID.replace("3d2e8f9b6c10", "3d2e8f9b6c19")
    shutil.copytree(SAMPLES / "complete", broken)
    (broken / "run.json").write_text("{not json")
    listed = json.loads(invoke("sessions", "--dir", str(root), "--json").output)
    runs = [run for session in listed for run in session["runs"]]
    statuses = sorted((run["status"], tuple(run["problems"])) for run in runs)
    assert statuses == [("complete", ()), ("invalid", ("count_mismatch",)), ("invalid", ("invalid_manifest",))]
    (unreadable,) = [run for run in runs if run["session_id"] is None]
    assert unreadable["run_id"] == broken.name and unreadable["directory"] == "sessions/call-42"
    text = invoke("sessions", "--dir", str(root)).output
    assert "invalid (count_mismatch)" in text and "invalid (invalid_manifest)" in text
    assert "sessions/call-42/ (run.json missing or invalid)" in text


def download(root: Path, run_id: str) -> bytes:
    client = create_app({"BUNDLE_DIR": str(root), "TESTING": True}).test_client()
    answer = client.get(f"/api/sessions/call-42/runs/{run_id}/bundle")
    assert answer.status_code == 200
    return answer.data


def test_verify_takes_the_viewers_downloaded_bundle(tmp_path):
    root = bundle_root(tmp_path, "complete")
    (run_dir,) = (root / "sessions" / "call-42").iterdir()
    archive = tmp_path / "download.tar"
    archive.write_bytes(download(root, run_dir.name))
    result = invoke("verify", str(archive))
    assert result.exit_code == 0, result.output
    assert result.output.startswith("complete") and f"{archive}/{run_dir.name}" in result.output


def test_verify_judges_an_archived_bundle_like_one_on_disk(tmp_path):
    root = bundle_root(tmp_path, "count-mismatch")
    (run_dir,) = (root / "sessions" / "call-42").iterdir()
    archive = tmp_path / "download.tar"
    archive.write_bytes(download(root, run_dir.name))
    on_disk = json.loads(invoke("verify", "--json", str(run_dir)).output)
    archived = json.loads(invoke("verify", "--json", str(archive)).output)
    assert [entry["status"] for entry in archived] == [entry["status"] for entry in on_disk] == ["invalid"]
    assert invoke("verify", str(archive)).exit_code == 1


ABSOLUTE_CANARY = Path("/feedback.ndjson")


def test_verify_reads_only_bundle_files_from_an_archive(tmp_path):
    """Links and paths leaving the archive are never followed or written."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name in ("run.json", "events.ndjson", "capture.json"):
            data = (SAMPLES / "complete" / name).read_bytes()
            member = tarfile.TarInfo(f"{RUN_ID}/{name}")
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
        escape = tarfile.TarInfo("../escaped.ndjson")
        escape.size = 1
        archive.addfile(escape, io.BytesIO(b"x"))
        for name in (f"/{ABSOLUTE_CANARY.name}", f"../{ABSOLUTE_CANARY.name}", f"not-a-run/{ABSOLUTE_CANARY.name}"):
            absolute = tarfile.TarInfo(name)  # one directory deep, a bundle file's name: only the directory is wrong
            absolute.size = 1
            archive.addfile(absolute, io.BytesIO(b"x"))
        link = tarfile.TarInfo(f"{RUN_ID}/feedback.ndjson")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(link)
    path = tmp_path / "crafted" / "bundle.tar"
    path.parent.mkdir()
    path.write_bytes(buffer.getvalue())
    existed = ABSOLUTE_CANARY.exists()
    try:
        result = invoke("verify", str(path))
        assert result.exit_code == 0, result.output
        assert not (tmp_path / "escaped.ndjson").exists()
        assert ABSOLUTE_CANARY.exists() == existed  # "/feedback.ndjson" is no bundle directory
    finally:
        if not existed:
            ABSOLUTE_CANARY.unlink(missing_ok=True)


def _viewer(*arguments: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", "from otel_session.cli import main; main(prog_name='otel-session')", "view", *arguments],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_view_on_a_port_in_use_says_so_in_one_line_naming_port(tmp_path):
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        process = _viewer("--dir", str(tmp_path), "--port", str(port))
        _, stderr = process.communicate(timeout=300)
    assert process.returncode == 1
    assert stderr.strip() == (f"Error: cannot listen on 127.0.0.1:{port}: Address already in use; "
                              "choose another with --port, or --port 0 for a free one"), stderr


@pytest.mark.parametrize("access_log", [False, True])
def test_view_logs_requests_only_with_access_log(tmp_path, access_log):
    import urllib.request

    process = _viewer("--dir", str(tmp_path), "--port", "0", *(["--access-log"] if access_log else []))
    try:
        url = re.search(r"http://\S+/", process.stdout.readline()).group(0)
        with urllib.request.urlopen(url + "api/sessions", timeout=30) as answer:
            assert answer.status == 200
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=300)
    assert ("GET /api/sessions" in stderr) is access_log, stderr
