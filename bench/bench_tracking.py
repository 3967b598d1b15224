"""Benchmark: MLflow logging time per job (params, tags, metrics, predictions, pyfunc model).

Logs job folders into a fresh embedded store (sqlite + local artifacts) in a scratch directory, the
way a suite run records each job: first 20 synthetic folders (a constant model on a small frame),
then, when the project's runs/ holds finished jobs (after `make demo`), copies of up to 2 per
framework, whose models are the real AutoGluon/H2O/FLAML/sklearn folders. Then, where PostgreSQL
runs, the synthetic folders again into the team stack's MLflow server (basic auth, PostgreSQL) on
127.0.0.1, printed side by side with the embedded figure.
Run: `python -m bench.bench_tracking [--jobs 20] [--server-jobs 10] [--real-per-framework 2]` from the
project root (part of `make bench`). Each median leaves the first job out (MLflow's lazy imports, the
server's first connection), so a count takes at least 2; --real-per-framework 0 leaves runs/ alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SYNTHETIC_JOBS = 20
SERVER_JOBS = 10
REAL_PER_FRAMEWORK = 2
# The smoke run of tests/integration/test_bench_smoke.py: the fewest jobs a median is taken over, and
# no copies of the project's own job folders (what runs/ holds is not the test's to depend on).
SMOKE_ARGS: tuple[str, ...] = ("--jobs", "2", "--server-jobs", "2", "--real-per-framework", "0")


def _synthetic_folder(job_dir: Path, fold: int, execution: object) -> None:
    import numpy as np
    import pandas as pd

    from tasks.frameworks.base import TaskInfo
    from tasks.frameworks.constant import ADAPTER as CONSTANT
    from tasks.frameworks.registry import write_model_identity
    from tasks.plan import Job
    from tasks.results import MODEL_DIR, PREDICTIONS_FILE, JobResult
    from tasks.specs import Budget
    from tasks.tracking.job_folder import mark_result_final, write_pending

    budget = Budget(name="bench", time_s=60, cores=1, memory_mb=4096)
    # Recorded under a catalog dataset of the same problem type, so the record is what a real job's is.
    job = Job("bench", "penguins", "0" * 32, "constant", None, fold, 0, budget, {"max_depth": 3})
    rng = np.random.default_rng(fold)
    X = pd.DataFrame({f"x{i}": rng.normal(size=300) for i in range(10)})
    y = pd.Series(rng.choice(["a", "b", "c"], size=300))
    task = TaskInfo("multiclass", "y", "logloss", {c: "numeric" for c in X}, ("a", "b", "c"))
    write_pending(job_dir, execution, job, problem_type="multiclass", metric="logloss")  # type: ignore[arg-type]
    model = CONSTANT.fit(X, y, task=task, budget=budget, params={}, workdir=job_dir, seed=0)
    model.save(job_dir / MODEL_DIR)
    write_model_identity(job_dir / MODEL_DIR, CONSTANT, task)
    table = pd.DataFrame({"row": range(300), "truth": y, "prediction": model.predict(X)})
    for label, column in model.predict_proba(X).items():
        table[f"proba_{label}"] = column.to_numpy()
    table.to_csv(job_dir / PREDICTIONS_FILE, index=False)
    scores = {"logloss": 1.1, "acc": 0.34, "balacc": 0.33, "macro_f1": 0.17, "result": -1.1}
    costs = {"fit_s": 0.01, "predict_s": 0.01, "latency_p50_ms": 1.0, "latency_p99_ms": 2.0,
             "throughput_rows_s": 1e5, "model_size_mb": 0.01, "models_count": 1, "duration_s": 2.0,
             "overhead_s": 1.9, "peak_rss_mb": 300.0, "cpu_s": 1.5, "train_rows": 300, "test_rows": 300}
    JobResult(job.key, "ok", framework_version=CONSTANT.version() or "", scores=scores, costs=costs,
              host={"host": "bench", "cpu_model": "bench", "gpu_model": "none"}).save(job_dir)
    mark_result_final(job_dir)


def _real_folders(limit_per_framework: int) -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for record_path in sorted((PROJECT_ROOT / "runs").glob("*/*/tracking.json")):
        job_dir = record_path.parent
        try:
            record = json.loads(record_path.read_text())
            status = json.loads((job_dir / "result.json").read_text())["status"]
        except (OSError, KeyError, json.JSONDecodeError):
            continue
        if status != "ok" or not (job_dir / "model").is_dir():
            continue
        framework = record["job"]["framework"]
        if len(found.setdefault(framework, [])) < limit_per_framework:
            found[framework].append(job_dir)
    return found


def _summary(seconds: list[float]) -> str:
    return f"median {statistics.median(seconds):.3f} s, max {max(seconds):.3f} s (n={len(seconds)})"


def _log_synthetic(folder: Path, execution: object, count: int) -> list[float]:
    from tasks.tracking.job_run import log_job_dir

    seconds = []
    for fold in range(count):
        job_dir = folder / f"synthetic{fold}"
        _synthetic_folder(job_dir, fold, execution)
        seconds.append(log_job_dir(job_dir).log_s)
    return seconds


def _against_server(home: Path, count: int) -> list[float]:
    """The same records into a team-mode MLflow server (basic auth, PostgreSQL) on 127.0.0.1."""
    import uuid

    from ops import team_stack
    from tasks.tracking.execution import start_execution  # main() times the first import of tracking

    try:
        import psycopg2

        psycopg2.connect(team_stack.default_settings().pg_url + "/postgres", connect_timeout=3).close()
    except Exception as exc:
        print(f"no MLflow server figure: PostgreSQL is not reachable ({type(exc).__name__}); "
              "`.ci/run` and the team stack start it.")
        return []
    settings = team_stack.StackSettings(
        state_dir=home / ".team", prefect_port=team_stack.free_port(), mlflow_port=team_stack.free_port(),
        db_prefix=f"automl_eval_bench_{uuid.uuid4().hex[:8]}", workers=[])
    try:
        team_stack.up(settings)
        client_env = team_stack.client_env(settings, team_stack.credentials(settings))
        os.environ.update({k: v for k, v in client_env.items() if k.startswith("MLFLOW_")})
        execution = start_execution("bench")
        return _log_synthetic(home / "runs" / "server", execution, count)
    finally:
        for name in ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
            os.environ.pop(name, None)
        team_stack.down(settings.state_dir)
        team_stack.drop_databases(settings)


def _at_least_two(text: str) -> int:
    count = int(text)
    if count < 2:  # the medians leave the first job out
        raise argparse.ArgumentTypeError(f"at least 2 jobs, not {count}")
    return count


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_tracking",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=_at_least_two, default=SYNTHETIC_JOBS,
                        help=f"synthetic job folders logged to the embedded store (default {SYNTHETIC_JOBS})")
    parser.add_argument("--server-jobs", type=_at_least_two, default=SERVER_JOBS,
                        help=f"the same, to the team stack's MLflow server (default {SERVER_JOBS})")
    parser.add_argument("--real-per-framework", type=int, default=REAL_PER_FRAMEWORK,
                        help=f"copies of runs/' finished jobs per framework (default {REAL_PER_FRAMEWORK}; "
                             "0: none)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    figures: dict[str, float] = {}
    real = _real_folders(args.real_per_framework) if args.real_per_framework > 0 else {}
    with tempfile.TemporaryDirectory(prefix="bench-tracking-") as tmp:
        home = Path(tmp)
        # The project's cards (logging reads a job's card), with runs and store in scratch.
        shutil.copytree(PROJECT_ROOT / "specs", home / "specs")
        os.environ["AUTOML_EVAL_HOME"] = str(home)
        os.environ.pop("MLFLOW_TRACKING_URI", None)
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
        os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
        started = time.perf_counter()
        from tasks.tracking.execution import finish_execution, start_execution
        from tasks.tracking.job_run import log_job_dir

        figures["import_s"] = time.perf_counter() - started
        started = time.perf_counter()
        execution = start_execution("bench")
        figures["first_execution_s"] = time.perf_counter() - started  # includes creating the schema

        synthetic = _log_synthetic(home / "runs" / "sqlite", execution, args.jobs)
        print(f"MLflow logging per job, synthetic constant model: {_summary(synthetic)} "
              f"(first one includes MLflow's lazy imports: {synthetic[0]:.3f} s)")
        figures["log_s_median"] = statistics.median(synthetic[1:])
        figures["log_s_max"] = max(synthetic[1:])
        server = _against_server(home, args.server_jobs)
        if server:
            figures["server_log_s_median"] = statistics.median(server[1:])
            print(f"recording per job, side by side: embedded sqlite {figures['log_s_median']:.3f} s | "
                  f"MLflow server (basic auth, PostgreSQL, 127.0.0.1) {figures['server_log_s_median']:.3f} s "
                  f"(medians; server {_summary(server[1:])})")

        for framework, job_dirs in sorted(real.items()):
            seconds = []
            for index, source in enumerate(job_dirs):
                copy = home / "runs" / "real" / f"{framework}{index}"
                shutil.copytree(source, copy)
                record = json.loads((copy / "tracking.json").read_text())
                record.update(execution=execution.__dict__, run_id=None, result_final=True)
                (copy / "tracking.json").write_text(json.dumps(record))
                seconds.append(log_job_dir(copy).log_s)
            size_mb = sum(p.stat().st_size for p in (job_dirs[0] / "model").rglob("*") if p.is_file()) / 2**20
            print(f"MLflow logging per job, {framework} (model {size_mb:.1f} MB): {_summary(seconds)}")
            figures[f"log_s_{framework}"] = statistics.median(seconds)
        if not real and args.real_per_framework > 0:
            print("No finished jobs in runs/ yet: run `make demo` to time logging of real framework models.")
        finish_execution(execution)
    print(f"import of the tracking module (mlflow): {figures['import_s']:.2f} s, once per run; "
          f"first execution in a new store: {figures['first_execution_s']:.2f} s")
    return figures


if __name__ == "__main__":
    main()
