"""The warm fork server: one process per harness that has the worker's imports loaded and forks
a fresh worker process per job. `python -m tasks.forkserver` (started by tasks.launch).

A cold worker spends most of a second importing numpy, pandas, scipy and scikit-learn before it
touches the data; a baseline job fits in less. Forking from a process that imported them already
keeps every job in a process of its own (own session, own memory, killable as a tree) without
paying that again. The server itself never runs a job and starts no thread pools (it is started
with one thread per pool), so forking it is safe; each worker then sets its own environment,
cores and thread limits before its job begins.

Protocol, one JSON object per line. The harness writes requests on stdin:
    {"id": N, "job_dir": "...", "log": "...", "env": {...}}
and the server answers on stdout:
    {"event": "ready", "pid": P}                      once, after the preload
    {"event": "started", "id": N, "pid": P}           the worker's pid, before any exit of it
    {"event": "exited", "id": N, "returncode": R}     from waitpid: 0, 1, or -SIGNAL
    {"event": "error", "id": N, "message": "..."}     the fork itself failed
When stdin closes (the harness is gone), the server kills its workers and exits; a worker also
dies by SIGKILL if the server dies first (PR_SET_PDEATHSIG, set by tasks.child_process.begin).
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import json
import os
import select
import signal
import sys
import traceback
from typing import Any

# The server's own imports are light (the standard library and the two modules below); the heavy
# ones are PRELOAD's, imported by `serve` so a missing one in a framework environment is tolerated.
from tasks import worker
from tasks.child_process import exit_now

# What every worker imports before its framework: the harness's own stack. Frameworks stay out:
# they may start threads or devices at import, and their import is the framework's start-up.
PRELOAD = (
    "numpy", "pandas", "pyarrow.parquet", "scipy.sparse", "sklearn", "sklearn.ensemble",
    "sklearn.linear_model", "sklearn.metrics", "threadpoolctl",
    "tasks.worker", "tasks.child_requests", "tasks.data.load", "tasks.data.folds", "tasks.data.fold_data",
    "tasks.frameworks.registry", "tasks.frameworks.base", "tasks.frameworks._tabular", "tasks.plan",
    "tasks.results", "tasks.specs",
)
STDIN, STDOUT, STDERR = 0, 1, 2
# The answers go out on a copy of the original stdout; fd 1 itself is pointed at stderr, so a
# library that prints while being imported cannot garble the protocol.
_answers = STDOUT


def _send(message: dict[str, Any]) -> None:
    data = (json.dumps(message) + "\n").encode()
    while data:
        data = data[os.write(_answers, data):]


def _become_worker(request: dict[str, Any], server_fds: list[int]) -> int:
    """In the forked child: become the job's worker and run it; returns its exit code."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for fd in server_fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    os.setsid()  # its own session and process group: the supervisor's kill reaches all it starts
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, STDIN)
    os.dup2(log, STDOUT)
    os.dup2(log, STDERR)
    os.close(log)
    os.close(devnull)
    os.chdir(request["job_dir"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = ["tasks.worker", request["job_dir"]]
    return worker.main(sys.argv)


def _fork_worker(request: dict[str, Any], server_fds: list[int]) -> int | None:
    try:
        pid = os.fork()
    except OSError as exc:
        _send({"event": "error", "id": request["id"], "message": f"fork failed: {exc}"})
        return None
    if pid == 0:  # the worker; it must never return into the server's loop
        code = 1
        try:
            code = _become_worker(request, server_fds)
        except BaseException:  # noqa: BLE001 - whatever happens, it ends here with the trace in its log
            traceback.print_exc()
        finally:
            exit_now(code)
    _send({"event": "started", "id": request["id"], "pid": pid})
    return pid


def _reap(running: dict[int, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        request_id = running.pop(pid, None)
        if request_id is not None:
            _send({"event": "exited", "id": request_id, "returncode": os.waitstatus_to_exitcode(status)})


def serve() -> None:
    global _answers
    _answers = os.dup(STDOUT)
    os.dup2(STDERR, STDOUT)
    for module in PRELOAD:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError:
            # A framework environment without scikit-learn (say) still serves warm workers; the
            # harness's own modules must import everywhere.
            if module.startswith("tasks."):
                raise
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
    # A finished worker wakes the loop at once (SIGCHLD through the wakeup pipe), not at a poll.
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the harness's to handle
    server_fds = [_answers, wake_r, wake_w]
    running: dict[int, int] = {}  # worker pid -> request id
    pending = b""
    _send({"event": "ready", "pid": os.getpid()})
    while True:
        readable, _, _ = select.select([STDIN, wake_r], [], [], 1.0)
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                while os.read(wake_r, 4096):
                    pass
        if STDIN in readable:
            chunk = os.read(STDIN, 65536)
            if not chunk:
                break  # the harness closed the pipe or died
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                if line.strip():
                    request = json.loads(line)
                    pid = _fork_worker(request, server_fds)
                    if pid is not None:
                        running[pid] = request["id"]
        _reap(running)
    for pid in running:  # no harness to watch them: end the jobs with it
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


if __name__ == "__main__":
    serve()
