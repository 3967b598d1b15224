"""Benchmark: what a framework environment costs. Figures:

- install: the wall time of `frameworks install` for one environment (scikit-learn at an older
  version, BENCH_ENV_FRAMEWORK, default hgb@1.7.2) into a scratch folder; the pip cache is warm
  from the second install on a machine (the first one downloads the wheels);
- per job: the same small job (penguins, budget `test`) in the main environment (`hgb`) and in the
  framework environment (`hgb@1.7.2`), workers started cold and warm (forked from the fork server of
  that interpreter; the first warm job of each pays for the server's start, shown apart). Each
  job's harness overhead is its wall time minus fit, predict and latency measurement (as in
  bench_jobs): the worker's start, imports, data loading, saving, exit and scoring.

Settings (environment): BENCH_ENV_FRAMEWORK (hgb@1.7.2), BENCH_ENV_REPEATS (5 jobs per case),
BENCH_ENV_DATASET (penguins). Job folders and the environment go to a scratch directory; nothing
is logged to MLflow. Run: `python -m bench.bench_environments` (part of `make bench`).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

# The smoke run of tests/integration/test_bench_smoke.py: one measured job per case (the least a
# median is taken over); the install itself has no smaller size.
SMOKE_ARGS: tuple[str, ...] = ()
SMOKE_ENV: dict[str, str] = {"BENCH_ENV_REPEATS": "1"}


def _setting(name: str, default: str) -> str:
    return os.environ.get(f"BENCH_ENV_{name}", "") or default


def _job_costs(job, spec, folder: Path) -> tuple[str, float, float]:  # noqa: ANN001
    """(status, duration_s, harness overhead s) of one job run under the watchdog."""
    from tasks.jobs import run_job

    result = run_job(job, spec, folder / f"{job.key}-{time.monotonic_ns()}")
    overhead = max(0.0, result.costs.get("overhead_s", 0.0) - float(result.info.get("startup_s", 0.0)))
    return result.status, result.costs.get("duration_s", float("nan")), overhead


def main() -> dict[str, float]:
    from tasks.environment_install import install
    from tasks.frameworks.registry import find_environment
    from tasks.launch import LAUNCHER_ENV
    from tasks.plan import make_jobs
    from tasks.specs import FrameworkRef, load_budget, load_dataset_spec

    target = FrameworkRef.parse(_setting("FRAMEWORK", "hgb@1.7.2"))
    repeats = int(_setting("REPEATS", "5"))
    spec = load_dataset_spec(_setting("DATASET", "penguins"))
    if not spec.path.is_file():
        print(f"dataset {spec.name} not built: run `automl-eval datasets build` first.")
        return {}
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-environments-") as scratch:
        os.environ["AUTOML_EVAL_VENVS_DIR"] = str(Path(scratch) / "venvs")
        environment = find_environment(target.name, target.version or "")
        figures["install_s"] = install(environment, progress=lambda line: print(line, flush=True))
        print(f"install of {environment.id} (python -m venv + pip, warm cache): {figures['install_s']:.1f} s")

        budget = load_budget("test")
        shared = FrameworkRef(name=target.name, variant=target.variant)
        jobs = {ref.id: make_jobs("bench-environments", {spec.name: "bench"}, [ref], 1, [0], budget)[0]
                for ref in (shared, target)}
        print(f"{'case':<34} {'jobs':>4} {'wall median':>12} {'harness median':>15} {'first job':>10}")
        for launcher in ("cold", "warm"):
            os.environ[LAUNCHER_ENV] = launcher
            for name, job in jobs.items():
                runs = [_job_costs(job, spec, Path(scratch)) for _ in range(repeats + 1)]
                failed = [status for status, _, _ in runs if status != "ok"]
                if failed:
                    print(f"{name} ({launcher}): {len(failed)} job(s) not ok: {', '.join(failed)}")
                first, measured = runs[0], runs[1:]  # the first warm job starts the fork server
                wall = statistics.median(duration for _, duration, _ in measured)
                harness = statistics.median(overhead for _, _, overhead in measured)
                where = "own environment" if job.framework_version else "main environment"
                case = f"{name} ({where}, {launcher})"
                print(f"{case:<34} {len(measured):>4} {wall:>11.2f}s {harness:>14.2f}s {first[2]:>9.2f}s",
                      flush=True)
                figures[f"{launcher}_{'env' if job.framework_version else 'main'}_harness_s"] = harness
                figures[f"{launcher}_{'env' if job.framework_version else 'main'}_wall_s"] = wall
    for launcher in ("cold", "warm"):
        extra = figures[f"{launcher}_env_harness_s"] - figures[f"{launcher}_main_harness_s"]
        print(f"{launcher}: a job in its own environment costs {extra:+.2f} s of harness time against the "
              "main environment (median)")
    return figures


if __name__ == "__main__":
    main()
