"""Benchmark: the team across hosts (ops/cluster.py), and what its control plane costs per job.

It builds its own cluster (namespaces control, cpu-a, cpu-b, client; TLS; SeaweedFS; PostgreSQL on
control) in a scratch folder, adds light team workers spread over cpu-a and cpu-b, and removes it
all at the end (root only: it makes network namespaces). Jobs are `constant` on breast_cancer
under the one-core `test` budget, dispatched from `client`: what is measured is the control plane
and the harness, not a framework.

Figures:
- per-job overhead across hosts: the same jobs one at a time, dispatched to one worker on another
  host against run in-process on `client` (both record to the same MLflow server over TLS);
- for each worker count: jobs/minute, dispatch latency p50/p99 (as bench_team: a job's start on its
  worker - max(its submission, the end of that worker's previous job)), and the CPU-seconds per
  job of each control-plane part on `control`: the Prefect server, the MLflow server, PostgreSQL
  and the object store (every process of the control host, ended children included);
- a report over one execution of 10,000 job runs, read from the team's MLflow server (PostgreSQL
  on control) over HTTPS from `client`, built and logged back as `automl-eval report` does. The
  runs are synthetic (bench/synthetic_runs.py) and written straight into MLflow's database on
  control, since 10,000 real jobs would take hours; what is timed is the read and the report.

Workers past the eighth are light: they start each job in a fresh interpreter (the `cold` launcher)
instead of keeping a warm fork server of their own, so 50 of them fit in this machine's memory; the
cost under test is the control plane's, not the jobs'.

Run (root): `python -m bench.bench_cluster [--workers 2,8,50] [--jobs 40] [--overhead-jobs 5]
[--report-runs 10000]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parent.parent
if str(PROJECT_ROOT) not in sys.path:  # bench/ is not an installed package
    sys.path.insert(0, str(PROJECT_ROOT))

from bench import bench_team  # noqa: E402

# Its smoke run is in the cross-host test, on the cluster that test has already built (a second
# cluster would cost CI another minute and a half): measure() with two workers and two jobs.
SMOKE_ELSEWHERE = "tests/integration/test_cluster.py"
WARM_WORKERS = 8  # workers beyond these start jobs cold (no fork server each: memory)
PARTS = {"postgres": "PostgreSQL", "seaweedfs": "object store", "s3-gateway": "S3 gateway",
         "prefect-server": "Prefect server", "mlflow-server": "MLflow server"}


def control_cpu_s(settings: Any) -> dict[str, float]:
    """CPU-seconds so far of each part of the control host: every process of the host, given to the
    part `cluster up` started it under (its ancestor), its own time and its ended children's."""
    import psutil

    from ops import cluster

    state = cluster.read_state(settings.root)
    roots = {pid: name.split("/", 1)[1] for name, pid in (state.pids if state else {}).items()
             if name.startswith("control/")}
    spent: dict[str, float] = dict.fromkeys([*PARTS, "other"], 0.0)
    for pid in cluster.host_pids(settings, "control"):
        try:
            process = psutil.Process(pid)
            times = process.cpu_times()
            part = next((roots[p.pid] for p in [process, *process.parents()] if p.pid in roots), "other")
            spent[part if part in spent else "other"] += (times.user + times.system + times.children_user
                                                          + times.children_system)
        except psutil.Error:
            continue
    return spent


def on_client(count: int, label: str, embedded: bool) -> None:
    """The client host's part: `count` fresh jobs through the team (or in-process), as JSON."""
    from prefect.settings import PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW, temporary_settings

    from flows.dispatch import EmbeddedDispatcher
    from flows.team_dispatch import TeamDispatcher

    with temporary_settings({PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW: "ignore"}):
        dispatcher = EmbeddedDispatcher(parallel=1) if embedded else TeamDispatcher()
        wall, outcomes = bench_team._run(dispatcher, count, label)
    answer: dict[str, Any] = {"wall_s": wall, "workers": Counter(o.worker for o in outcomes)}
    if not embedded:
        answer["latencies"] = bench_team.dispatch_latencies(outcomes)
    print(json.dumps(answer))


def _client_run(settings: Any, count: int, label: str, embedded: bool = False) -> dict[str, Any]:
    from ops import cluster

    creds = cluster.cluster_credentials(settings)
    command = [sys.executable, "-m", "bench.bench_cluster", "--client-part", str(count), label]
    if embedded:
        command.append("--embedded")
    done = cluster.run_on(settings, "client", command, cluster.host_env(settings, creds, "client"),
                          timeout_s=3600, what=f"the client's {label} run")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _wait_for_workers(settings: Any, names: set[str], timeout_s: float = 600) -> None:
    """bench_team's wait, against the cluster's Prefect server (TLS, its credential)."""
    from prefect.settings import (
        PREFECT_API_AUTH_STRING,
        PREFECT_API_SSL_CERT_FILE,
        PREFECT_API_URL,
        temporary_settings,
    )

    from ops import cluster, team_stack

    creds = cluster.cluster_credentials(settings)
    updates = {PREFECT_API_URL: settings.stack().prefect_api_url,
               PREFECT_API_SSL_CERT_FILE: str(settings.ca_file),
               PREFECT_API_AUTH_STRING: creds[team_stack.PREFECT_AUTH_ENV]}
    with temporary_settings(updates):
        bench_team.wait_for_workers(names, timeout_s)


