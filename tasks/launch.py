"""How a job's worker process starts: forked from the warm fork server, or cold.

``AUTOML_EVAL_LAUNCHER`` chooses: ``warm`` (the default on Linux) forks each worker from one
preloaded server per harness process (tasks/forkserver.py), so a job does not pay for importing
numpy, pandas, scipy and scikit-learn again; ``cold`` starts ``python -m tasks.worker`` afresh.
Either way the worker is a process of its own, in its own session, that the supervisor
(tasks/supervise.py) samples and kills as a tree, and its exit status comes from a real wait on it
(waitpid in the server), never from a guess. If the warm server cannot start a worker, the job
starts cold and the log says why.

A job in a framework environment of its own (tasks/frameworks/environments.py) runs with that
environment's interpreter: cold, or forked from a warm server of that interpreter, started on the
environment's first job and kept for the next ones.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Protocol

from tasks.errors import UserError

LAUNCHER_ENV = "AUTOML_EVAL_LAUNCHER"
# A folder holding another commit's `tasks` package (a git worktree an attribution made): a job's
# worker then runs that commit's adapter code, started cold (the warm server holds this code).
WORKER_CODE_ENV = "AUTOML_EVAL_WORKER_CODE"
LAUNCHERS = ("warm", "cold")
# Thread pools a framework may start; all are held to the budget's cores.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
    "NUMEXPR_MAX_THREADS", "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS", "LOKY_MAX_CPU_COUNT",
    "RAYON_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS",
)
READY_TIMEOUT_S = 120.0  # the preload takes ~1 s; much longer only on a machine far overloaded
START_TIMEOUT_S = 30.0  # a fork answers in milliseconds
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
SERVER_MODULE = "tasks.forkserver"
WORKER_MODULE = "tasks.worker"

logger = logging.getLogger(__name__)


class WorkerProcess(Protocol):
    """What the supervisor needs of a started worker (subprocess.Popen has it too)."""

    pid: int

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


class ForkServerUnavailable(RuntimeError):
    """The warm server could not start this worker; the job starts cold instead."""


def python_environment(threads: int) -> dict[str, str]:
    """This process's environment for a Python child of the harness: its thread pools held to
    `threads`, output unbuffered (a killed process's log keeps its last lines), the project
    importable."""
    env = dict(os.environ)
    env.update(dict.fromkeys(THREAD_VARIABLES, str(max(1, threads))))
    env["PYTHONUNBUFFERED"] = "1"
    code = env.get(WORKER_CODE_ENV, "").strip() or str(PACKAGE_ROOT)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [code, env.get("PYTHONPATH", "")]))
    return env


def chosen_launcher() -> str:
    if os.environ.get(WORKER_CODE_ENV, "").strip():
        return "cold"  # a forked worker would run the server's code, not the worktree's
    choice = os.environ.get(LAUNCHER_ENV, "").strip() or ("warm" if hasattr(os, "fork") else "cold")
    if choice not in LAUNCHERS:
        raise UserError(f"{LAUNCHER_ENV}='{choice}' is not a launcher: set it to 'warm' or 'cold'.")
    return choice


def start_cold(folder: Path, env: dict[str, str], log_path: Path, python: Path | None = None, *,
               module: str = WORKER_MODULE, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """`python -m MODULE FOLDER` in a fresh interpreter (default: a job's worker, in its job folder)."""
    with open(log_path, "ab") as log:
        # Output goes to a file, not a pipe: no pipe to drain, nothing to block on at exit.
        return subprocess.Popen(
            [str(python or sys.executable), "-m", module, str(folder)],
            cwd=cwd or folder, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: the kill reaches everything it starts
        )


class ForkedWorker:
    """A worker forked by the server; its exit status arrives from the server's waitpid."""

    def __init__(self, request_id: int, server: subprocess.Popen[bytes], log_path: Path) -> None:
        self.request_id = request_id
        self.server = server
        self.log_path = log_path
        self.pid = 0
        self.returncode: int | None = None
        self.error = ""
        self.started = threading.Event()
        self.exited = threading.Event()

    def poll(self) -> int | None:
        return self.returncode if self.exited.is_set() else None

    def wait(self, timeout: float | None = None) -> int:
        if not self.exited.wait(timeout):
            raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
        assert self.returncode is not None
        return self.returncode


class ForkServer:
    """One warm server per harness process and interpreter, shared by the threads that run jobs."""

    def __init__(self, python: Path | None = None) -> None:
        self.python = str(python or sys.executable)
        self._start_lock = threading.Lock()  # one request or server start at a time
        self._lock = threading.Lock()  # the table of workers, shared with the reader thread
        self._server: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._workers: dict[int, ForkedWorker] = {}
        self._ids = itertools.count(1)

    def start(self, job_dir: Path, env: dict[str, str], log_path: Path) -> ForkedWorker:
        request = {"job_dir": str(job_dir), "log": str(log_path), "env": env}
        with self._start_lock:
            server = self._running_server()
            worker = ForkedWorker(next(self._ids), server, log_path)
            with self._lock:
                self._workers[worker.request_id] = worker
            try:
                assert server.stdin is not None
                server.stdin.write((json.dumps({"id": worker.request_id, **request}) + "\n").encode())
                server.stdin.flush()
            except OSError as exc:
                self._forget(worker)
                raise ForkServerUnavailable(f"the fork server stopped taking jobs ({exc})") from exc
        if not worker.started.wait(START_TIMEOUT_S):
            # A fork that never answers: end that server (a late worker dies with it), start anew.
            self._forget(worker)
            self.shutdown()
            raise ForkServerUnavailable(
                f"the fork server did not start a worker within {START_TIMEOUT_S:.0f} s")
        if worker.error:
            raise ForkServerUnavailable(worker.error)
        return worker

    def warm_up(self) -> None:
        """Start the server in the background, so its preload overlaps with other work."""
        threading.Thread(target=self._warm_up_quietly, name="forkserver-warm-up", daemon=True).start()

    def shutdown(self) -> None:
        """Stop the server; the workers it has running die with it."""
        with self._start_lock:
            server, self._server = self._server, None
        if server is None:
            return
        if server.stdin is not None:
            server.stdin.close()  # the server kills its workers and exits on end of input
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()

    @property
    def pid(self) -> int | None:
        return self._server.pid if self._server is not None and self._server.poll() is None else None

    def _warm_up_quietly(self) -> None:
        try:
            with self._start_lock:
                self._running_server()
        except ForkServerUnavailable as exc:
            logger.warning("%s; jobs will start cold.", exc)

    def _running_server(self) -> subprocess.Popen[bytes]:
        """The live server, started if needed (the caller holds _start_lock)."""
        if self._server is not None and self._server.poll() is None:
            return self._server
        # No thread pools in the server: forking a process whose pools run is what deadlocks. Its
        # workers inherit its unbuffered streams.
        env = python_environment(threads=1)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - read while the server lives
        server = subprocess.Popen(
            [self.python, "-m", SERVER_MODULE], cwd=PACKAGE_ROOT, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            start_new_session=True,  # Ctrl-C reaches the harness, which decides
        )
        ready = threading.Event()
        threading.Thread(target=self._read, args=(server, ready), name="forkserver-reader",
                         daemon=True).start()
        if not ready.wait(READY_TIMEOUT_S) or server.poll() is not None:
            server.kill()
            server.wait()
            raise ForkServerUnavailable(f"the warm fork server did not start: {self._stderr_tail()}")
        self._server = server
        return server

    def _read(self, server: subprocess.Popen[bytes], ready: threading.Event) -> None:
        """The reader thread of one server: hands each answer to its worker."""
        assert server.stdout is not None
        for line in server.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            event = message.get("event")
            if event == "ready":
                ready.set()
                continue
            with self._lock:
                worker = self._workers.get(message.get("id", -1))
            if worker is None:
                continue
            if event == "started":
                worker.pid = int(message["pid"])
                worker.started.set()
            elif event == "exited":
                worker.returncode = int(message["returncode"])
                self._forget(worker)
                worker.exited.set()
            elif event == "error":
                worker.error = str(message.get("message", "the fork failed"))
                self._forget(worker)
                worker.started.set()
        # End of output: the server is gone, and with it (PR_SET_PDEATHSIG) its workers.
        server.wait()
        with self._lock:
            orphans = [w for w in self._workers.values() if w.server is server]
        for worker in orphans:
            worker.error = worker.error or f"the fork server exited (code {server.returncode})"
            if worker.pid:  # the job's log then says why its worker died
                with open(worker.log_path, "a") as log:
                    log.write(f"[harness] {worker.error}; the worker was killed with it.\n")
            worker.returncode = -signal.SIGKILL
            self._forget(worker)
            worker.started.set()
            worker.exited.set()
        ready.set()

    def _forget(self, worker: ForkedWorker) -> None:
        with self._lock:
            self._workers.pop(worker.request_id, None)

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return "no output"
        self._stderr.seek(0)
        lines = self._stderr.read().decode(errors="replace").strip().splitlines()
        return " | ".join(lines[-3:]) or "no output"


FORK_SERVER = ForkServer()
_environment_servers: dict[str, ForkServer] = {}  # a framework environment's python -> its server
_environment_servers_lock = threading.Lock()


def fork_server_for(python: Path | None) -> ForkServer:
    """The warm server of an interpreter: the harness's own, or a framework environment's (made on
    first use; it starts with its first job)."""
    if python is None or str(python) == sys.executable:
        return FORK_SERVER
    with _environment_servers_lock:
        return _environment_servers.setdefault(str(python), ForkServer(python))


def start_worker(job_dir: Path, env: dict[str, str], log_path: Path,
                 python: Path | None = None) -> tuple[WorkerProcess, str]:
    """Start the worker of the job in `job_dir` with `python` (default: this interpreter); returns
    it and how it was started."""
    if chosen_launcher() == "warm":
        try:
            return fork_server_for(python).start(job_dir, env, log_path), "warm"
        except ForkServerUnavailable as exc:
            with open(log_path, "a") as log:
                log.write(f"[harness] {exc}; starting this worker cold.\n")
            logger.warning("%s; starting the worker of %s cold.", exc, job_dir.name)
    return start_cold(job_dir, env, log_path, python), "cold"
