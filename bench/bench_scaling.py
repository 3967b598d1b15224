"""Benchmark: fit-time speed-up with more cores (and GPUs), for frameworks that do fixed work.

The same job (dataset, fold, seed, params that fix the work: HGB at a fixed number of rounds without
early stopping, a random forest and XGBoost at a fixed number of trees, the CNN (a ResNet-18 from
scratch, tasks/frameworks/cnn.py) at a fixed number of epochs on an image card) at each step, planned as a
suite's `scaling:` block plans it (tasks/plan.py: steps above the host's cores and GPUs capped, the
capped ones listed), one job at a time; the budget's time is the same and large enough that no fit is
cut short. The table is the report's Scaling table (tasks/report/scaling.py): per framework and step,
fit_s, training rows per second of fit, speed-up (fit_s at the fewest resources / fit_s) and parallel
efficiency (speed-up / core ratio). AutoML frameworks that fill their time are not here: their gain
is in the result, not in fit_s (the `scaling` suite and its report show it).

Settings (environment): BENCH_SCALING_CORES (default 1,2), BENCH_SCALING_GPUS (default 0; 0,1 on a
GPU machine, where xgboost and the CNN train on the GPU), BENCH_SCALING_FRAMEWORKS (default
hgb,rf,xgboost,cnn), BENCH_SCALING_DATASET (the tabular frameworks'; default default: 10,000 rows,
binary), BENCH_SCALING_IMAGE_DATASET (the CNN's; default digits: 1,797 8x8 images, 10 classes).
A dataset already materialized (its file and folds under datasets/) is used as it is; another is
built first.
Run: `python -m bench.bench_scaling` from the project root. Timings are this machine's, under
whatever else runs on it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

FIXED_WORK: dict[str, dict[str, Any]] = {
    "hgb": {"max_iter": 300, "early_stopping": False},
    "rf": {"n_estimators": 300},
    "xgboost": {"n_estimators": 300},
    # Fixed epochs, no step cap, loading in the training process (the cores are torch's threads).
    "cnn": {"architecture": "resnet18", "epochs": 2, "batch_size": 64, "_num_workers": 0},
}
# Frameworks that take images rather than tables run on the image card.
IMAGE_FRAMEWORKS = ("cnn",)
# The smoke run of tests/integration/test_bench_smoke.py: one framework at two core counts, so the
# speed-up table has a step to compare (a host with one core caps the second, as a suite would).
SMOKE_ARGS: tuple[str, ...] = ()
SMOKE_ENV: dict[str, str] = {"BENCH_SCALING_CORES": "1,2", "BENCH_SCALING_GPUS": "0",
                             "BENCH_SCALING_FRAMEWORKS": "rf"}


def _steps(variable: str, default: str) -> list[int]:
    return [int(part) for part in os.environ.get(variable, default).split(",") if part.strip()]


def main() -> None:
    import pandas as pd

    from tasks.data.build import build
    from tasks.data.folds import folds_path
    from tasks.frameworks.registry import get_adapter
    from tasks.gpus import visible_gpu_count
    from tasks.jobs import run_job
    from tasks.plan import expand_scaling, make_jobs, not_applicable, scaling_record, scaling_steps
    from tasks.report.scaling import limits, speedup_table
    from tasks.specs import Budget, FrameworkRef, ScalingSettings, load_dataset_spec

    host_cores, host_gpus = len(os.sched_getaffinity(0)), visible_gpu_count()
    settings = ScalingSettings(cores=_steps("BENCH_SCALING_CORES", "1,2"),
                               gpus=_steps("BENCH_SCALING_GPUS", "0"))
    budget = Budget(name="bench-scaling", time_s=600, cores=1, memory_mb=8000)
    steps = scaling_steps(settings, budget, host_cores=host_cores, host_gpus=host_gpus)
    cards = {"table": os.environ.get("BENCH_SCALING_DATASET", "default"),
             "image": os.environ.get("BENCH_SCALING_IMAGE_DATASET", "digits")}
    frameworks = [name.strip() for name in
                  os.environ.get("BENCH_SCALING_FRAMEWORKS", "hgb,rf,xgboost,cnn").split(",") if name.strip()]
    specs = {}
    for kind in dict.fromkeys("image" if name in IMAGE_FRAMEWORKS else "table" for name in frameworks):
        spec = load_dataset_spec(cards[kind])
        if not (spec.path.exists() and folds_path(spec).is_file()):
            build([spec.name])
        specs[kind] = spec
    scratch = Path(tempfile.mkdtemp(prefix="bench-scaling-"))
    print(f"fit-time scaling on {', '.join(f'{s.name} ({s.rows} rows)' for s in specs.values())}, host cores "
          f"{host_cores}, GPUs {host_gpus}" + (f"; {steps[0].capped}" if steps[0].capped else ""))
    rows = []
    for framework in frameworks:
        spec = specs["image" if framework in IMAGE_FRAMEWORKS else "table"]
        adapter = get_adapter(framework)
        reason = adapter.unavailable_reason()
        if reason:
            print(f"{framework:<10} not run: {reason}")
            continue
        ref = FrameworkRef(name=framework, params=FIXED_WORK.get(framework, {}))
        jobs = expand_scaling(make_jobs("bench_scaling", {spec.name: "bench"}, [ref], 1, [0], budget), steps)
        skipped = not_applicable(jobs, {spec.name: spec}, {framework: adapter})  # as a suite's run skips
        for job in jobs:
            if job.key in skipped:
                print(f"  {job.label}: skipped, {skipped[job.key]}")
                continue
            result = run_job(job, spec, scratch / job.key)
            params, tags = scaling_record(job, result.info)  # what the job's MLflow run would carry
            rows.append({"dataset": spec.name, "framework": framework, "status": result.status,
                         **{f"params.{name}": value for name, value in params.items()}, **tags,
                         **result.costs, "error": result.error.splitlines()[0] if result.error else ""})
            print(f"  {job.label}: {result.status}, fit_s {result.costs.get('fit_s', float('nan')):.2f}",
                  flush=True)
    if not rows:
        return
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(speedup_table(table).round(3).to_string(index=False))
    for note in limits(table):
        print(f"- {note}")


if __name__ == "__main__":
    main()