REPORT_SUITE = "bench-report"
REPORT_SHAPE = (20, 10, 5)  # datasets, frameworks, folds; seeds = runs / 1,000


def report_suite(runs: int) -> Any:
    from bench.bench_report import suite_of

    datasets, frameworks, folds = REPORT_SHAPE
    return suite_of(datasets, frameworks, folds, max(1, runs // (datasets * frameworks * folds)),
                    suite=REPORT_SUITE)


def report_start() -> None:
    """On client: the execution's parent run, made through the MLflow server as a suite makes it."""
    from bench.synthetic_runs import start_execution

    execution_id, experiment_id = start_execution(os.environ["MLFLOW_TRACKING_URI"], REPORT_SUITE)
    print(json.dumps({"execution_id": execution_id, "experiment_id": experiment_id}))


def report_insert(experiment_id: str, execution_id: str, runs: int) -> None:
    """On control: the job runs, written into the MLflow server's database beside it."""
    from bench.synthetic_runs import insert_job_runs, synthetic_jobs
    from ops import cluster, team_stack

    stack = team_stack.StackSettings(state_dir=Path("."), pg_url=cluster.CONTROL_PG_URL)
    database = stack.database_url("mlflow", "psycopg2")
    started = time.perf_counter()
    insert_job_runs(database, experiment_id, execution_id, synthetic_jobs(report_suite(runs)))
    print(json.dumps({"insert_s": time.perf_counter() - started}))


def report_time(execution_id: str) -> None:
    """On client: `automl-eval report`'s work over HTTPS, timed (bench_report.time_report)."""
    from bench.bench_report import time_report

    with tempfile.TemporaryDirectory(prefix="bench-cluster-report-") as tmp:
        print(json.dumps(time_report(execution_id, os.environ["MLFLOW_TRACKING_URI"], Path(tmp))))


def report_over_http(settings: Any, runs: int) -> dict[str, float]:
    """A report over one execution of `runs` job runs, read from client over HTTPS."""
    from ops import cluster

    creds = cluster.cluster_credentials(settings)
    client_env = cluster.host_env(settings, creds, "client")
    me = [sys.executable, "-m", "bench.bench_cluster"]

    def on(host: str, args: list[str], env: dict[str, str]) -> dict[str, Any]:
        done = cluster.run_on(settings, host, me + args, env, timeout_s=1800, what=f"the report's {args[0]}")
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))

    started = on("client", ["--report-start"], client_env)
    ids = [started["experiment_id"], started["execution_id"]]
    inserted = on("control", ["--report-insert", *ids, str(runs)], cluster.base_env())
    timed = on("client", ["--report-time", started["execution_id"]], client_env)
    print(f"report over {timed['runs']:.0f} job runs from the team's MLflow server over HTTPS (on client): "
          f"read {timed['read_runs_s']:.1f} s + build {timed['build_report_s']:.1f} s + log artifacts = "
          f"{timed['report_total_s']:.1f} s, {timed['report_cpu_s']:.1f} s CPU on client (goal <= 30 s); "
          f"runs written into PostgreSQL in {inserted['insert_s']:.0f} s", flush=True)
    return {name if name.startswith("report_") else f"report_{name}": float(value)
            for name, value in timed.items()}


def main(jobs_count: int, worker_counts: tuple[int, ...], overhead_jobs: int,
         report_runs: int = 0) -> dict[str, float]:
    """Build a cluster of its own, measure it, take it down."""
    from ops import cluster

    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        settings = cluster.ClusterSettings(root=Path(tmp) / "cluster", prefix="aeb", subnet="10.213.11",
                                           project=PROJECT_ROOT)
        cluster.stop(settings)
        try:
            started = time.perf_counter()
            state = cluster.up(settings)
            up_s = time.perf_counter() - started
            print(f"cluster up in {up_s:.0f} s ({state.timings_s})", flush=True)
            figures = {"cluster_up_s": up_s}
            if worker_counts:
                figures.update(measure(settings, jobs_count, worker_counts, overhead_jobs))
            if report_runs:
                figures.update(report_over_http(settings, report_runs))
            return figures
        finally:
            cluster.down(settings)


