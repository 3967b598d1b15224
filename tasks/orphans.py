"""No process outlives a killed run: every process a run starts carries its token, and a reaper ends them.

`automl-eval run` puts `AUTOML_EVAL_RUN_TOKEN` in its environment before it starts anything, so
each descendant (job workers, the warm fork server and its forks, H2O's JVM, Prefect's ephemeral
API server) has it in `/proc/PID/environ`, whatever process group it made for itself. A small reaper
process in a session of its own holds the read end of a pipe from the run: when the run ends,
however (`kill -9` included), the pipe closes and the reaper stops every process with the token.

Where that did not happen (the reaper itself was killed, or a run from before), the next run stops
stale Prefect API servers of the project's `.prefect/` database before it starts its own.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

TOKEN_ENV = "AUTOML_EVAL_RUN_TOKEN"
GRACE_S = 3.0


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # gone, or not ours to read
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {key.decode(errors="replace"): value.decode(errors="replace") for key, value in pairs}


def _processes() -> Iterator[int]:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            yield int(entry.name)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _stop(pids: list[int]) -> None:
    """SIGTERM, a short grace, then SIGKILL for whatever is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(OSError):  # already gone
                os.kill(pid, sig)
        deadline = time.monotonic() + GRACE_S
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)


def processes_with_token(token: str) -> list[int]:
    return [pid for pid in _processes() if _environ(pid).get(TOKEN_ENV) == token]


# ---------------------------------------------------------------- the run's side


def guard_this_run() -> str:
    """Mark this process's future descendants and start the reaper; returns the run's token."""
    token = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
    env = {key: value for key, value in os.environ.items() if key != TOKEN_ENV}
    reaper = subprocess.Popen([sys.executable, "-m", "tasks.orphans", token], stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                              start_new_session=True)
    _keep.append(reaper)  # its stdin stays open for as long as this process lives
    os.environ[TOKEN_ENV] = token
    return token


_keep: list[subprocess.Popen[bytes]] = []


def stop_stale_prefect_servers(prefect_home: Path) -> list[int]:
    """Prefect ephemeral API servers on this project's database whose run is gone; stopped."""
    home = str(prefect_home)
    stale = []
    for pid in _processes():
        env = _environ(pid)
        if env.get("PREFECT__SERVER_EPHEMERAL") != "1" or env.get("PREFECT_HOME") != home:
            continue
        token = env.get(TOKEN_ENV, "")
        owner = int(token.split("-", 1)[0]) if token.split("-", 1)[0].isdigit() else 0
        if not (owner > 0 and _alive(owner)):  # its run is gone (or it predates run tokens)
            stale.append(pid)
    if stale:
        _stop(stale)
    return stale


# ---------------------------------------------------------------- the reaper process


def reap(token: str) -> None:
    sys.stdin.buffer.read()  # returns at EOF: the run has ended, one way or another
    # Descendants may still be starting one another: sweep until none is found.
    for _ in range(5):
        found = processes_with_token(token)
        if not found:
            return
        _stop(found)


if __name__ == "__main__":
    reap(sys.argv[1])
