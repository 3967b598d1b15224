"""Benchmark: fit-time speed-up with more cores, for frameworks that do fixed work.

The same job (dataset, fold, seed, params that fix the work: HGB at a fixed number of rounds without
early stopping, a random forest and XGBoost at a fixed number of trees) at each core count, capped at
the host's cores (the capped steps are listed); the budget's time is the same and large enough that
no fit is cut short. Prints, per framework: cores, fit_s, speed-up (fit_s at the fewest cores / fit_s)
and parallel efficiency (speed-up / core ratio), the references' table. AutoML frameworks that fill
their time are not here: their gain is in the result, not in fit_s.

Settings (environment): BENCH_SCALING_CORES (default 1,2), BENCH_SCALING_FRAMEWORKS (default
hgb,rf,xgboost), BENCH_SCALING_DATASET (default default: 10,000 rows, binary).
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
}


def main() -> None:
    from tasks.data.build import build
    from tasks.frameworks.registry import get_adapter
    from tasks.jobs import run_job
    from tasks.plan import Job
    from tasks.specs import Budget, load_dataset_spec

    host_cores = len(os.sched_getaffinity(0))
    asked = [int(c) for c in os.environ.get("BENCH_SCALING_CORES", "1,2").split(",")]
    cores = sorted({min(c, host_cores) for c in asked})
    capped = [c for c in asked if c > host_cores]
    spec = load_dataset_spec(os.environ.get("BENCH_SCALING_DATASET", "default"))
    build([spec.name])
    scratch = Path(tempfile.mkdtemp(prefix="bench-scaling-"))
    print(f"fit-time scaling on {spec.name} ({spec.rows} rows), host cores {host_cores}"
          + (f"; capped at {host_cores}: {capped}" if capped else ""))
    print("framework  cores   fit_s  speed-up  efficiency  status")
    for framework in os.environ.get("BENCH_SCALING_FRAMEWORKS", "hgb,rf,xgboost").split(","):
        framework = framework.strip()
        reason = get_adapter(framework).unavailable_reason()
        if reason:
            print(f"{framework:<10} not run: {reason}")
            continue
        base: tuple[int, float] | None = None
        for count in cores:
            budget = Budget(name=f"scaling-{count}c", time_s=600, cores=count, memory_mb=4000)
            params = FIXED_WORK[framework]
            job = Job("bench_scaling", spec.name, "bench", framework, None, 0, 0, budget, params)
            result = run_job(job, spec, scratch / f"{framework}-{count}c")
            fit_s = result.costs.get("fit_s", float("nan"))
            if result.status == "ok" and base is None:
                base = (count, fit_s)
            speedup = base[1] / fit_s if base and result.status == "ok" else float("nan")
            efficiency = speedup / (count / base[0]) if base else float("nan")
            note = f" ({result.error.splitlines()[0]})" if result.error else ""
            print(f"{framework:<10} {count:5d} {fit_s:7.2f}  {speedup:8.2f}  {efficiency:10.2f}  "
                  f"{result.status}{note}")


if __name__ == "__main__":
    main()
