"""MLflow's own scoring server on a pyfunc model folder, as a user starts it, always stopped.

``mlflow models serve -m FOLDER --env-manager local -w WORKERS`` (FastAPI on uvicorn), bound to
127.0.0.1 on a free port, in a session (process group) of its own, pinned to the given cores. Its
output goes to a log file whose tail explains a failure. It runs without the checkout on its
path and from the evaluation's folder: the model's own copy of the harness (``code_paths``) is
what loads it, as it would be anywhere else.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tasks import resources
from tasks.child_process import die_with_parent, error_tail
from tasks.launch import PACKAGE_ROOT, python_environment

HOST = "127.0.0.1"  # loopback only: nothing outside this machine reaches the server
SERVER_LOG = "server.log"
LOG_TAIL_LINES = 15


class ServingFailure(RuntimeError):
    """The model could not be served or answered badly; the message says why, the log tail follows."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def is_listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex((HOST, port)) == 0


def _server_environment(threads: int, healthcheck_s: float) -> dict[str, str]:
    env = python_environment(threads)
    # The checkout stays off the path: the model's code_paths copy is what imports.
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p) != PACKAGE_ROOT]
    env["PYTHONPATH"] = os.pathsep.join(parts)
    # `mlflow models serve` runs `uvicorn` from PATH: the one of this interpreter.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["MLFLOW_TRACKING_URI"] = ""  # serving reads a local folder; it records nothing
    env["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"
    # One access-log line per request would cost the server's core and bury a failure's cause in
    # the log tail; uvicorn reads its options from UVICORN_* variables.
    env["UVICORN_ACCESS_LOG"] = "false"
    # uvicorn kills a worker that does not answer its supervisor's ping within 5 s, and a restarted
    # one that is not ready within as long: a worker busy with a heavy model (AutoGluon) on a loaded
    # core is killed, and its replacement cannot load the model in 5 s. A deployment sets this.
    env["UVICORN_TIMEOUT_WORKER_HEALTHCHECK"] = str(int(healthcheck_s))
    return env


def _last_error_line(lines: list[str]) -> str:
    """The model's own error in a server log (`SomeError: why`), not the CLI's wrapper around it."""
    errors = [line.strip() for line in lines
              if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Exit)\b.*:", line.strip())
              and "returned non zero return code" not in line]
    return errors[-1][:500] if errors else ""


class ScoringServer:
    """One `mlflow models serve` process tree; use as a context manager so it always stops."""

    def __init__(self, model_folder: Path, *, workers: int, cores: list[int], log_dir: Path,
                 port: int | None = None, request_timeout_s: int = 60, healthcheck_s: float = 120) -> None:
        self.model_folder = model_folder
        self.workers = max(1, workers)
        self.cores = cores
        self.port = port or free_port()
        self.log_path = log_dir / SERVER_LOG
        self.request_timeout_s = request_timeout_s
        self.healthcheck_s = healthcheck_s
        self.process: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        self.details: dict[str, Any] = {}  # what the stack records about its server (info)
        self.request_path = "/invocations"  # where requests go (the stack's)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "mlflow", "models", "serve", "-m", str(self.model_folder),
                "-h", HOST, "-p", str(self.port), "-w", str(self.workers), "-t", str(self.request_timeout_s),
                "--env-manager", "local"]

    def environment(self) -> dict[str, str]:
        return _server_environment(len(self.cores) or 1, self.healthcheck_s)

    def __enter__(self) -> ScoringServer:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> None:
        if not port_is_free(self.port):
            raise ServingFailure(f"port {self.port} on {HOST} is taken by another process; the scoring "
                                 "server cannot bind it")
        self.started = time.monotonic()
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command(), cwd=self.log_path.parent, env=self.environment(),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: the stop reaches all its workers
                # Killed with the evaluation's process, which a watchdog may SIGKILL (the CLI in
                # turn asks Linux to SIGTERM uvicorn when it goes).
                preexec_fn=die_with_parent,
            )
        if self.cores:
            # Before the CLI (seconds of imports) starts uvicorn: its workers inherit the affinity.
            with contextlib.suppress(OSError):
                os.sched_setaffinity(self.process.pid, self.cores)

    def wait_until_up(self, timeout_s: float) -> float:
        """Seconds from the start until /ping first answers 200; raises ServingFailure if it never does."""
        assert self.process is not None, "start the server first"
        deadline = self.started + timeout_s
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                raise ServingFailure(self._exited_reason(code))
            try:
                with urllib.request.urlopen(f"{self.url}/ping", timeout=2) as response:
                    if response.status == 200:
                        return time.monotonic() - self.started
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.2)
        raise ServingFailure(f"the scoring server did not answer /ping within {timeout_s:g} s "
                             "(raise serving.startup_timeout_s if the model is slow to load)")

    def _exited_reason(self, code: int) -> str:
        tail = self.log_tail(200)
        if "address already in use" in tail.lower():
            return f"the scoring server could not bind port {self.port}: it is taken by another process"
        reason = (f"the scoring server exited with code {code} before it answered /ping "
                  "(the model did not load)")
        cause = _last_error_line(tail.splitlines() if tail else [])
        return f"{reason}: {cause}" if cause else reason

    def invoke(self, body: bytes, timeout_s: float = 30.0) -> tuple[int, str]:
        """One POST to the request path (/invocations): (status, response text)."""
        request = urllib.request.Request(f"{self.url}{self.request_path}", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                return response.status, response.read().decode(errors="replace")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")

    def worker_restarts(self) -> int:
        """Workers uvicorn's supervisor found dead and replaced (from its log)."""
        if not self.log_path.is_file():
            return 0
        return len(re.findall(r"Child process \[\d+\] died", self.log_path.read_text(errors="replace")))

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        if not self.log_path.is_file():
            return ""
        return error_tail(self.log_path.read_text(errors="replace"), lines)

    def stop(self) -> None:
        """SIGTERM the group (uvicorn shuts its workers down), then SIGKILL whatever is left."""
        if self.process is None:
            return
        process, self.process = self.process, None
        victims = resources.tree_processes(process.pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
        # A worker's helpers (H2O's JVM) may have left the group: the tree seen before goes too.
        resources.kill_tree(process.pid, also=victims)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
