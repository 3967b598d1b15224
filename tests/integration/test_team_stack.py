"""Team mode on real servers on 127.0.0.1: a Prefect server that asks for its credential, the
process worker of the suite flows, two long-lived team workers, an MLflow server on a throwaway
PostgreSQL database with basic auth. One stack for the whole session (the `team` fixture in
tests/conftest.py, from tests/team_support/stack.py; tests/ui uses it too)."""

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
    from ops.team_stack import WORKERS_PASSWORD_ENV, WORKERS_USER

    assert _mlflow_status(team, None) == 401
    assert _mlflow_status(team, (WORKERS_USER, "not-the-password")) == 401
    assert _mlflow_status(team, (WORKERS_USER, team.creds[WORKERS_PASSWORD_ENV])) == 200


def test_no_secret_reaches_the_logs(team: Team) -> None:
    logs = "".join(path.read_text(errors="replace") for path in team.settings.logs_dir.glob("*.log"))
    assert logs, "the stack wrote no logs"
    for secret in team.creds.values():
        assert secret not in logs


def _prefect_settings(team: Team, auth: str | None = "ours") -> Any:
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    from ops.team_stack import PREFECT_AUTH_ENV

    value = team.creds[PREFECT_AUTH_ENV] if auth == "ours" else auth
    return temporary_settings({PREFECT_API_URL: team.settings.prefect_api_url,
                               PREFECT_API_AUTH_STRING: value})


def _heartbeats(team: Team) -> dict[str, Any]:
    from prefect.client.orchestration import get_client

    from flows.team_worker import read_heartbeats

    with _prefect_settings(team), get_client(sync_client=True) as client:
        return {beat.name: beat for beat in read_heartbeats(client)}


