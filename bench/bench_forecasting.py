"""Benchmark: forecasting jobs' fit time per series, per framework and dataset.

Every job of the forecasting suite (fold 0, seed 0) runs through ``tasks.jobs.run_job`` (child
process, watchdog, harness scoring), one after another. Printed per (dataset, framework): series,
fit_s, fit time per series in ms, predict_s, OWA, and the series statsforecast had to give a
seasonal naive forecast because the budget ran out (series_fallback).

Settings (environment): BENCH_FORECAST_SUITE (forecasting), BENCH_FORECAST_DATASETS and
BENCH_FORECAST_FRAMEWORKS (comma lists, default the suite's), BENCH_FORECAST_BUDGET (the suite's).
Job folders go to a scratch directory; nothing is logged to MLflow.
Run: `python -m bench.bench_forecasting` from the project root (part of `make bench`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# The smoke run of tests/integration/test_bench_smoke.py: the smallest collection (20 series) and
# the cheapest forecaster, under the shortest budget.
SMOKE_ARGS: tuple[str, ...] = ()
SMOKE_ENV: dict[str, str] = {"BENCH_FORECAST_DATASETS": "tourism_quarterly",
                             "BENCH_FORECAST_FRAMEWORKS": "seasonal_naive", "BENCH_FORECAST_BUDGET": "test"}


def _setting(name: str, default: str) -> str:
    return os.environ.get(f"BENCH_FORECAST_{name}", "") or default


def main() -> None:
    from tasks.data.fold_data import load_fold
    from tasks.data.versions import data_version
    from tasks.evaluations.registry import all_evaluations
    from tasks.jobs import run_job
    from tasks.plan import Job
    from tasks.specs import FrameworkRef, load_budget, load_dataset_spec, load_suite

    suite = load_suite(_setting("SUITE", "forecasting"), all_evaluations())
    budget = load_budget(_setting("BUDGET", suite.budget))
    datasets = _setting("DATASETS", ",".join(suite.datasets)).split(",")
    frameworks = [FrameworkRef.parse(text) for text in _setting("FRAMEWORKS", "").split(",") if text] or [
        ref for ref in suite.frameworks if ref.version is None]  # environments: installed apart
    print(f"budget {budget.name} (time_s {budget.time_s}, cores {budget.cores}); fold 0, seed 0")
    print(f"{'dataset':<20}{'framework':<26}{'series':>7}{'fit_s':>9}{'ms/series':>11}{'predict_s':>11}"
          f"{'owa':>8}{'fallback':>10}  status")
    with tempfile.TemporaryDirectory() as scratch:
        for dataset in datasets:
            spec = load_dataset_spec(dataset)
            series = load_fold(spec, 0).X_train.iloc[:, 0].nunique()
            for ref in frameworks:
                job = Job(suite.name, dataset, data_version(spec), ref.name, ref.variant, 0, 0, budget,
                          dict(ref.params), framework_version=ref.version)
                result = run_job(job, spec, Path(scratch) / job.key)
                fit_s = result.costs.get("fit_s", float("nan"))
                print(f"{dataset:<20}{ref.id:<26}{series:>7}{fit_s:>9.2f}{1000 * fit_s / series:>11.1f}"
                      f"{result.costs.get('predict_s', float('nan')):>11.3f}"
                      f"{result.scores.get('owa', float('nan')):>8.3f}"
                      f"{result.info.get('series_fallback', 0):>10}  {result.status}", flush=True)


if __name__ == "__main__":
    main()
