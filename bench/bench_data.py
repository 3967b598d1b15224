"""Benchmark: the data step, for the catalog and for large generated datasets.

Catalog: seconds to materialize every card's dataset and folds from the packages into an empty
scratch project, to hash it the way DVC does (and whether it equals datasets.dvc's pin), and to
validate each dataset with the Great Expectations gate.

Large: for each size (default 1 M and 10 M rows x 30 columns, binary, Parquet, from the seeded
generator in bench/synthetic_data.py; not part of the catalog or CI), in a scratch project:
`datasets build` and `datasets validate` (wall time and peak RSS, each in a fresh process),
then one job per framework at the `1m2c` budget (default: every framework that takes binary
tables, constant, hgb, autogluon, flaml, h2o, rf and xgboost as of now): the worker's data-load
time, its RSS once loaded (data_load_rss_mb, the harness's share; and what loading added to it,
the data's own share, without the ~200 MB of libraries every worker holds) and the job tree's
peak RSS, next to the in-memory size of the fold's data; the fit time, and the rows the
framework was fitted on where it used a sample (fit_rows). Last, how each figure grows from the
smallest size to the largest (linear would be the ratio of the sizes), and a table per size of
each framework's status, fit rows, job peak memory and AUC (with the reason where it was not ok).

Run: `python -m bench.bench_data` (part of `make bench`);
`python -m bench.bench_data --rows 1000000,10000000 --frameworks constant,hgb,autogluon --skip-catalog`.
The 10 M-row size needs about 2 GB of disk and, with hgb, about 8 GB of memory; every framework at
both sizes takes about half an hour on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ROWS = (1_000_000, 10_000_000)
JOB_BUDGET = "1m2c"
# The smoke run of tests/integration/test_bench_smoke.py: the whole catalog (it has no smaller size),
# then two tiny generated sizes (two, so the growth lines are drawn) with the cheapest job. {tmp}: the
# test's scratch folder.
SMOKE_ARGS: tuple[str, ...] = ("--rows", "1000,2000", "--frameworks", "constant", "--scratch", "{tmp}")


def catalog(figures: dict[str, float]) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-data-") as tmp:
        home = Path(tmp)
        shutil.copytree(PROJECT_ROOT / "specs" / "datasets", home / "specs" / "datasets")
        for name in ("params.yaml", ".dvcignore", "datasets.dvc"):
            if (PROJECT_ROOT / name).is_file():
                shutil.copy(PROJECT_ROOT / name, home / name)
        previous = os.environ.get("AUTOML_EVAL_HOME")
        os.environ["AUTOML_EVAL_HOME"] = str(home)
        try:
            _catalog_in(home, figures)
        finally:
            if previous is None:
                os.environ.pop("AUTOML_EVAL_HOME", None)
            else:
                os.environ["AUTOML_EVAL_HOME"] = previous


def _catalog_in(home: Path, figures: dict[str, float]) -> None:
    from tasks.data.build import build
    from tasks.data.validate import validate_dataset
    from tasks.data.versions import dir_md5, pinned_md5
    from tasks.specs import list_dataset_specs

    started = time.perf_counter()
    report = build(use_dvc=False)
    figures["materialize_s"] = time.perf_counter() - started
    started = time.perf_counter()
    workspace = dir_md5(home / "datasets")
    figures["dvc_hash_s"] = time.perf_counter() - started
    print(
        f"materialized {len(report.built)} datasets in {figures['materialize_s']:.1f} s "
        f"({len(report.errors)} errors); DVC hash {workspace} in {figures['dvc_hash_s']:.2f} s; "
        f"equals datasets.dvc: {workspace == pinned_md5()}"
    )
    total = time.perf_counter()
    for spec in list_dataset_specs():
        started = time.perf_counter()
        outcome = validate_dataset(spec)
        seconds = time.perf_counter() - started
        figures[f"validate_{spec.name}_s"] = seconds
        print(
            f"  validate {spec.name:<14} {seconds:6.2f} s  {outcome.expectations:4d} expectations  "
            f"{'passed' if outcome.ok else 'FAILED'}"
        )
    figures["validate_all_s"] = time.perf_counter() - total
    print(
        f"validated all in {figures['validate_all_s']:.1f} s "
        "(the first includes importing Great Expectations)"
    )


# ---------------------------------------------------------------- large generated datasets


def _step(home: Path, *argv: str) -> dict[str, Any]:
    """Run one step in a fresh process; its wall time and peak RSS (from the kernel)."""
    environment = {**os.environ, "AUTOML_EVAL_HOME": str(home), "PYTHONPATH": str(PROJECT_ROOT)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "bench.bench_data", "--step", *argv],
        cwd=home, env=environment, capture_output=True, text=True, check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"step {argv} failed: {(done.stdout + done.stderr)[-2000:]}")
    return {"seconds": seconds, **json.loads(done.stdout.strip().splitlines()[-1])}


def _run_step(step: str, name: str, framework: str = "constant") -> dict[str, Any]:
    """Inside the fresh process: do one step and print a JSON line of what it measured."""
    figures: dict[str, Any] = {}
    if step == "build":
        from tasks.data.build import build

        report = build([name], use_dvc=False)
        if report.errors:
            raise RuntimeError("; ".join(report.errors))
    elif step == "validate":
        from tasks.data.validate import validate_dataset

        outcome = validate_dataset(name)
        figures.update(ok=outcome.ok, failures=outcome.failures[:3], expectations=outcome.expectations)
    elif step == "fold_size":
        from tasks.data.folds import split
        from tasks.data.load import read_parts
        from tasks.specs import load_dataset_spec

        spec = load_dataset_spec(name)
        parts = read_parts(spec, list(split(spec, 0)), columns=spec.features)
        figures["fold_mb"] = sum(p.memory_usage(deep=True).sum() for p in parts) / 2**20
    elif step == "job":
        figures.update(_job(name, framework))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    # CPU seconds beside wall seconds: on a shared, loaded machine the wall time mostly measures
    # waiting for a core. A job's worker is a child process: its CPU is in the job's own cpu_s.
    figures["cpu_s"] = usage.ru_utime + usage.ru_stime
    figures["peak_rss_mb"] = usage.ru_maxrss / 1024
    return figures


def _job(name: str, framework: str) -> dict[str, Any]:
    import pandas as pd

    from tasks import paths
    from tasks.jobs import run_job
    from tasks.plan import Job
    from tasks.resources import SERIES_FILE
    from tasks.specs import load_budget, load_dataset_spec
    from tasks.worker import DATA_LOAD_FILE

    spec = load_dataset_spec(name)
    job = Job("bench", name, "v0", framework, None, 0, 0, load_budget(JOB_BUDGET), {})
    job_dir = paths.project_root() / "runs" / framework
    result = run_job(job, spec, job_dir)
    try:  # what loading added to the worker: the data's own share of the harness RSS
        data_mb = json.loads((job_dir / DATA_LOAD_FILE).read_text()).get("data_mb")
    except (OSError, ValueError):
        data_mb = None
    try:  # the job tree's mean CPU use (200 % is both cores of 1m2c): a shared machine shows here
        samples = pd.read_csv(job_dir / SERIES_FILE)
        cpu_pct = float(samples["cpu_pct"].mean()) if len(samples) else None
    except (OSError, ValueError, KeyError):
        cpu_pct = None
    return {
        "data_mb": data_mb,
        "status": result.status,
        "error": result.error.splitlines()[0] if result.error else "",
        "data_load_s": result.costs.get("data_load_s"),
        "data_load_rss_mb": result.costs.get("data_load_rss_mb"),
        "job_peak_rss_mb": result.costs.get("peak_rss_mb"),
        "fit_s": result.costs.get("fit_s"),
        "fit_rows": result.costs.get("fit_rows"),
        "job_cpu_s": result.costs.get("cpu_s"),
        "train_rows": result.costs.get("train_rows"),
        "result": result.scores.get("result"),
        "cpu_pct": cpu_pct,
    }


def _project(home: Path, rows: int) -> str:
    import yaml

    from bench.synthetic_data import card, write_parquet

    name = f"synthetic_{rows // 1_000_000}m" if rows >= 1_000_000 else f"synthetic_{rows}"
    for folder in ("specs/datasets", "datasets"):
        (home / folder).mkdir(parents=True, exist_ok=True)
    shutil.copy(PROJECT_ROOT / "specs" / "budgets.yaml", home / "specs" / "budgets.yaml")
    shutil.copy(PROJECT_ROOT / "params.yaml", home / "params.yaml")
    (home / "pyproject.toml").write_text("")
    started = time.perf_counter()
    write_parquet(home / "datasets" / f"{name}.parquet", rows)
    print(f"  generated {rows:,} rows x 30 columns in {time.perf_counter() - started:.1f} s", flush=True)
    (home / "specs" / "datasets" / f"{name}.yaml").write_text(
        yaml.safe_dump(card(name, f"{name}.parquet", rows), sort_keys=False)
    )
    return name


def large(sizes: list[int], frameworks: list[str], scratch: Path | None) -> dict[int, dict[str, Any]]:
    measured: dict[int, dict[str, Any]] = {}
    for rows in sizes:
        with tempfile.TemporaryDirectory(prefix="bench-data-large-", dir=scratch) as tmp:
            home = Path(tmp)
            print(f"\n{rows:,} rows:", flush=True)
            name = _project(home, rows)
            figures: dict[str, Any] = {}
            for step in ("build", "validate", "fold_size"):
                figures[step] = _step(home, step, name)
                shown = {k: (round(v, 1) if isinstance(v, float) else v) for k, v in figures[step].items()}
                print(f"  {step:<9} {shown}", flush=True)
            for framework in frameworks:
                figures[f"job {framework}"] = job = _step(home, "job", name, framework)
                fold_mb = figures["fold_size"]["fold_mb"]
                print(
                    f"  job {framework:<9} {job['status']}: data load {job['data_load_s'] or 0:.1f} s, "
                    f"harness RSS {job['data_load_rss_mb'] or 0:.0f} MB "
                    f"({(job['data_load_rss_mb'] or 0) / fold_mb:.2f} x the fold's {fold_mb:.0f} MB; "
                    f"loading added {job['data_mb'] or 0:.0f} MB, {(job['data_mb'] or 0) / fold_mb:.2f} x), "
                    f"job tree peak {job['job_peak_rss_mb'] or 0:.0f} MB, fit {job['fit_s'] or 0:.1f} s"
                    + (f" on {job['fit_rows']:,.0f} of {job['train_rows']:,.0f} rows (a sample)"
                       if (job.get("fit_rows") or 0) < (job.get("train_rows") or 0) else "")
                    + (f", AUC {job['result']:.4f}" if job.get("result") is not None else "")
                    + (f"; {job['error']}" if job["error"] else ""),
                    flush=True,
                )
            measured[rows] = figures
    return measured


# What each step's growth is judged by. The worker's data load is the same for every framework:
# the first job shows it; the others show what the framework itself grew by.
_GROWTH_KEYS = {
    "build": ("seconds", "cpu_s", "peak_rss_mb"),
    "validate": ("seconds", "cpu_s", "peak_rss_mb"),
    "fold_size": ("fold_mb",),
}
_FIRST_JOB_KEYS = ("data_load_s", "data_load_rss_mb", "data_mb", "job_peak_rss_mb", "fit_s")
_JOB_KEYS = ("job_peak_rss_mb", "fit_s", "fit_rows")


def _growth(measured: dict[int, dict[str, Any]]) -> None:
    if len(measured) < 2:
        return
    small, big = min(measured), max(measured)
    print(f"\ngrowth {small:,} -> {big:,} rows (x{big / small:.0f} rows; linear = x{big / small:.0f}):")
    jobs = [step for step in measured[big] if step.startswith("job ")]
    for step, figures in measured[big].items():
        keys = _GROWTH_KEYS.get(step) or (_FIRST_JOB_KEYS if step == jobs[0] else _JOB_KEYS)
        for key in keys:
            before, after = measured[small].get(step, {}).get(key), figures.get(key)
            if isinstance(before, (int, float)) and isinstance(after, (int, float)) and before:
                print(f"  {step:<14} {key:<17} {before:10.1f} -> {after:10.1f}  x{after / before:.1f}")
            elif step.startswith("job ") and key == keys[0] and figures.get("status") != "ok":
                print(f"  {step:<14} {figures.get('status')} at {big:,} rows: no growth to show")


def _table(measured: dict[int, dict[str, Any]]) -> None:
    """Per size, one row per framework: what a user would see of its job."""
    for rows, figures in measured.items():
        print(f"\n{rows:,} rows at {JOB_BUDGET}:")
        print("| framework | status | fit rows | job peak MB | fit s | mean CPU % | AUC | reason |")
        print("|---|---|---|---|---|---|---|---|")
        for step, job in figures.items():
            if not step.startswith("job "):
                continue
            fit_rows = f"{job['fit_rows']:,.0f}" if job.get("fit_rows") else ""
            if fit_rows and (job.get("fit_rows") or 0) < (job.get("train_rows") or 0):
                fit_rows += f" of {job['train_rows']:,.0f}"
            auc = f"{job['result']:.4f}" if job.get("result") is not None else ""
            fit_s = f"{job['fit_s']:.1f}" if job.get("fit_s") is not None else ""
            cpu = f"{job['cpu_pct']:.0f}" if job.get("cpu_pct") is not None else ""
            print(f"| {step[4:]} | {job['status']} | {fit_rows} | {job.get('job_peak_rss_mb') or 0:.0f} | "
                  f"{fit_s} | {cpu} | {auc} | {job['error']} |")


def tabular_frameworks() -> list[str]:
    """Every framework whose adapter declares it takes binary tables (the generated data)."""
    from tasks.frameworks.registry import all_adapters

    return [name for name, adapter in all_adapters().items()
            if "tabular" in adapter.modalities and "binary" in adapter.problem_types]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_data")
    parser.add_argument("--rows", default=",".join(map(str, DEFAULT_ROWS)), help="sizes, comma-separated")
    parser.add_argument("--frameworks", default="",
                        help="jobs to run at each size, at 1m2c (default: every framework taking tables)")
    parser.add_argument("--skip-catalog", action="store_true", help="only the large datasets")
    parser.add_argument("--scratch", type=Path, default=None, help="folder for the scratch projects")
    parser.add_argument("--step", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.step:
        print(json.dumps(_run_step(*args.step), default=str))
        return {}
    figures: dict[str, Any] = {}
    if not args.skip_catalog:
        catalog(figures)
    sizes = [int(size) for size in args.rows.split(",") if size.strip()]
    frameworks = [f for f in args.frameworks.split(",") if f] or tabular_frameworks()
    measured = large(sizes, frameworks, args.scratch)
    _growth(measured)
    _table(measured)
    figures["large"] = measured
    return figures


if __name__ == "__main__":
    main()
