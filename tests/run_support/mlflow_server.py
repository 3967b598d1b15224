"""A real `mlflow server` on 127.0.0.1 (its own sqlite store and artifacts) that a test can stop and start."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class MlflowServer:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 180) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
        env.pop("MLFLOW_TRACKING_URI", None)
        log = (self.folder / "server.log").open("ab")
        self.process = subprocess.Popen(
            [str(BIN / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1",
             "--backend-store-uri", f"sqlite:///{self.folder / 'store.db'}",
             "--artifacts-destination", str(self.folder / "artifacts")],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process.poll() is None, (self.folder / "server.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        raise AssertionError(f"mlflow server did not answer within {timeout_s} s")

    def stop(self) -> None:
        """As a crash would: the whole process group at once."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        self.process = None

    def client(self) -> Any:
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=self.url)

    def job_keys(self, suite: str) -> list[str]:
        """job_key of every live job run of the suite's experiment (repeats kept)."""
        client = self.client()
        experiment = client.get_experiment_by_name(suite)
        if experiment is None:
            return []
        runs = client.search_runs([experiment.experiment_id], "tags.job_key LIKE '%'", max_results=1000)
        return [run.data.tags["job_key"] for run in runs]
