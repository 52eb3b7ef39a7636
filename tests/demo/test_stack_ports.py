"""The demo stack picks its free ports itself (0), and starts again on new ones when another process
took one before its service bound it."""

from __future__ import annotations

import itertools
import socket
import urllib.request

import pytest

from otel_session.demo import stack as demo_stack
from otel_session.demo.stack import DemoPorts, DemoStack

pytestmark = pytest.mark.slow


def test_a_picked_port_taken_before_its_service_binds_it_is_picked_again(tmp_path, monkeypatch):
    with socket.socket() as holder:  # another process: it took the port picked for the viewer
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        picks = itertools.chain([taken], iter(demo_stack.free_port, None))
        monkeypatch.setattr(demo_stack, "free_port", lambda exclude=(): next(picks))
        stack = DemoStack(tmp_path / "bundles", ports=DemoPorts(0, 0, 0, 0, 0), log_dir=tmp_path / "logs")
        try:
            stack.start()  # before: "viewer exited with code 1 while starting"
            assert stack.ports.viewer != taken
            with urllib.request.urlopen(f"{stack.viewer_url}api/sessions", timeout=30) as response:
                assert response.status == 200
        finally:
            stack.stop()
