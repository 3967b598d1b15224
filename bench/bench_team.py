"""Benchmark: team mode on this machine, on long-lived workers (flows/team_worker.py).

It starts its own stack on free ports (Prefect server with its credential, MLflow on a throwaway
PostgreSQL database, team workers of limit 1) in a scratch project, and removes it all at the end.
Every mode logs to the same MLflow server, so the differences are the dispatch, not the store.
Jobs are `constant` on breast_cancer under the one-core `test` budget: what is measured is the
harness and the orchestration around a job, not a framework.

Figures:
- team-mode overhead per job against embedded mode (the same jobs one at a time in this process);
- for 1, 2, 4 and 8 workers on 127.0.0.1 (each worker one job at a time, the budget's one core):
  jobs/minute, dispatch latency p50/p99, and the CPU seconds the Prefect server and the MLflow
  server spent per job; the 2-worker/1-worker throughput ratio comes from these.

Dispatch latency of a job = its start on a worker - max(its submission, the end of that worker's
previous job): how long a job that could run waited for a free worker to start it. Queueing
behind busy workers is not dispatch and is left out.

Run: `python -m bench.bench_team [--jobs 104] [--workers 1,2,4,8] [--overhead-jobs 10]`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the dispatchers' outcome type; flows.dispatch imports Prefect, main() imports it late
    from flows.dispatch import JobOutcome

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SUITE = "bench_team"
DATASET = "breast_cancer"
FRAMEWORK = "constant"  # the cheapest job: what is measured is the harness around it
# The smoke run of tests/integration/test_bench_smoke.py: one job per mode and one worker still
# starts the whole stack and goes through the embedded and the team dispatcher.
SMOKE_ARGS: tuple[str, ...] = ("--jobs", "1", "--workers", "1", "--overhead-jobs", "1")
SMOKE_SERVICES: tuple[str, ...] = ("postgresql",)  # its MLflow server's database


def scratch_home(tmp: Path) -> Path:
    home = tmp / "home"
    shutil.copytree(PROJECT_ROOT / "specs", home / "specs")
    shutil.copy(PROJECT_ROOT / "prefect.yaml", home / "prefect.yaml")
    (home / "datasets").symlink_to(PROJECT_ROOT / "datasets")
    (home / "flows").symlink_to(PROJECT_ROOT / "flows")
    return home


def fresh_jobs(count: int, label: str) -> tuple[list[Any], dict[str, Any]]:
    """`count` fresh jobs (seeds make distinct jobs on one fold), in an execution of their own."""
    from flows.benchmark import data_version
    from flows.dispatch import JobContext
    from tasks.plan import make_jobs
    from tasks.specs import FrameworkRef, load_budget, load_dataset_spec
    from tasks.tracking.execution import start_execution

    spec = load_dataset_spec(DATASET)
    jobs = make_jobs(SUITE, {spec.name: data_version(spec)}, [FrameworkRef(name=FRAMEWORK)], 1,
                     list(range(count)), load_budget("test"))
    execution = start_execution(SUITE, team=label)
    contexts = {job.key: JobContext(execution=execution.__dict__, problem_type=spec.problem_type,
                                    metric=str(spec.metric)) for job in jobs}
    return jobs, contexts


def _run(dispatcher: Any, count: int, label: str) -> tuple[float, list[JobOutcome]]:
    jobs, contexts = fresh_jobs(count, label)
    started = time.perf_counter()
    outcomes = dispatcher.run(jobs, contexts)
    wall = time.perf_counter() - started
    bad = [o for o in outcomes if o.status != "ok"]
    if bad:
        raise SystemExit(f"{label}: {len(bad)} job(s) did not finish ok: {bad[:2]}")
    return wall, outcomes


def _timings(outcome: JobOutcome) -> tuple[float, float, float]:
    """(submitted, started, finished) of a job a long-lived worker ran; only such a worker's answer
    carries them (an embedded job's outcome has none), so their absence is a mistake of the caller."""
    submitted, started, finished = outcome.submitted_unix, outcome.started_unix, outcome.finished_unix
    if submitted is None or started is None or finished is None:
        raise ValueError(f"job {outcome.job_key} has no worker timings: not run by a long-lived worker")
    return submitted, started, finished


def dispatch_latencies(outcomes: list[JobOutcome]) -> list[float]:
    """Per job: start - max(submitted, end of the same worker's previous job)."""
    by_worker: dict[str, list[tuple[float, float, float]]] = {}
    for outcome in outcomes:
        by_worker.setdefault(outcome.worker, []).append(_timings(outcome))
    latencies = []
    for runs in by_worker.values():
        runs.sort(key=lambda timings: timings[1])
        previous_end = 0.0
        for submitted, started, finished in runs:
            latencies.append(started - max(submitted, previous_end))
            previous_end = finished
    return latencies


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _cpu_s(pid: int) -> float:
    import psutil

    try:
        root = psutil.Process(pid)
        total = 0.0
        for process in [root, *root.children(recursive=True)]:
            try:
                times = process.cpu_times()  # children_*: its children that ended (recycled server workers)
                total += times.user + times.system + times.children_user + times.children_system
            except psutil.Error:
                continue
        return total
    except psutil.Error:
        return 0.0


def wait_for_workers(names: set[str], timeout_s: float = 300) -> None:
    from prefect.client.orchestration import get_client

    from flows.team_worker import read_heartbeats

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with get_client(sync_client=True) as client:
            online = {beat.name for beat in read_heartbeats(client) if beat.alive()}
        if names <= online:
            time.sleep(2)  # the worker subscribes to the server right after its first beat
            return
        time.sleep(1)
    raise SystemExit(f"workers {sorted(names)} did not come online within {timeout_s:.0f} s")


def main(jobs_count: int = 104, worker_counts: tuple[int, ...] = (1, 2, 4, 8),
         overhead_jobs: int = 10) -> dict[str, float]:
    from prefect.settings import (
        PREFECT_API_AUTH_STRING,
        PREFECT_API_URL,
        PREFECT_LOCAL_STORAGE_PATH,
        PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW,
        temporary_settings,
    )

    from flows.dispatch import EmbeddedDispatcher
    from flows.team_dispatch import TeamDispatcher
    from ops import team_stack

    figures: dict[str, float] = {"jobs": float(jobs_count)}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-team-") as tmp:
        home = scratch_home(Path(tmp))
        settings = team_stack.StackSettings(
            state_dir=home / ".team", prefect_port=team_stack.free_port(), mlflow_port=team_stack.free_port(),
            db_prefix=f"automl_eval_bench_{uuid.uuid4().hex[:8]}", workers=[], worker_poll_s=5,
            extra_worker_env={"AUTOML_EVAL_HOME": str(home)},
        )
        os.environ["AUTOML_EVAL_HOME"] = str(home)
        try:
            state = team_stack.up(settings)
            creds = team_stack.credentials(settings)
            client_env = team_stack.client_env(settings, creds)
            os.environ.update({k: v for k, v in client_env.items() if k != "AUTOML_EVAL_MODE"})
            with temporary_settings({PREFECT_API_URL: settings.prefect_api_url,
                                     PREFECT_API_AUTH_STRING: client_env["PREFECT_API_AUTH_STRING"],
                                     PREFECT_LOCAL_STORAGE_PATH: client_env["PREFECT_LOCAL_STORAGE_PATH"],
                                     # Embedded jobs run outside a flow here: their logs stay local.
                                     PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW: "ignore"}):
                started: list[str] = []
                for workers in sorted(worker_counts):
                    while len(started) < workers:
                        name = f"cpu-{len(started) + 1}"
                        team_stack.restart_worker(settings, creds, team_stack.WorkerSpec(name, "cpu", 1))
                        started.append(name)
                    wait_for_workers(set(started))
                    if workers == 1:
                        embedded_s, _ = _run(EmbeddedDispatcher(parallel=1), overhead_jobs, "embedded")
                        team_s, _ = _run(TeamDispatcher(), overhead_jobs, "team-1-worker-serial")
                        figures["embedded_per_job_s"] = embedded_s / overhead_jobs
                        figures["team_1_worker_per_job_s"] = team_s / overhead_jobs
                        figures["team_overhead_per_job_s"] = (team_s - embedded_s) / overhead_jobs
                    servers = ("prefect-server", "mlflow-server")
                    servers_before = {name: _cpu_s(state.pids[name]) for name in servers}
                    wall, outcomes = _run(TeamDispatcher(), jobs_count, f"team-{workers}-workers")
                    latencies = dispatch_latencies(outcomes)
                    figures[f"w{workers}_jobs_per_min"] = jobs_count / wall * 60
                    figures[f"w{workers}_dispatch_p50_s"] = statistics.median(latencies)
                    figures[f"w{workers}_dispatch_p99_s"] = percentile(latencies, 0.99)
                    for name, before in servers_before.items():
                        spent = _cpu_s(state.pids[name]) - before
                        figures[f"w{workers}_{name.split('-')[0]}_cpu_s_per_job"] = spent / jobs_count
                    print(f"{workers} worker(s): {jobs_count} jobs in {wall:.0f} s = "
                          f"{figures[f'w{workers}_jobs_per_min']:.1f} jobs/min; dispatch p50 "
                          f"{figures[f'w{workers}_dispatch_p50_s']:.2f} s, p99 "
                          f"{figures[f'w{workers}_dispatch_p99_s']:.2f} s; server CPU per job: Prefect "
                          f"{figures[f'w{workers}_prefect_cpu_s_per_job']:.3f} s, MLflow "
                          f"{figures[f'w{workers}_mlflow_cpu_s_per_job']:.3f} s", flush=True)
        finally:
            os.environ.pop("AUTOML_EVAL_HOME", None)
            team_stack.down(settings.state_dir)
            team_stack.drop_databases(settings)
    if "w1_jobs_per_min" in figures and "w2_jobs_per_min" in figures:
        figures["throughput_ratio_2v1"] = figures["w2_jobs_per_min"] / figures["w1_jobs_per_min"]
    load_after = os.getloadavg()
    print(f"team mode, {FRAMEWORK} on {DATASET}, one-core jobs; load average before "
          f"{load_before[0]:.1f}, after {load_after[0]:.1f} on {os.cpu_count()} cores")
    if "team_overhead_per_job_s" in figures:
        print(f"  {overhead_jobs} jobs one at a time: embedded {figures['embedded_per_job_s']:.2f} s/job, "
              f"team (1 worker) {figures['team_1_worker_per_job_s']:.2f} s/job -> team-mode overhead "
              f"{figures['team_overhead_per_job_s']:+.2f} s per job (target <= 1 s)")
    if "throughput_ratio_2v1" in figures:
        print(f"  2 workers vs 1: {figures['throughput_ratio_2v1']:.2f}x throughput (target >= 1.9x)")
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.bench_team", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=104, help="jobs per worker count (default 104)")
    parser.add_argument("--workers", default="1,2,4,8", help="worker counts (default 1,2,4,8)")
    parser.add_argument("--overhead-jobs", type=int, default=10,
                        help="jobs for team vs embedded (default 10)")
    args = parser.parse_args()
    main(args.jobs, tuple(int(n) for n in args.workers.split(",")), args.overhead_jobs)
    sys.exit(0)
