"""Benchmark: the two routes to long-lived workers, on one stack, with the same jobs.

- task workers: Prefect background tasks (`task.delay()`) taken by `python -m flows.team_worker`
  processes, the route team mode uses;
- Dask: a flow whose DaskTaskRunner (prefect-dask) sends the jobs to a `distributed` LocalCluster
  of worker processes, the route for users who already run Dask (HPC, Kubernetes).

Both run each job through flows.dispatch.run_and_record (each worker process forking jobs from its
own warm fork server) and record it in the same MLflow server. Printed per route: jobs/minute,
dispatch latency p50/p99 (as in bench_team), and how long the workers took to become ready.
prefect-dask is not a dependency of the project: without it the Dask route is reported as not
measured (`pip install prefect-dask` to measure it).
Run: `python -m bench.bench_dispatch_routes [JOBS] [WORKERS]` (default 40 jobs, 2 workers).
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from prefect import flow, task

from bench.bench_team import dispatch_latencies, fresh_jobs, percentile, scratch_home, wait_for_workers
from flows.dispatch import JobOutcome

# The smoke run of tests/integration/test_bench_smoke.py (positional: JOBS WORKERS): one job on one
# worker per route still starts the stack and goes through each route's whole path.
SMOKE_ARGS: tuple[str, ...] = ("1", "1")
SMOKE_SERVICES: tuple[str, ...] = ("postgresql",)  # its MLflow server's database


@task(name="dask-job")
def dask_job(job: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    """One job on a Dask worker process (the fork server is per process, started on first use); a
    plain dict back, as a team worker answers, for JobOutcome.from_dict on the flow's side."""
    from flows.dispatch import JobContext, run_and_record
    from tasks.plan import Job

    started = time.time()
    _, outcome = run_and_record(Job.from_dict(job), JobContext(**context), None)
    return {**outcome.to_dict(), "worker": str(os.getpid()), "pid": os.getpid(), "started_unix": started,
            "finished_unix": time.time()}


def _run_on_dask(jobs: list[Any], contexts: dict[str, Any],
                 workers: int) -> tuple[float, float, list[JobOutcome]]:
    from prefect_dask import DaskTaskRunner

    runner = DaskTaskRunner(cluster_kwargs={"n_workers": workers, "threads_per_worker": 1, "processes": True,
                                            "dashboard_address": None})  # no web server

    @flow(name="bench-dask-route", task_runner=runner)
    def route() -> tuple[float, list[JobOutcome]]:
        ready = time.perf_counter()
        futures, submitted = [], []
        for job in jobs:
            submitted.append(time.time())
            futures.append(dask_job.submit(job.to_dict(), dict(contexts[job.key].__dict__)))
        outcomes = [JobOutcome.from_dict({**future.result(), "submitted_unix": at})
                    for future, at in zip(futures, submitted, strict=True)]
        return ready, outcomes

    started = time.perf_counter()
    ready, outcomes = route()
    return ready - started, time.perf_counter() - ready, outcomes


def _report(route: str, count: int, wall: float, ready_s: float,
            outcomes: list[JobOutcome]) -> dict[str, float]:
    bad = [o for o in outcomes if o.status != "ok"]
    if bad:
        raise SystemExit(f"{route}: {len(bad)} job(s) did not finish ok: {bad[:2]}")
    latencies = dispatch_latencies(outcomes)
    figures = {"jobs_per_min": count / wall * 60, "dispatch_p50_s": statistics.median(latencies),
               "dispatch_p99_s": percentile(latencies, 0.99), "ready_s": ready_s}
    print(f"{route}: {count} jobs in {wall:.0f} s = {figures['jobs_per_min']:.1f} jobs/min; dispatch p50 "
          f"{figures['dispatch_p50_s']:.2f} s, p99 {figures['dispatch_p99_s']:.2f} s; workers ready in "
          f"{ready_s:.1f} s", flush=True)
    return figures


def main(jobs_count: int = 40, workers: int = 2) -> dict[str, float]:
    from prefect.settings import (
        PREFECT_API_AUTH_STRING,
        PREFECT_API_URL,
        PREFECT_LOCAL_STORAGE_PATH,
        temporary_settings,
    )

    from flows.team_dispatch import TeamDispatcher
    from ops import team_stack

    figures: dict[str, float] = {}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-routes-") as tmp:
        home = scratch_home(Path(tmp))
        settings = team_stack.StackSettings(
            state_dir=home / ".team", prefect_port=team_stack.free_port(), mlflow_port=team_stack.free_port(),
            db_prefix=f"automl_eval_bench_{uuid.uuid4().hex[:8]}", workers=[],
            extra_worker_env={"AUTOML_EVAL_HOME": str(home)},
        )
        os.environ["AUTOML_EVAL_HOME"] = str(home)
        try:
            team_stack.up(settings)
            creds = team_stack.credentials(settings)
            client_env = team_stack.client_env(settings, creds)
            os.environ.update({k: v for k, v in client_env.items() if k != "AUTOML_EVAL_MODE"})
            with temporary_settings({PREFECT_API_URL: settings.prefect_api_url,
                                     PREFECT_API_AUTH_STRING: client_env["PREFECT_API_AUTH_STRING"],
                                     PREFECT_LOCAL_STORAGE_PATH: client_env["PREFECT_LOCAL_STORAGE_PATH"]}):
                names = {f"cpu-{n + 1}" for n in range(workers)}
                started = time.perf_counter()
                for name in sorted(names):
                    team_stack.restart_worker(settings, creds, team_stack.WorkerSpec(name, "cpu", 1))
                wait_for_workers(names)
                ready_s = time.perf_counter() - started
                jobs, contexts = fresh_jobs(jobs_count, "route-task-workers")
                began = time.perf_counter()
                outcomes = TeamDispatcher().run(jobs, contexts)
                figures.update({f"task_workers_{k}": v for k, v in _report(
                    "task workers", jobs_count, time.perf_counter() - began, ready_s, outcomes).items()})
                for name in sorted(names):
                    team_stack.kill_process(settings.state_dir, f"worker-{name}")
                if importlib.util.find_spec("prefect_dask") is None:
                    print("dask: not measured (prefect-dask is not installed; `pip install prefect-dask`)")
                else:
                    jobs, contexts = fresh_jobs(jobs_count, "route-dask")
                    ready_s, wall, outcomes = _run_on_dask(jobs, contexts, workers)
                    figures.update({f"dask_{k}": v for k, v in _report(
                        "dask", jobs_count, wall, ready_s, outcomes).items()})
        finally:
            os.environ.pop("AUTOML_EVAL_HOME", None)
            team_stack.down(settings.state_dir)
            team_stack.drop_databases(settings)
    print(f"{workers} workers, {jobs_count} `constant` jobs per route; load average before "
          f"{load_before:.1f}, after {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return figures


if __name__ == "__main__":
    main(*(int(arg) for arg in sys.argv[1:3]))