def measure(settings: Any, jobs_count: int, worker_counts: tuple[int, ...],
            overhead_jobs: int) -> dict[str, float]:
    """The figures on a cluster that is up (its workers cpu-a and cpu-b, as `cluster up` starts them).
    Leaves it up, with the extra workers it started."""
    from ops import cluster
    from tasks.launch import LAUNCHER_ENV

    figures: dict[str, float] = {"jobs": float(jobs_count)}
    creds = cluster.cluster_credentials(settings)
    names = {"cpu-a", "cpu-b"}
    _wait_for_workers(settings, {"cpu-a"})
    if overhead_jobs:
        embedded = _client_run(settings, overhead_jobs, "embedded-on-client", embedded=True)
        # One worker for the serial run: cpu-b's stops until the worker counts below.
        cluster.kill_host(settings, "cpu-b")
        team = _client_run(settings, overhead_jobs, "across-hosts-serial")
        figures["embedded_per_job_s"] = embedded["wall_s"] / overhead_jobs
        figures["across_hosts_per_job_s"] = team["wall_s"] / overhead_jobs
        figures["overhead_per_job_s"] = (figures["across_hosts_per_job_s"]
                                         - figures["embedded_per_job_s"])
        print(f"{overhead_jobs} jobs one at a time: on client "
              f"{figures['embedded_per_job_s']:.2f} s/job, on cpu-a from client "
              f"{figures['across_hosts_per_job_s']:.2f} s/job -> "
              f"{figures['overhead_per_job_s']:+.2f} s per job across hosts", flush=True)
        names = {"cpu-a"}
    pids: dict[str, int] = {}
    for workers in sorted(worker_counts):
        while len(names) < workers:
            host = cluster.WORKER_HOSTS[len(names) % 2]
            name = host if host not in names else f"{host}-{len(names)}"
            light = {LAUNCHER_ENV: "cold"} if len(names) >= WARM_WORKERS else {}
            cluster.start_worker(settings, creds, host, pids, name=name, env_updates=light)
            names.add(name)
        _wait_for_workers(settings, names)
        before = control_cpu_s(settings)
        ran = _client_run(settings, jobs_count, f"across-hosts-{workers}-workers")
        after = control_cpu_s(settings)
        latencies = ran["latencies"]
        figures[f"w{workers}_jobs_per_min"] = jobs_count / ran["wall_s"] * 60
        figures[f"w{workers}_dispatch_p50_s"] = statistics.median(latencies)
        figures[f"w{workers}_dispatch_p99_s"] = bench_team.percentile(latencies, 0.99)
        per_job = {part: (after[part] - before[part]) / jobs_count for part in PARTS}
        for part, value in per_job.items():
            figures[f"w{workers}_{part}_cpu_s_per_job"] = value
        figures[f"w{workers}_control_plane_cpu_s_per_job"] = sum(per_job.values())
        print(f"{workers} workers ({len(ran['workers'])} took jobs): {jobs_count} jobs in "
              f"{ran['wall_s']:.0f} s = {figures[f'w{workers}_jobs_per_min']:.1f} jobs/min; "
              f"dispatch p50 {figures[f'w{workers}_dispatch_p50_s']:.2f} s, "
              f"p99 {figures[f'w{workers}_dispatch_p99_s']:.2f} s; "
              f"control plane {sum(per_job.values()):.3f} CPU-s per job ("
              + ", ".join(f"{PARTS[p]} {v:.3f}" for p, v in per_job.items()) + ")", flush=True)
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.bench_cluster",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=40, help="jobs per worker count (default 40)")
    parser.add_argument("--workers", default="2,8,50", help="worker counts (default 2,8,50; '': none)")
    parser.add_argument("--overhead-jobs", type=int, default=5, help="jobs for across hosts vs in-process")
    parser.add_argument("--report-runs", type=int, default=10_000,
                        help="job runs of the report read over HTTPS (default 10000; 0: none)")
    parser.add_argument("--report-start", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--report-insert", nargs=3, metavar=("EXPERIMENT", "EXECUTION", "RUNS"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--report-time", metavar="EXECUTION", help=argparse.SUPPRESS)
    parser.add_argument("--client-part", nargs=2, metavar=("COUNT", "LABEL"), help=argparse.SUPPRESS)
    parser.add_argument("--embedded", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client_part:
        on_client(int(args.client_part[0]), args.client_part[1], args.embedded)
    elif args.report_start:
        report_start()
    elif args.report_insert:
        report_insert(args.report_insert[0], args.report_insert[1], int(args.report_insert[2]))
    elif args.report_time:
        report_time(args.report_time)
    else:
        main(args.jobs, tuple(int(n) for n in args.workers.split(",") if n), args.overhead_jobs,
             args.report_runs)
    sys.exit(0)
