"""Runs at once on one project and its embedded store, and a run killed with SIGKILL.

Two different suites at once both finish with their records intact; the same suite twice at once
is refused in one sentence; `kill -9` of the command leaves no process of the run alive (workers,
fork server, Prefect's ephemeral API server), checked by process group and by environment.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from run_support.project import add_suites, executions, job_runs, run_cli, start_cli

pytestmark = pytest.mark.integration

CHEAP = {"datasets": ["penguins"], "frameworks": ["constant", "hgb"], "folds": 1, "budget": "test"}
HELD = {"datasets": ["penguins"], "frameworks": ["constant", "flaky"], "folds": 1, "budget": "test"}


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(item.decode(errors="replace").split("=", 1) for item in raw.split(b"\0") if b"=" in item)


def _live(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def _pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _of_project(home: Path) -> list[int]:
    """Every live process started for this scratch project (they all inherit AUTOML_EVAL_HOME)."""
    return [pid for pid in _pids() if _live(pid) and _environ(pid).get("AUTOML_EVAL_HOME") == str(home)]


def _in_group(group: int) -> list[int]:
    found = []
    for pid in _pids():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == group:
            found.append(pid)
    return found


def _prefect_servers(home: Path) -> list[int]:
    return [pid for pid in _of_project(home)
            if _environ(pid).get("PREFECT__SERVER_EPHEMERAL") == "1"
            and _environ(pid).get("PREFECT_HOME") == str(home / ".prefect")]


def _first_job_logged(home: Path, process, timeout_s: float = 300) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while True:
        for record in (home / "runs").glob("*/*/tracking.json"):
            try:
                if json.loads(record.read_text()).get("run_id"):
                    return
            except (OSError, json.JSONDecodeError):
                continue
        assert process.poll() is None, process.stdout.read()
        assert time.monotonic() < deadline, "no job was recorded in time"
        time.sleep(0.2)


def test_two_different_suites_at_once_both_finish(data_home) -> None:  # noqa: ANN001
    home = add_suites(data_home("penguins"), {"left": CHEAP, "right": CHEAP})
    processes = {name: start_cli(home, "run", name) for name in ("left", "right")}
    outputs = {name: process.communicate(timeout=600)[0] for name, process in processes.items()}
    for name, process in processes.items():
        assert process.returncode == 0, outputs[name]
        assert "database is locked" not in outputs[name], outputs[name]
        [execution] = executions(home, name)
        assert execution.data.tags["execution_state"] == "finished"
        runs = job_runs(home, execution.info.run_id)
        assert len(runs) == 2 and {run.data.tags["status"] for run in runs} == {"ok"}
        assert set(Counter(run.data.tags["job_key"] for run in runs).values()) == {1}


def test_same_suite_twice_is_refused_and_kill_9_leaves_no_process(data_home, tmp_path: Path) -> None:  # noqa: ANN001
    home = add_suites(data_home("penguins"), {"held": HELD})
    hold = tmp_path / "hold"
    hold.touch()  # the flaky job waits in its fit, so the run is mid-suite for as long as needed
    first = start_cli(home, "run", "held", "--parallel", "1", FLAKY_HOLD=str(hold))
    try:
        _first_job_logged(home, first)
        second = run_cli(home, "run", "held", timeout=300)
        assert second.returncode == 2, second.stdout + second.stderr
        assert "already running" in second.stdout + second.stderr
        assert "Traceback" not in second.stdout + second.stderr

        assert _prefect_servers(home), "the run should have an ephemeral Prefect API server by now"
        before = _of_project(home)
        assert len(before) >= 3  # the command, its Prefect server, the held job's worker (and more)
        os.kill(first.pid, signal.SIGKILL)  # the command alone, as `kill -9 PID` would
        first.wait(timeout=30)
        deadline = time.monotonic() + 30
        while (_in_group(first.pid) or _of_project(home)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _in_group(first.pid) == []
        assert _prefect_servers(home) == []
        assert _of_project(home) == []
    finally:
        hold.unlink(missing_ok=True)
        for pid in _of_project(home):  # never leave a test's processes behind, even when it fails
            os.kill(pid, signal.SIGKILL)
