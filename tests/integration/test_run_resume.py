"""`automl-eval run` end to end with cheap frameworks: interrupt, resume, then retry the failure.

The real command runs in a subprocess on a scratch project (its own embedded MLflow store and
Prefect home); the test reads the record back from MLflow after each step.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from run_support.project import add_suites, client, executions, job_runs, run_cli, start_cli

pytestmark = pytest.mark.integration

# `flaky` fails while the marker file exists; with one job at a time, `constant` runs first.
SUITE = {"datasets": ["penguins"], "frameworks": ["constant", "flaky"], "folds": 1, "budget": "test"}


def _logged_job_dirs(home: Path) -> list[Path]:
    logged = []
    for record in (home / "runs").glob("*/*/tracking.json"):
        try:
            if json.loads(record.read_text()).get("run_id"):
                logged.append(record.parent)
        except (OSError, json.JSONDecodeError):
            continue  # being rewritten right now
    return logged


def _interrupt_after_first_record(home: Path, marker: Path) -> None:
    # The second job (flaky) is held in its fit until the kill, so exactly one job is recorded.
    hold = marker.with_name("hold")
    hold.touch()
    process = start_cli(home, "run", "mini", "--parallel", "1", FLAKY_MARKER=str(marker),
                        FLAKY_HOLD=str(hold))
    deadline = time.monotonic() + 300
    try:
        while not _logged_job_dirs(home):
            assert process.poll() is None, f"the run ended before an interruption:\n{process.stdout.read()}"
            assert time.monotonic() < deadline, "no job was recorded within 5 minutes"
            time.sleep(0.2)
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # as a crash would: no clean-up runs
        process.wait(timeout=60)
        hold.unlink()


def test_interrupted_run_resumes_then_retry_replaces_the_failure(data_home, tmp_path: Path) -> None:  # noqa: ANN001
    home = add_suites(data_home("penguins"), {"mini": SUITE})
    marker = tmp_path / "fail-now"
    marker.touch()

    # 1. killed after its first job was recorded
    _interrupt_after_first_record(home, marker)
    [interrupted] = executions(home, "mini")
    assert interrupted.data.tags["execution_state"] == "running"
    [first] = job_runs(home, interrupted.info.run_id)
    assert first.data.tags["framework"] == "constant" and first.data.tags["status"] == "ok"

    # 2. the next run resumes that execution and runs only what is missing
    resumed = run_cli(home, "run", "mini", FLAKY_MARKER=str(marker))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr  # a failed job never fails the suite
    [execution] = executions(home, "mini")
    assert execution.info.run_id == interrupted.info.run_id
    assert execution.data.tags["execution_state"] == "finished"
    runs = {run.data.tags["framework"]: run for run in job_runs(home, execution.info.run_id)}
    assert Counter(run.data.tags["job_key"] for run in runs.values()).most_common(1)[0][1] == 1
    assert runs["constant"].info.run_id == first.info.run_id  # finished, so not run again
    assert runs["flaky"].data.tags["status"] == "failed"
    assert "failing on purpose" in runs["flaky"].data.tags["error"]
    assert "mini — execution" in resumed.stdout and "constant" in resumed.stdout  # the leaderboard

    # 3. --retry-failed re-runs exactly the failure; its new record replaces the old one
    marker.unlink()
    retried = run_cli(home, "run", "mini", "--retry-failed", FLAKY_MARKER=str(marker))
    assert retried.returncode == 0, retried.stdout + retried.stderr
    assert len(executions(home, "mini")) == 1
    after = {run.data.tags["framework"]: run for run in job_runs(home, execution.info.run_id)}
    assert len(job_runs(home, execution.info.run_id)) == 2
    assert after["flaky"].data.tags["status"] == "ok"
    assert after["flaky"].info.run_id != runs["flaky"].info.run_id
    assert after["constant"].info.run_id == first.info.run_id
    assert client(home).get_run(runs["flaky"].info.run_id).info.lifecycle_stage == "deleted"
