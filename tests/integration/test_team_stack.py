"""Team mode on real servers on 127.0.0.1: Prefect server, two process workers in pool `cpu`, an
MLflow server on a throwaway PostgreSQL database with basic auth. One stack for the whole session
(the `team` fixture in tests/conftest.py; tests/ui uses it too)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from base64 import b64encode
from pathlib import Path
from typing import Any

import pytest
from team_support.stack import SUITE, TYPED_RUN_NAME, Team

pytestmark = [pytest.mark.integration, pytest.mark.services]

BIN = Path(sys.executable).parent


def _mlflow_status(team: Team, auth: tuple[str, str] | None) -> int:
    headers = {"Content-Type": "application/json"}
    if auth:
        headers["Authorization"] = "Basic " + b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    request = urllib.request.Request(f"{team.settings.mlflow_url}/api/2.0/mlflow/experiments/search",
                                     data=json.dumps({"max_results": 5}).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_mlflow_server_refuses_requests_without_credentials(team: Team) -> None:
    from flows.team_stack import WORKERS_PASSWORD_ENV, WORKERS_USER

    assert _mlflow_status(team, None) == 401
    assert _mlflow_status(team, (WORKERS_USER, "not-the-password")) == 401
    assert _mlflow_status(team, (WORKERS_USER, team.creds[WORKERS_PASSWORD_ENV])) == 200


def test_no_secret_reaches_the_logs(team: Team) -> None:
    logs = "".join(path.read_text(errors="replace") for path in team.settings.logs_dir.glob("*.log"))
    assert logs, "the stack wrote no logs"
    for secret in team.creds.values():
        assert secret not in logs


def _job_flow_runs(team: Team, suite_tag: str) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: team.settings.prefect_api_url}), \
            get_client(sync_client=True) as client:
        return list(client.read_flow_runs(
            flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(all_=[f"suite:{suite_tag}", "job"]))))


def _tag(flow_run: Any, name: str) -> str:
    return next((t.split(":", 1)[1] for t in flow_run.tags if t.startswith(f"{name}:")), "")


def test_manual_deployment_fans_jobs_out_to_both_workers(team: Team) -> None:
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    parameters = {"suite": SUITE, "frameworks": ["constant", "hgb"], "datasets": ["breast_cancer"],
                  "folds": 2, "budget": "test", "team": "qa"}
    with temporary_settings({PREFECT_API_URL: team.settings.prefect_api_url}):
        flow_run = run_deployment("automl-eval-manual/manual", parameters=parameters, timeout=600,
                                  poll_interval=3, flow_run_name=TYPED_RUN_NAME)
    assert flow_run.state is not None and flow_run.state.is_completed(), flow_run.state
    assert flow_run.name == TYPED_RUN_NAME  # the name typed in the form is kept

    job_runs = [run for run in _job_flow_runs(team, SUITE) if run.parent_task_run_id is not None]
    keys = {_tag(run, "job_key") for run in job_runs}
    assert len(keys) == 4
    assert all(run.state is not None and run.state.is_completed() for run in job_runs)
    assert {_tag(run, "worker") for run in job_runs} == {"cpu-1", "cpu-2"}

    # Every job is a finished run in the MLflow store on PostgreSQL, once, with the team tag.
    recorded = team.job_runs(_latest_execution(team))
    assert sorted(key for key, _ in recorded) == sorted(keys)
    assert {status for _, status in recorded} == {"ok"}
    teams = team.sql("SELECT DISTINCT value FROM tags WHERE key = 'team'")
    assert ("qa",) in teams


def _run_suite(team: Team, *extra: str) -> subprocess.Popen[str]:
    command = [str(BIN / "automl-eval"), "run", SUITE, "--frameworks", "constant", "--folds", "4", *extra]
    return subprocess.Popen(command, cwd=team.home, env=team.env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _latest_execution(team: Team) -> str:
    rows = team.sql(
        "SELECT r.run_uuid FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid AND t.key = 'suite' "
        "WHERE t.value = %s AND r.run_uuid NOT IN (SELECT run_uuid FROM tags WHERE key = 'job_key') "
        "ORDER BY r.start_time DESC LIMIT 1", SUITE)
    return rows[0][0]


def test_killed_worker_jobs_are_rerun_and_recorded_once(team: Team) -> None:
    from flows import team_stack

    earlier = {run.id for run in _job_flow_runs(team, SUITE)}
    suite = _run_suite(team, "--new")
    try:
        victim = None
        deadline = time.monotonic() + 300
        while victim is None and time.monotonic() < deadline and suite.poll() is None:
            runs = [run for run in _job_flow_runs(team, SUITE) if run.id not in earlier]
            on_cpu2 = [run for run in runs if _tag(run, "worker") == "cpu-2" and _tag(run, "pid")
                       and run.state is not None and run.state.is_running()]
            # Kill while no job is between taken and started, so every job of cpu-2 is running.
            if on_cpu2 and not any(run.state is not None and run.state.is_pending() for run in runs):
                victim = on_cpu2[0]
            time.sleep(0.5)
        assert victim is not None, "no job ran on worker cpu-2"
        team_stack.kill_process(team.settings.state_dir, "worker-cpu-2")  # the worker and its jobs
        output, _ = suite.communicate(timeout=400)
    finally:
        if suite.poll() is None:
            suite.kill()
    assert suite.returncode == 0, output

    execution_id = victim.parameters["context"]["execution"]["execution_id"]
    first = dict(team.job_runs(execution_id))
    assert len(first) == 4, output
    lost = {key for key, status in first.items() if status == "failed"}
    assert _tag(victim, "job_key") in lost

    # The machine comes back; the re-run runs exactly the lost jobs.
    worker = team_stack.WorkerSpec("cpu-2", "cpu", 2)
    team_stack.restart_worker(team.settings, team.creds, worker)
    rerun = _run_suite(team, "--retry-failed")
    output, _ = rerun.communicate(timeout=400)
    assert rerun.returncode == 0, output

    after = team.job_runs(execution_id)
    keys = [key for key, _ in after]
    assert len(keys) == len(set(keys)) == 4, "a job key has two live runs"
    assert {status for _, status in after} == {"ok"}
    # The lost jobs ran again (their first flow runs never completed: their process was killed).
    completed_here = {_tag(run, "job_key") for run in _job_flow_runs(team, SUITE)
                      if run.parameters["context"]["execution"]["execution_id"] == execution_id
                      and run.state is not None and run.state.is_completed()}
    assert lost <= completed_here


def test_gpu_job_is_skipped_with_a_reason_when_the_team_has_no_gpu(team: Team,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.settings import PREFECT_API_URL, PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW, temporary_settings

    for name, value in team.env.items():
        if name.startswith(("MLFLOW_", "AUTOML_EVAL_")):
            monkeypatch.setenv(name, value)
    from flows.benchmark import data_version
    from flows.dispatch import JobContext, execute_jobs
    from tasks.plan import make_jobs
    from tasks.specs import FrameworkRef, load_budget, load_dataset_spec
    from tasks.tracking import log as tracking

    spec = load_dataset_spec("breast_cancer")
    version = data_version(spec)
    cpu_jobs = make_jobs("team_gpu", {spec.name: version}, [FrameworkRef(name="constant")], 1, [0],
                         load_budget("test"))
    gpu_jobs = make_jobs("team_gpu", {spec.name: version}, [FrameworkRef(name="constant")], 1, [0],
                         load_budget("5m1c1g"))
    # The suite side runs here outside any flow (the suite flow would be its context): the
    # skipped job's record task then has no flow run to send its logs to, which is expected.
    with temporary_settings({PREFECT_API_URL: team.settings.prefect_api_url,
                             PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW: "ignore"}):
        execution = tracking.start_execution("team_gpu", team="qa")
        contexts = {job.key: JobContext(execution=execution.__dict__, problem_type="binary", metric="auc")
                    for job in cpu_jobs + gpu_jobs}
        outcomes = {o["job_key"]: o for o in execute_jobs(cpu_jobs + gpu_jobs, contexts)}

    assert outcomes[cpu_jobs[0].key]["status"] == "ok"
    assert outcomes[gpu_jobs[0].key]["status"] == "skipped"
    recorded = dict(team.job_runs(execution.execution_id))
    assert recorded == {cpu_jobs[0].key: "ok", gpu_jobs[0].key: "skipped"}
    (reason,) = team.sql(
        "SELECT t.value FROM tags t JOIN tags k ON k.run_uuid = t.run_uuid AND k.key = 'job_key' "
        "AND k.value = %s WHERE t.key = 'error'", gpu_jobs[0].key)[0]
    assert "GPU" in reason and "gpu" in reason
