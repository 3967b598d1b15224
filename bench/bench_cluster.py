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
  and the object store (every process of the control host, ended children included).

Workers past the eighth are light: they start each job in a fresh interpreter (the `cold` launcher)
instead of keeping a warm fork server of their own, so 50 of them fit in this machine's memory; the
cost under test is the control plane's, not the jobs'.

Run (root): `python -m bench.bench_cluster [--workers 2,8,50] [--jobs 40] [--overhead-jobs 5]`.
"""

from __future__ import annotations

import argparse
import json
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


def main(jobs_count: int, worker_counts: tuple[int, ...], overhead_jobs: int) -> dict[str, float]:
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
            return {"cluster_up_s": up_s, **measure(settings, jobs_count, worker_counts, overhead_jobs)}
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
    parser.add_argument("--workers", default="2,8,50", help="worker counts (default 2,8,50)")
    parser.add_argument("--overhead-jobs", type=int, default=5, help="jobs for across hosts vs in-process")
    parser.add_argument("--client-part", nargs=2, metavar=("COUNT", "LABEL"), help=argparse.SUPPRESS)
    parser.add_argument("--embedded", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client_part:
        on_client(int(args.client_part[0]), args.client_part[1], args.embedded)
    else:
        main(args.jobs, tuple(int(n) for n in args.workers.split(",")), args.overhead_jobs)
    sys.exit(0)
