"""The scoring server's failures a user meets: a taken port, a server too slow to come up. Each is
one sentence saying what to change, and nothing is left running."""

from __future__ import annotations

import socket
from pathlib import Path

import psutil
import pytest

from tasks.evaluations._scoring_server import HOST, ScoringServer, ServingFailure


def test_a_taken_port_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind((HOST, 0))
        holder.listen()
        port = holder.getsockname()[1]
        server = ScoringServer(tmp_path / "model", workers=1, cores=[], log_dir=tmp_path, port=port)

        with pytest.raises(ServingFailure, match=f"port {port} on {HOST} is taken by another process"):
            server.start()

    assert server.process is None and not (tmp_path / "server.log").exists()


def test_a_server_not_up_within_its_startup_timeout_names_the_setting_and_is_stopped(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    # `mlflow models serve` spends seconds importing before it listens: 0.5 s is never enough.
    with ScoringServer(tmp_path / "model", workers=1, cores=[], log_dir=tmp_path) as server:
        server.start()
        pid = server.process.pid
        too_slow = r"did not answer /ping within 0.5 s .*serving\.startup_timeout_s"
        with pytest.raises(ServingFailure, match=too_slow):
            server.wait_until_up(0.5)

    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
