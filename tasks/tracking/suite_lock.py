"""One run of a suite at a time in a project: a lock on its executions.

Two runs of the same suite would resume the same execution and share its job folders (one job key,
one folder), each replacing what the other wrote. The lock is an advisory file lock under
`runs/SUITE/`, held for the life of the process that runs the suite: the OS drops it when that
process ends, however it ends (`kill -9` included), so a stale lock never blocks the next run.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from tasks import paths
from tasks.errors import UserError

LOCK_FILE = ".run.lock"
_held: dict[str, IO[str]] = {}  # suite -> the open lock file of this process


def lock_path(suite: str) -> Path:
    return paths.runs_dir() / suite / LOCK_FILE


def hold(suite: str) -> None:
    """Take the suite's lock for this process (again: no-op), or say in one sentence who holds it."""
    if suite in _held:
        return
    path = lock_path(suite)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise UserError(f"suite '{suite}' is already running in this project (process {holder}); "
                        "wait for that run to end, or stop it, then run it again.") from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    _held[suite] = handle


def release(suite: str) -> None:
    handle = _held.pop(suite, None)
    if handle is not None:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def running_elsewhere(suite: str) -> bool:
    """Whether another process runs this suite now (its job folders are that process's to log)."""
    if suite in _held:
        return False
    path = lock_path(suite)
    if not path.is_file():
        return False
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False
