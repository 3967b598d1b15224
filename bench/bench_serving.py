"""Benchmark: serving figures per framework, the serving stage's own overhead, and the time H2O jobs
spend on in-process latency before and after its bound.

It reads the job folders of a serving run (`automl-eval run serving` writes runs/serving/); where
there are none it serves BENCH_SERVING_FRAMEWORKS (default constant,hgb) on BENCH_SERVING_DATASET
(default breast_cancer) itself,
into a scratch folder, with the suite's serving block and short steps, twice per model: once with
the open loop under MLPerf LoadGen (the default) and once with the older Locust-only search. Figures:

- per dataset x framework: p99 at each concurrency step, serve_max_qps_at_slo, the worst error rate;
- per model x stack: the highest VALID QPS, its p99, the server tree's CPU seconds per 1,000 requests
  and the cores they keep busy at 100 QPS, its peak RSS and its cold start to the first answer;
- the open loop: LoadGen's highest VALID QPS with its p99, query count and the server's CPU %,
  beside the Locust-only search's max QPS on the same model (open_loop: locust);
- the stage's overhead: its wall time minus the counted load (the steps' durations), with the
  server's start-up and the pyfunc build shown apart;
- H2O's in-process latency: the time its jobs spent now (bounded: 100 calls or 3 s) and, measured
  here on one H2O job's saved model, the time 100 unbounded single-row calls take (the old way).

Settings (environment): BENCH_SERVING_RUNS (a folder of job folders, default runs/serving),
BENCH_SERVING_FRAMEWORKS, BENCH_SERVING_H2O_BEFORE (1: measure the 100 calls; 0: skip),
BENCH_SERVING_STEPS (search steps per open loop, default 4), BENCH_SERVING_SLO_MS (default: the
suite's), BENCH_SERVING_MAX_DURATION_S (LoadGen's longest step, default 30: 500 queries then need
at least 17 QPS), BENCH_SERVING_CONCURRENCY (the closed loop's users per step, default 1,4,16) and
BENCH_SERVING_DURATION_S (each closed-loop step's seconds, default 3) and BENCH_SERVING_STACKS (the
serving stacks, default mlflow; e.g. mlflow,onnxruntime: one row per model and stack),
BENCH_SERVING_MAX_BATCH_SIZE and BENCH_SERVING_MAX_BATCH_TIME_MS (the batching window of the stacks
that batch; default 1, no batching) and BENCH_SERVING_LOCUST (0: skip the Locust-only copy).
Run: `python -m bench.bench_serving` from the project root (part of `make bench`).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# The smoke run of tests/integration/test_bench_smoke.py: no job folders to read (so it serves
# itself), the cheapest model, and the fewest, shortest steps of each loop. {tmp}: the test's scratch.
SMOKE_ARGS: tuple[str, ...] = ()
SMOKE_ENV: dict[str, str] = {
    "BENCH_SERVING_RUNS": "{tmp}/no-job-folders", "BENCH_SERVING_FRAMEWORKS": "constant",
    "BENCH_SERVING_STEPS": "1", "BENCH_SERVING_MAX_DURATION_S": "5", "BENCH_SERVING_CONCURRENCY": "1,2",
    "BENCH_SERVING_DURATION_S": "1",
}


def _job_folders(root: Path) -> list[Path]:
    return sorted(path.parent.parent.parent for path in root.glob("*/evaluations/serving/result.json"))


def _serve_fresh(scratch: Path) -> list[Path]:
    from tasks.data.build import build
    from tasks.evaluations.registry import all_evaluations
    from tasks.evaluations.stage import run_evaluations
    from tasks.jobs import run_job
    from tasks.plan import Job
    from tasks.specs import load_budget, load_dataset_spec, load_suite

    suite = load_suite("serving", all_evaluations())
    steps = int(os.environ.get("BENCH_SERVING_STEPS", "4"))
    concurrency = [int(users) for users in os.environ.get("BENCH_SERVING_CONCURRENCY", "1,4,16").split(",")
                   if users.strip()]
    short = {"duration_s": float(os.environ.get("BENCH_SERVING_DURATION_S", "3")), "time_s": 600,
             "concurrency": concurrency, "search_steps": steps,
             "max_duration_s": float(os.environ.get("BENCH_SERVING_MAX_DURATION_S", "30"))}
    block = suite.evaluation_blocks()["serving"] | short
    block["stacks"] = [name.strip() for name in os.environ.get("BENCH_SERVING_STACKS", "mlflow").split(",")]
    block["time_s"] = 600 * len(block["stacks"])
    if os.environ.get("BENCH_SERVING_SLO_MS"):
        block["slo_ms"] = float(os.environ["BENCH_SERVING_SLO_MS"])
    block["max_batch_size"] = int(os.environ.get("BENCH_SERVING_MAX_BATCH_SIZE", "1"))
    block["max_batch_time_ms"] = float(os.environ.get("BENCH_SERVING_MAX_BATCH_TIME_MS", "5"))
    with_locust = os.environ.get("BENCH_SERVING_LOCUST", "1") != "0"
    spec = load_dataset_spec(os.environ.get("BENCH_SERVING_DATASET", "breast_cancer"))
    build([spec.name])
    folders = []
    for framework in os.environ.get("BENCH_SERVING_FRAMEWORKS", "constant,hgb").split(","):
        budget = load_budget(suite.budget)
        job = Job("bench_serving", spec.name, "bench", framework.strip(), None, 0, 0, budget, {})
        job_dir = scratch / job.key
        result = run_job(job, spec, job_dir)
        if result.status == "ok" and with_locust:
            # The same fitted model, served again with the Locust-only open loop, in a copy of the job.
            locust_dir = job_dir.with_name(job_dir.name + "-locust")
            shutil.copytree(job_dir, locust_dir)
            run_evaluations(job, spec, job_dir, result, {"serving": block})
            run_evaluations(job, spec, locust_dir, result, {"serving": block | {"open_loop": "locust"}})
            folders.append(locust_dir)
        elif result.status == "ok":
            run_evaluations(job, spec, job_dir, result, {"serving": block})
        folders.append(job_dir)
    return folders


def _h2o_unbounded_latency_s(job_dir: Path, calls: int = 100) -> tuple[float, int]:
    """Seconds for `calls` single-row in-process predictions on an H2O job's saved model (the JVM
    start not included), as every H2O job spent before the bound."""
    from tasks.data.fold_data import load_fold
    from tasks.frameworks.registry import get_adapter, load_saved_model
    from tasks.plan import Job
    from tasks.specs import DatasetSpec
    from tasks.worker import _latencies_ms

    payload = json.loads((job_dir / "job.json").read_text())
    job = Job.from_dict(payload["job"])
    fold = load_fold(DatasetSpec(**payload["spec"]), job.fold)
    model, _ = load_saved_model(job_dir / "model")
    try:
        started = time.perf_counter()
        latencies = _latencies_ms(model, fold.X_test, calls, float("inf"))
        return time.perf_counter() - started, len(latencies)
    finally:
        get_adapter("h2o").stop()


def _rows(job_dir: Path) -> list[dict[str, Any]]:
    """One row per stack that served the job's model (its tags say which; older folders: mlflow)."""
    from tasks.evaluations.serving import DEFAULT_STACK, stack_metric

    result = json.loads((job_dir / "result.json").read_text())
    payload = json.loads((job_dir / "job.json").read_text())
    serving = json.loads((job_dir / "evaluations" / "serving" / "result.json").read_text())
    tags = serving.get("tags", {})
    stacks = [key.split(".")[1] for key in tags if key.count(".") == 1] or [DEFAULT_STACK]
    rows = []
    for stack in stacks:
        info = serving.get("info", {})
        info = info if stack == DEFAULT_STACK else info.get("stacks", {}).get(stack, {})
        metrics = {name: serving["metrics"].get(stack_metric(stack, name)) for name in
                   ("serve_max_qps_at_slo", "serve_startup_s", "serve_cold_start_s",
                    "serve_server_cpu_s_per_1k", "serve_server_peak_rss_mb")}
        batch = info.get("max_batch_size", 1)
        label = f"{stack}[b{batch}]" if batch > 1 else stack
        steps = info.get("steps", [])
        closed = [step for step in steps if step["mode"] == "closed"]
        loadgen = info.get("loadgen") or {}
        counted_s = sum(step["duration_s"] for step in steps + loadgen.get("steps", []))
        reason = tags.get(f"serving_stack.{stack}.reason") or serving.get("reason", "")
        rows.append({
            "dataset": payload["job"]["dataset"], "framework": f"{payload['job']['framework']}/{label}",
            "job_dir": job_dir,
            "status": tags.get(f"serving_stack.{stack}", serving["status"]),
            "reason": reason.splitlines()[:1] if tags.get(f"serving_stack.{stack}", "ok") != "ok" else [],
            "p99": {step["users"]: step["p99_ms"] for step in closed},
            "max_qps": metrics["serve_max_qps_at_slo"],
            "error_rate": max((step["error_rate"] for step in closed), default=float("nan")),
            "wall_s": serving.get("wall_s", 0.0), "counted_s": counted_s,
            "startup_s": metrics["serve_startup_s"] or float("nan"),
            "costs": {name.removeprefix("serve_"): value if value is not None else float("nan")
                      for name, value in metrics.items()},
            "build_s": info.get("build_s", info.get("pyfunc_build_s", float("nan"))),
            "latency_measure_s": result.get("info", {}).get("latency_measure_s"),
            "latency_calls": result.get("costs", {}).get("latency_calls"),
            "placement": serving.get("info", {}).get("load_placement", ""),
            "open_loop": serving.get("info", {}).get("open_loop", "locust"),
            "loadgen": loadgen,
            # The Locust-only search: its highest arrival rate within the SLO (pctl is LoadGen's own).
            "open_steps": [step for step in steps if step["mode"] == "open"],
            "locust_best": max((step for step in steps if step["mode"] == "open" and step.get("within_slo")),
                               key=lambda step: step["target_rate"], default={}),
        })
    return rows


