"""No process outlives a run: the reaper ends the run's processes, and stale Prefect servers are stopped."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tasks import orphans

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def _gone(process: subprocess.Popen, timeout_s: float = 30) -> bool:
    deadline = time.monotonic() + timeout_s
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    return process.poll() is not None


def test_the_reaper_stops_every_process_of_the_run_when_the_run_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(orphans.TOKEN_ENV, raising=False)
    token = orphans.guard_this_run()
    monkeypatch.setenv(orphans.TOKEN_ENV, token)  # restored after the test
    # A descendant in a session of its own, as job workers and servers make for themselves.
    child = subprocess.Popen(SLEEPER, start_new_session=True)
    stranger = subprocess.Popen(SLEEPER, env={"PATH": "/usr/bin:/bin"})  # not of this run
    try:
        assert child.pid in orphans.processes_with_token(token)
        reaper = orphans._keep.pop()
        reaper.stdin.close()  # what the run's death does to the pipe
        assert _gone(child)
        assert reaper.wait(timeout=30) == 0
        assert stranger.poll() is None
    finally:
        for process in (child, stranger):
            process.kill()
            process.wait()


def test_stale_prefect_servers_of_the_project_are_stopped(tmp_path: Path) -> None:
    prefect_home = tmp_path / ".prefect"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    base = {"PATH": "/usr/bin:/bin", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT_HOME": str(prefect_home)}
    stale = subprocess.Popen(SLEEPER, env={**base, orphans.TOKEN_ENV: f"{dead.pid}-abc"})
    owned = subprocess.Popen(SLEEPER, env={**base, orphans.TOKEN_ENV: f"{os.getpid()}-def"})
    elsewhere = subprocess.Popen(SLEEPER, env={**base, "PREFECT_HOME": str(tmp_path / "other")})
    try:
        deadline = time.monotonic() + 10  # the children's environments are readable once they exec
        while stale.pid not in orphans.stop_stale_prefect_servers(prefect_home):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert _gone(stale)
        assert owned.poll() is None and elsewhere.poll() is None  # its run lives; another project's
    finally:
        for process in (stale, owned, elsewhere):
            process.kill()
            process.wait()
