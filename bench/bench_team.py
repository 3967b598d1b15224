"""Benchmark: team mode on this machine. A suite of 1-core jobs on one worker versus two workers
(throughput ratio, target >= 1.7x on 2 cores), and the per-job overhead of team mode (a flow run
per job, taken by a process worker) versus embedded mode (the same jobs in-process, one at a time).

It starts its own stack on free ports (Prefect server, MLflow on a throwaway PostgreSQL database,
workers of limit 1) in a scratch project, and removes it all at the end. Every mode logs to the
same MLflow server, so the difference is the dispatch, not the store.
Run: `python -m bench.bench_team [JOBS]` from the project root (part of `make bench`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SUITE = "bench_team"
DATASET = "breast_cancer"
FRAMEWORK = "constant"  # the cheapest job: what is measured is the harness around it


def _scratch_home(tmp: Path) -> Path:
    home = tmp / "home"
    shutil.copytree(PROJECT_ROOT / "specs", home / "specs")
    shutil.copy(PROJECT_ROOT / "prefect.yaml", home / "prefect.yaml")
    (home / "datasets").symlink_to(PROJECT_ROOT / "datasets")
    (home / "flows").symlink_to(PROJECT_ROOT / "flows")
    return home


def _run_jobs(jobs_count: int, label: str) -> float:
    """Wall seconds to run `jobs_count` fresh jobs through execute_jobs in the current mode."""
    from flows.benchmark import data_version
    from flows.dispatch import JobContext, execute_jobs
    from tasks.plan import make_jobs
    from tasks.specs import FrameworkRef, load_budget, load_dataset_spec
    from tasks.tracking import log as tracking

    spec = load_dataset_spec(DATASET)
    # Seeds make distinct jobs on the same fold; every mode gets a fresh execution.
    jobs = make_jobs(SUITE, {spec.name: data_version(spec)}, [FrameworkRef(name=FRAMEWORK)], 1,
                     list(range(jobs_count)), load_budget("test"))
    execution = tracking.start_execution(SUITE, team=label)
    contexts = {job.key: JobContext(execution=execution.__dict__, problem_type=spec.problem_type,
                                    metric=str(spec.metric)) for job in jobs}
    started = time.perf_counter()
    outcomes = execute_jobs(jobs, contexts, parallel=1)
    wall = time.perf_counter() - started
    bad = [o for o in outcomes if o["status"] != "ok"]
    if bad:
        raise SystemExit(f"{label}: {len(bad)} job(s) did not finish ok: {bad[:2]}")
    return wall


def main(jobs_count: int = 8) -> dict[str, float]:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows import team_stack

    with tempfile.TemporaryDirectory(prefix="bench-team-") as tmp:
        home = _scratch_home(Path(tmp))
        settings = team_stack.StackSettings(
            state_dir=home / ".team", prefect_port=team_stack.free_port(), mlflow_port=team_stack.free_port(),
            db_prefix=f"automl_eval_bench_{uuid.uuid4().hex[:8]}",
            workers=[team_stack.WorkerSpec("cpu-1", "cpu", 1)], worker_poll_s=2,
            extra_worker_env={"AUTOML_EVAL_HOME": str(home)},
        )
        os.environ["AUTOML_EVAL_HOME"] = str(home)
        try:
            team_stack.up(settings)
            creds = team_stack.credentials(settings)
            client_env = team_stack.client_env(settings, creds)
            os.environ.update({k: v for k, v in client_env.items() if k != "AUTOML_EVAL_MODE"})
            deployed = subprocess.run([str(Path(sys.executable).parent / "automl-eval"), "deploy"], cwd=home,
                                      env={**os.environ, **client_env}, capture_output=True, text=True)
            if deployed.returncode:
                raise SystemExit(deployed.stdout + deployed.stderr)
            with temporary_settings({PREFECT_API_URL: settings.prefect_api_url}):
                embedded_s = _run_jobs(jobs_count, "embedded")  # in-process, one at a time
                os.environ["AUTOML_EVAL_MODE"] = "team"
                one_worker_s = _run_jobs(jobs_count, "team-1-worker")
                team_stack.restart_worker(settings, creds, team_stack.WorkerSpec("cpu-2", "cpu", 1))
                time.sleep(settings.worker_poll_s * 3)  # let the second worker come online
                two_workers_s = _run_jobs(jobs_count, "team-2-workers")
        finally:
            os.environ.pop("AUTOML_EVAL_MODE", None)
            team_stack.down(settings.state_dir)
            team_stack.drop_databases(settings)
    figures = {
        "jobs": float(jobs_count),
        "embedded_serial_s": embedded_s,
        "team_1_worker_s": one_worker_s,
        "team_2_workers_s": two_workers_s,
        "throughput_ratio_2v1": one_worker_s / two_workers_s,
        "team_overhead_per_job_s": (one_worker_s - embedded_s) / jobs_count,
    }
    print(
        f"team mode, {jobs_count} one-core jobs ({FRAMEWORK} on {DATASET}): "
        f"embedded serial {embedded_s:.1f} s, "
        f"1 worker {one_worker_s:.1f} s, 2 workers {two_workers_s:.1f} s -> throughput ratio "
        f"{figures['throughput_ratio_2v1']:.2f}x (target >= 1.7x); team-mode overhead "
        f"{figures['team_overhead_per_job_s']:+.1f} s per job vs embedded"
    )
    return figures


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)