def _prefect_status(team: Team, method: str, path: str, body: dict[str, Any] | None,
                    auth: str | None) -> int:
    headers = {"Content-Type": "application/json"}
    if auth is not None:
        headers["Authorization"] = "Basic " + b64encode(auth.encode()).decode()
    request = urllib.request.Request(f"{team.settings.prefect_api_url}{path}", method=method, headers=headers,
                                     data=json.dumps(body).encode() if body is not None else None)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _websocket_answer(team: Team, path: str, token: str | None, *, subprotocol: bool = True) -> str:
    """What the server says to a websocket client: 'auth_success', or how it closed the socket."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    url = team.settings.prefect_api_url.replace("http://", "ws://") + path
    try:
        with connect(url, subprotocols=["prefect"] if subprotocol else None, open_timeout=30) as socket:
            socket.send(json.dumps({"type": "auth", "token": token}))
            return str(json.loads(socket.recv(timeout=30)).get("type"))
    except ConnectionClosed as exc:
        return f"closed {exc.rcvd.code if exc.rcvd else 'without a code'}"
    except Exception as exc:  # refused during the handshake
        return f"refused {type(exc).__name__}"


def test_prefect_server_refuses_requests_without_its_credential(team: Team) -> None:
    from ops.team_stack import PREFECT_AUTH_ENV

    ours = team.creds[PREFECT_AUTH_ENV]
    assert _prefect_status(team, "POST", "/deployments/filter", {"limit": 5}, None) == 401
    assert _prefect_status(team, "POST", "/deployments/filter", {"limit": 5}, "automl-eval:guess") == 401
    assert _prefect_status(team, "POST", "/deployments/filter", {"limit": 5}, ours) == 200
    # Triggering a deployment, the thing a stranger must never do.
    from prefect.client.orchestration import get_client

    with _prefect_settings(team), get_client(sync_client=True) as client:
        manual = client.read_deployment_by_name("automl-eval-manual/manual")
    trigger = f"/deployments/{manual.id}/create_flow_run"
    body = {"parameters": {"suite": SUITE}}
    assert _prefect_status(team, "POST", trigger, body, None) == 401
    assert _prefect_status(team, "POST", trigger, body, "automl-eval:guess") == 401
    with _prefect_settings(team, auth=None), get_client(sync_client=True) as client, \
            pytest.raises(Exception, match="401"):
        client.create_flow_run_from_deployment(manual.id, parameters={"suite": SUITE})
    # The websockets: events in and out, and the one that hands jobs to workers.
    for path in ("/events/in", "/events/out", "/task_runs/subscriptions/scheduled"):
        assert _websocket_answer(team, path, None).startswith(("closed", "refused")), path
        assert _websocket_answer(team, path, "automl-eval:guess").startswith(("closed", "refused")), path
        assert _websocket_answer(team, path, None, subprotocol=False).startswith(("closed", "refused")), path
    assert _websocket_answer(team, "/events/in", ours) == "auth_success"


def test_manual_deployment_runs_its_jobs_on_the_long_lived_workers(team: Team) -> None:
    from prefect.deployments import run_deployment

    before = _heartbeats(team)
    assert {"cpu-1", "cpu-2"} <= set(before) and all(before[name].alive() for name in ("cpu-1", "cpu-2"))
    parameters = {"suite": SUITE, "frameworks": ["constant", "hgb"], "datasets": ["breast_cancer"],
                  "folds": 2, "budget": "test", "team": "qa"}
    with _prefect_settings(team):
        flow_run = run_deployment("automl-eval-manual/manual", parameters=parameters, timeout=600,
                                  poll_interval=3, flow_run_name=TYPED_RUN_NAME)
    assert flow_run.state is not None and flow_run.state.is_completed(), flow_run.state
    assert flow_run.name == TYPED_RUN_NAME  # the name typed in the form is kept

    # Both workers took jobs, and each is still the process it was: no process per job.
    deadline = time.monotonic() + 60
    after = _heartbeats(team)
    while time.monotonic() < deadline and sum(after[n].done - before[n].done for n in ("cpu-1", "cpu-2")) < 4:
        time.sleep(1)  # the heartbeat after the last job
        after = _heartbeats(team)
    for name in ("cpu-1", "cpu-2"):
        assert after[name].pid == before[name].pid
        assert after[name].done > before[name].done, f"worker {name} took no job"
    assert sum(after[n].done - before[n].done for n in ("cpu-1", "cpu-2")) == 4

    # Every job is a finished run in the MLflow store on PostgreSQL, once, with the team tag.
    recorded = team.job_runs(_latest_execution(team))
    assert len(recorded) == len({key for key, _ in recorded}) == 4
    assert {status for _, status in recorded} == {"ok"}
    teams = team.sql("SELECT DISTINCT value FROM tags WHERE key = 'team'")
    assert ("qa",) in teams


def _run_suite(team: Team, *extra: str) -> subprocess.Popen[str]:
    command = [str(BIN / "automl-eval"), "run", SUITE, "--frameworks", "flaky", "--folds", "2", *extra]
    return subprocess.Popen(command, cwd=team.home, env=team.env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _latest_execution(team: Team) -> str:
    rows = team.sql(
        "SELECT r.run_uuid FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid AND t.key = 'suite' "
        "WHERE t.value = %s AND r.run_uuid NOT IN (SELECT run_uuid FROM tags WHERE key = 'job_key') "
        "ORDER BY r.start_time DESC LIMIT 1", SUITE)
    return rows[0][0]


def _holder_to_kill(team: Team, suite: subprocess.Popen[str]) -> str:
    """The worker to kill: one that holds a job once both jobs are handed out. Prefect's server
    does not hand tasks out in turn: a worker at its limit still takes one more and waits with it,
    so either worker may end up holding both. Waits for the data gate, slow on a busy host."""
    deadline = time.monotonic() + 900
    first_held: float | None = None
    while time.monotonic() < deadline and suite.poll() is None:
        beats = _heartbeats(team)
        held = {name: len(beats[name].running) for name in ("cpu-1", "cpu-2") if name in beats}
        if any(held.values()):
            first_held = first_held or time.monotonic()
            # Both jobs out, or the second one still queued well after the first was taken.
            if sum(held.values()) >= 2 or time.monotonic() - first_held > 20:
                return "cpu-2" if held.get("cpu-2") else "cpu-1"
        time.sleep(0.5)
    output = suite.communicate(timeout=60)[0] if suite.poll() is not None else ""
    pytest.fail(f"no worker ever held a job: {output[-2000:]}")


def test_killed_worker_jobs_are_failed_then_retried_and_recorded_once(team: Team) -> None:
    from ops import team_stack

    hold = team.home / "hold"  # the flaky jobs wait in their fit while it exists
    hold.touch()
    suite = _run_suite(team, "--new")
    try:
        # Kill a worker that holds a job (as when its machine dies), well within the job's time limit.
        victim = _holder_to_kill(team, suite)
        team_stack.kill_process(team.settings.state_dir, f"worker-{victim}")  # the worker and its jobs
        time.sleep(1)
        hold.unlink()  # what the other worker holds goes on
        output, _ = suite.communicate(timeout=400)
    finally:
        hold.unlink(missing_ok=True)
        if suite.poll() is None:
            suite.kill()
    assert suite.returncode == 0, output

    execution_id = _latest_execution(team)
    first = team.job_runs(execution_id)
    assert len(first) == 2, output
    failed = [key for key, status in first if status == "failed"]
    assert len(failed) >= 1, first  # the job(s) the victim held; what the other worker held is ok
    assert [status for _, status in first].count("ok") == 2 - len(failed)
    for key in failed:
        (reason,) = team.sql(
            "SELECT t.value FROM tags t JOIN tags k ON k.run_uuid = t.run_uuid AND k.key = 'job_key' "
            "AND k.value = %s WHERE t.key = 'error'", key)[0]
        assert "lost" in reason and victim in reason, reason

    # The machine comes back; the re-run runs exactly the lost job.
    team_stack.restart_worker(team.settings, team.creds, team_stack.WorkerSpec(victim, "cpu", 1))
    rerun = _run_suite(team, "--retry-failed")
    output, _ = rerun.communicate(timeout=400)
    assert rerun.returncode == 0, output
    assert f"ran {len(failed)} now" in output, output  # exactly the lost jobs

    after = team.job_runs(execution_id)
    keys = [key for key, _ in after]
    assert len(keys) == len(set(keys)) == 2, "a job key has two live runs"
    assert {status for _, status in after} == {"ok"}


def test_gpu_job_is_skipped_with_a_reason_when_the_team_has_no_gpu(team: Team,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.settings import (
        PREFECT_API_AUTH_STRING,
        PREFECT_API_URL,
        PREFECT_LOCAL_STORAGE_PATH,
        PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW,
        temporary_settings,
    )

    for name, value in team.env.items():
        if name.startswith(("MLFLOW_", "AUTOML_EVAL_")):
            monkeypatch.setenv(name, value)
    from flows.benchmark import data_version
    from flows.dispatch import JobContext
    from flows.team_dispatch import TeamDispatcher, choose_dispatcher
    from tasks.plan import make_jobs
    from tasks.specs import FrameworkRef, load_budget, load_dataset_spec
    from tasks.tracking.execution import start_execution

    spec = load_dataset_spec("breast_cancer")
    version = data_version(spec)
    cpu_jobs = make_jobs("team_gpu", {spec.name: version}, [FrameworkRef(name="constant")], 1, [0],
                         load_budget("test"))
    gpu_jobs = make_jobs("team_gpu", {spec.name: version}, [FrameworkRef(name="constant")], 1, [0],
                         load_budget("5m1c1g"))
    # The suite side runs here outside any flow (the suite flow would be its context): the
    # skipped job's record task then has no flow run to send its logs to, which is expected.
    with temporary_settings({PREFECT_API_URL: team.settings.prefect_api_url,
                             PREFECT_API_AUTH_STRING: team.env["PREFECT_API_AUTH_STRING"],
                             # The jobs' parameters go where the workers read them.
                             PREFECT_LOCAL_STORAGE_PATH: team.env["PREFECT_LOCAL_STORAGE_PATH"],
                             PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW: "ignore"}):
        execution = start_execution("team_gpu", team="qa")
        contexts = {job.key: JobContext(execution=execution.__dict__, problem_type="binary", metric="auc")
                    for job in cpu_jobs + gpu_jobs}
        dispatcher = choose_dispatcher()  # AUTOML_EVAL_MODE=team, as the stack's clients have it
        assert isinstance(dispatcher, TeamDispatcher)
        outcomes = {o.job_key: o for o in dispatcher.run(cpu_jobs + gpu_jobs, contexts)}

    assert outcomes[cpu_jobs[0].key].status == "ok"
    assert outcomes[gpu_jobs[0].key].status == "skipped"
    recorded = dict(team.job_runs(execution.execution_id))
    assert recorded == {cpu_jobs[0].key: "ok", gpu_jobs[0].key: "skipped"}
    (reason,) = team.sql(
        "SELECT t.value FROM tags t JOIN tags k ON k.run_uuid = t.run_uuid AND k.key = 'job_key' "
        "AND k.value = %s WHERE t.key = 'error'", gpu_jobs[0].key)[0]
    assert "GPU" in reason and "gpu" in reason
