"""Benchmark: per-job harness overhead and budget adherence, on the smoke suite's datasets.

Every job runs through ``tasks.jobs.run_job`` (child process, watchdog, harness scoring), one
after another so that no job's figures include waiting for a core. Figures:

- harness overhead per job = duration_s (the harness's wall time for the job, from run_job's
  start to the scored result) - fit - predict (+ proba) - latency measurement: the worker's
  start, imports, data loading, saving, exit and scoring. Median and max, with the framework
  start-up (H2O's JVM, AutoGluon's imports) shown apart, its share of the total job wall time
  (target <= 5%), and the median of each part (from the job's timeline);
- budget adherence = fit_s / budget time_s for every ok job (target <= 1.10), and for every job
  the watchdog stopped, its duration against its hard limit.

Settings (environment): BENCH_JOBS_SUITE (smoke), BENCH_JOBS_FRAMEWORKS (comma list, default
the suite's), BENCH_JOBS_DATASETS (default the suite's), BENCH_JOBS_FOLDS (1), BENCH_JOBS_BUDGET
(the suite's); AUTOML_EVAL_LAUNCHER=cold measures workers started without the warm fork server.
The first job pays for starting the fork server, as the first job of a suite does. Job folders
go to a scratch directory, nothing is logged to MLflow.
Run: `python -m bench.bench_jobs` from the project root (part of `make bench`).
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path

ADHERENCE_TARGET = 1.10
OVERHEAD_SHARE_TARGET = 0.05
# The smoke run of tests/integration/test_bench_smoke.py: one cheap job under the one-core budget.
SMOKE_ARGS: tuple[str, ...] = ()
SMOKE_ENV: dict[str, str] = {"BENCH_JOBS_FRAMEWORKS": "constant", "BENCH_JOBS_DATASETS": "breast_cancer",
                             "BENCH_JOBS_BUDGET": "test"}
# Parts of the harness's time, as (name, from stage, to stage) of a job's timeline.
PARTS = (
    ("worker start", None, "worker started"),
    ("imports+data", "worker started", "starting the framework"),
    ("save", "saving", "measuring latency"),
    ("exit", "done", "worker exited"),
    ("scoring", "worker exited", "scored"),
)


def _parts(timeline: dict[str, float]) -> dict[str, float]:
    parts = {}
    for name, begin, end in PARTS:
        if end in timeline and (begin is None or begin in timeline):
            parts[name] = timeline[end] - (timeline[begin] if begin else 0.0)
    return parts


def _setting(name: str, default: str) -> str:
    return os.environ.get(f"BENCH_JOBS_{name}", "") or default


def _figures(rows: list[dict[str, object]]) -> dict[str, float]:
    ok = [r for r in rows if r["status"] == "ok"]
    figures: dict[str, float] = {"jobs": float(len(rows)), "ok_jobs": float(len(ok))}
    if not ok:
        return figures
    harness = [float(r["harness_s"]) for r in ok]  # type: ignore[arg-type]
    startup = [float(r["startup_s"]) for r in ok]  # type: ignore[arg-type]
    wall = sum(float(r["duration_s"]) for r in ok)  # type: ignore[arg-type]
    jvm = [float(r["startup_s"]) for r in ok if r["framework"] == "h2o"]  # type: ignore[arg-type]
    adherence = [float(r["fit_over_budget"]) for r in ok]  # type: ignore[arg-type]
    figures.update(
        overhead_median_s=statistics.median(harness),
        overhead_max_s=max(harness),
        overhead_share=sum(harness) / wall,
        startup_share=sum(startup) / wall,
        adherence_median=statistics.median(adherence),
        adherence_max=max(adherence),
        adherence_over_target=float(sum(a > ADHERENCE_TARGET for a in adherence)),
    )
    if jvm:
        figures.update(h2o_jvm_start_median_s=statistics.median(jvm), h2o_jvm_start_max_s=max(jvm))
    for name, _, _ in PARTS:
        values = [r["parts"][name] for r in ok if name in r["parts"]]  # type: ignore[index,operator]
        if values:
            figures[f"part_{name}_median_s"] = statistics.median(values)
    return figures


def main() -> dict[str, float]:
    from tasks.evaluations.registry import all_evaluations
    from tasks.jobs import run_job
    from tasks.launch import chosen_launcher
    from tasks.plan import make_jobs
    from tasks.specs import FrameworkRef, load_budget, load_dataset_spec, load_suite

    suite = load_suite(_setting("SUITE", "smoke"), all_evaluations())
    budget = load_budget(_setting("BUDGET", suite.budget))
    wanted = _setting("FRAMEWORKS", "")
    frameworks = [FrameworkRef.parse(n) for n in wanted.split(",")] if wanted else suite.frameworks
    datasets = _setting("DATASETS", ",".join(suite.datasets)).split(",")
    specs = {name: load_dataset_spec(name) for name in datasets}
    missing = [name for name, spec in specs.items() if not spec.path.is_file()]
    if missing:
        print(f"datasets not built ({', '.join(missing)}): run `automl-eval datasets build` first.")
        return {}
    jobs = make_jobs(f"bench-{suite.name}", dict.fromkeys(datasets, "bench"), frameworks,
                     int(_setting("FOLDS", "1")), suite.seeds[:1], budget)
    print(f"{len(jobs)} jobs: {', '.join(datasets)} x {', '.join(f.id for f in frameworks)}, "
          f"budget {budget.name} ({budget.time_s} s, {budget.cores} core(s)), run one at a time, "
          f"workers started {chosen_launcher()}")
    header = f"{'job':<44} {'status':<8} {'wall':>7} {'fit':>7} {'pred':>6} {'lat':>6} {'start':>6} " \
             f"{'harness':>8} {'fit/bud':>8}"
    print(header)
    rows: list[dict[str, object]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-jobs-") as scratch:
        for job in jobs:
            result = run_job(job, specs[job.dataset], Path(scratch) / job.key)
            costs, info = result.costs, result.info
            startup = float(info.get("startup_s", 0.0))
            harness = max(0.0, costs.get("overhead_s", 0.0) - startup)
            hard_limit = json.loads((Path(scratch) / job.key / "job.json").read_text())["hard_limit_s"] \
                if (Path(scratch) / job.key / "job.json").is_file() else float("nan")
            row = {
                "job": job.label, "framework": job.framework, "status": result.status,
                "duration_s": costs.get("duration_s", 0.0), "fit_s": costs.get("fit_s", float("nan")),
                "predict_s": costs.get("predict_s", 0.0) + float(info.get("predict_proba_s", 0.0)),
                "latency_s": float(info.get("latency_measure_s", 0.0)), "startup_s": startup,
                "harness_s": harness, "fit_over_budget": costs.get("fit_s", float("nan")) / budget.time_s,
                "hard_limit_s": hard_limit, "parts": _parts(info.get("timeline_s", {})),
            }
            rows.append(row)
            print(f"{job.label:<44} {result.status:<8} {row['duration_s']:7.1f} {row['fit_s']:7.1f} "
                  f"{row['predict_s']:6.2f} {row['latency_s']:6.1f} {startup:6.1f} {harness:8.2f} "
                  f"{row['fit_over_budget']:8.2f}", flush=True)
    figures = _figures(rows)
    figures["bench_wall_s"] = time.perf_counter() - started
    print()
    if figures.get("ok_jobs"):
        f = figures
        print(f"harness overhead per job (framework start-up apart): median {f['overhead_median_s']:.2f} s, "
              f"max {f['overhead_max_s']:.2f} s; share of job wall time {f['overhead_share']:.1%} "
              f"(target <= {OVERHEAD_SHARE_TARGET:.0%}); framework start-up share {f['startup_share']:.1%}")
        parts = ", ".join(f"{name} {figures[f'part_{name}_median_s']:.2f}" for name, _, _ in PARTS
                          if f"part_{name}_median_s" in figures)
        print(f"where it goes (median s per job): {parts}")
        if "h2o_jvm_start_median_s" in figures:
            print(f"H2O JVM start (apart): median {figures['h2o_jvm_start_median_s']:.1f} s, "
                  f"max {figures['h2o_jvm_start_max_s']:.1f} s")
        print(f"budget adherence fit_s / time_s: median {figures['adherence_median']:.2f}, max "
              f"{figures['adherence_max']:.2f}; {int(figures['adherence_over_target'])} ok job(s) over "
              f"{ADHERENCE_TARGET}")
    stopped = [r for r in rows if r["status"] in ("timeout", "memory")]
    for row in stopped:
        print(f"stopped by the watchdog: {row['job']} after {row['duration_s']:.1f} s "
              f"(hard limit {row['hard_limit_s']:.0f} s)")
    if not stopped:
        print("no job ran past its hard limit")
    others = [r for r in rows if r["status"] not in ("ok", "timeout", "memory")]
    for row in others:
        print(f"{row['status']}: {row['job']}")
    return figures


if __name__ == "__main__":
    main()
