"""How every supervised child of the harness begins and ends: a job's worker and a post-job evaluation.

The parent side is tasks/supervise.py. A child calls ``begin`` first, before importing anything that
starts thread pools (numpy, pandas, a framework): it then leaves a Python traceback in its log on a
native crash, dies with its supervisor (no orphaned jobs), and runs on its granted cores, so the
thread pools its libraries start inherit them. It ends with ``exit_now``.

This module imports only the standard library: it runs before the pin.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import os
import signal
import sys
from collections.abc import Sequence

# The files a supervised child and its supervisor exchange in the child's folder (their types are
# tasks/child_requests.py; their names are here because a child reads its request before the pin).
JOB_FILE = "job.json"  # a job's request to its worker
DATA_LOAD_FILE = "data_load.json"  # the worker's loaded data: granted on top of the job's memory_mb
REQUEST_FILE = "request.json"  # a post-job evaluation's request to its child
ERROR_TAIL_LINES = 12
PR_SET_PDEATHSIG = 1  # prctl option: the signal this process gets when its parent dies


def begin(cores: Sequence[int] | None) -> None:
    """What a supervised child does first: traceback on a native crash, death with its parent, pin."""
    faulthandler.enable()
    die_with_parent()
    if cores:
        os.sched_setaffinity(0, list(cores))


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent (the supervisor, or the fork server) dies."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the supervisor's own kill is all there is
        pass
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


def error_tail(text: str, lines: int = ERROR_TAIL_LINES) -> str:
    """The last lines of a log or a traceback: what a failure's reason quotes."""
    return "\n".join(text.strip().splitlines()[-lines:])


def failure_text(exc: BaseException, formatted_traceback: str) -> str:
    """A failure in a child's result: its one-line reason, then the last lines of the traceback."""
    first = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
    return f"{first}\n{error_tail(formatted_traceback)}"


def exit_now(code: int) -> None:
    """Leave without the interpreter's teardown: everything the child owes is on disk, and tearing
    down torch, AutoGluon or H2O modules takes seconds that are nobody's work. Anything the child left
    running is the supervisor's to kill (it ends the child's process group)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