def main() -> None:
    from tasks import paths

    root = Path(os.environ.get("BENCH_SERVING_RUNS", paths.runs_dir() / "serving"))
    folders = _job_folders(root) if root.is_dir() else []
    source = f"job folders of {root}"
    if not folders:
        scratch = Path(tempfile.mkdtemp(prefix="bench-serving-"))
        folders = _serve_fresh(scratch)
        source = f"served here, into {scratch}"
    folders = [folder for folder in folders if (folder / "evaluations" / "serving" / "result.json").is_file()]
    rows = [row for folder in folders for row in _rows(folder)]
    print(f"serving figures ({source}); timings are this machine's, under whatever else runs on it")
    steps = sorted({users for row in rows for users in row["p99"]})
    header = "dataset          framework/stack        status         " + " ".join(
        f"p99@c{u:<4}" for u in steps)
    print(header + "  maxQPS@SLO  err_rate  placement")
    for row in rows:
        cells = " ".join(f"{row['p99'].get(u, float('nan')):9.1f}" for u in steps)
        qps = row["max_qps"] if row["max_qps"] is not None else float("nan")
        print(f"{row['dataset']:<16} {row['framework']:<22} {row['status']:<14} {cells}  "
              f"{qps:10.1f}  {row['error_rate']:8.3f}  {row['placement']}")
        if row["reason"]:
            print(f"    {row['reason'][0]}")

    print("\nper model x stack: highest VALID QPS at the SLO, its p99, the server tree's cost over the load")
    print("dataset          framework/stack        status        validQPS  p99_ms  cpu_s/1k  cores/100QPS  "
          "peak_rss_mb  cold_start_s")
    for row in rows:
        best = row["loadgen"].get("best") or {}
        costs = row["costs"]
        qps = row["max_qps"] if row["max_qps"] is not None else float("nan")
        print(f"{row['dataset']:<16} {row['framework']:<22} {row['status']:<13} {qps:8.1f}  "
              f"{best.get('p99_ms', float('nan')):6.1f}  {costs['server_cpu_s_per_1k']:8.2f}  "
              f"{costs['server_cpu_s_per_1k'] / 10:12.2f}  {costs['server_peak_rss_mb']:11.0f}  "
              f"{costs['cold_start_s']:12.1f}")

    print("\nopen loop: LoadGen server scenario (highest VALID target QPS at the SLO) beside Locust's search")
    print("dataset          framework/stack        open_loop  maxQPS   p99_ms  pctl_ms  queries  step_s  "
          "server_cpu%  verdicts (qps:verdict)")
    for row in rows:
        best = row["loadgen"].get("best") or row["locust_best"]
        verdicts = " ".join(f"{step['target_qps']:.4g}:{'ok' if step['within_slo'] else step['validity']}"
                            for step in row["loadgen"].get("steps", []))
        verdicts = verdicts or " ".join(f"{step['target_rate']:.4g}:{'ok' if step['within_slo'] else 'over'}"
                                        for step in row["open_steps"])
        qps = row["max_qps"] if row["max_qps"] is not None else float("nan")
        nan = float("nan")
        print(f"{row['dataset']:<16} {row['framework']:<22} {row['open_loop']:<9} {qps:7.1f}  "
              f"{best.get('p99_ms', nan):7.1f}  {best.get('percentile_latency_ms', nan):7.1f}  "
              f"{best.get('queries', best.get('requests', 0)):7d}  {best.get('duration_s', nan):6.1f}  "
              f"{best.get('server_cpu_percent', nan):11.0f}  {verdicts}")
    unpaired = sorted({(row["dataset"], row["framework"]) for row in rows if row["open_loop"] != "locust"}
                      - {(row["dataset"], row["framework"]) for row in rows if row["open_loop"] == "locust"})
    for dataset, framework in unpaired if any(row["open_loop"] == "locust" for row in rows) else []:
        print(f"  {dataset} x {framework}: no Locust-only search on this model in these folders (unset "
              "BENCH_SERVING_RUNS, or point it at an empty folder, to serve each model both ways)")

    print("\nstage overhead (s): wall - counted load = overhead (start-up, pyfunc build apart)")
    overheads = []
    for row in rows:
        overhead = row["wall_s"] - row["counted_s"]
        overheads.append(overhead)
        print(f"  {row['dataset']:<16} {row['framework']:<11} wall {row['wall_s']:6.1f}  load "
              f"{row['counted_s']:6.1f}  overhead {overhead:6.1f}  (startup {row['startup_s']:5.1f}, "
              f"build {row['build_s']:5.1f})")
    if overheads:
        print(f"  median overhead {statistics.median(overheads):.1f} s over {len(overheads)} jobs")

    h2o = [(row["job_dir"], row) for row in rows if row["framework"] == "h2o/mlflow"]
    print("\nH2O in-process single-row latency per job (s)")
    if not h2o:
        print("  no H2O job in these folders (run `automl-eval run serving` first)")
        return
    for _, row in h2o:
        print(f"  after (bounded): {row['latency_measure_s']:.1f} s for {row['latency_calls']:.0f} calls "
              f"({row['dataset']})")
    if os.environ.get("BENCH_SERVING_H2O_BEFORE", "1") != "0":
        before_s, calls = _h2o_unbounded_latency_s(h2o[0][0])
        after_s = h2o[0][1]["latency_measure_s"]
        print(f"  before (100 unbounded calls, measured now on {h2o[0][1]['dataset']}'s model): "
              f"{before_s:.1f} s for {calls} calls; saved per H2O job: {before_s - after_s:.1f} s")


if __name__ == "__main__":
    # Its settings are environment variables (above): an argument, --help included, starts no run.
    if sys.argv[1:]:
        print(__doc__)
        raise SystemExit(0 if sys.argv[1:] in (["-h"], ["--help"]) else 2)
    main()
