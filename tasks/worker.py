"""The child process of one job: load the fold, fit, predict, time, save. `python -m tasks.worker JOB_DIR`.

It reads JOB_DIR/job.json (written by tasks.jobs), pins itself to its cores, and writes, in this
order: model/ (with task.json), predictions.csv, then result.json. It knows nothing of Prefect or
MLflow and never scores: the parent does, from predictions.csv. Exit code 0 when the job is ok,
1 when it failed with an exception (the error is in result.json).

The same `main` runs in a process started cold (`python -m tasks.worker`) or forked from the warm
fork server (tasks/forkserver.py), which has the harness's own imports already loaded.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Only the standard library, the child's start-up and plain names before the pin: numpy & co start
# their thread pools at import, and those must start on the job's cores. The rest comes after it.
from tasks.child_process import DATA_LOAD_FILE, JOB_FILE, begin, exit_now, failure_text
from tasks.energy import EnergyMeter
from tasks.predictions import FORECAST_ID, FORECAST_TIME, PREDICTION, ROW, TRUTH, proba_column

if TYPE_CHECKING:
    from tasks.child_requests import JobRequest
    from tasks.results import JobInfo

STAGE_FILE = "stage.txt"  # the step the worker is in, so a kill can say where it happened
ANYTIME_MAX_S = 20.0  # the most a job spends scoring its anytime curve's candidates
WORK_DIR = "work"  # scratch space of the framework, removed once the model is saved


def now_utc() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")  # MLflow keeps run times in ms


# When each stage began (unix time): the harness turns it into the job's timeline, which shows
# where a job's time outside the framework goes.
_stage_started: dict[str, float] = {}


def mark_stage(job_dir: Path, stage: str) -> None:
    _stage_started[stage] = time.time()
    (job_dir / STAGE_FILE).write_text(stage)


def _latencies_ms(model: Any, X_test: Any, calls: int, max_s: float) -> list[float]:
    """Single-row predict latency, cycling through the test rows: `calls` times or until `max_s`
    seconds have gone, whichever comes first (at least one call). A model behind a client-server
    round trip (H2O) would otherwise spend half a minute here; serving under load is measured
    apart (tasks/evaluations/serving.py)."""
    latencies: list[float] = []
    began = time.perf_counter()
    for call in range(max(1, calls)):
        if latencies and time.perf_counter() - began >= max_s:
            break
        row = X_test.iloc[[call % len(X_test)]]
        started = time.perf_counter()
        model.predict(row)
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def run(job_dir: Path, request: JobRequest, costs: dict[str, float], info: JobInfo) -> None:
    """Everything a job does; raises on any failure (the caller records it)."""
    # After the pin (see the top of this module): these start thread pools or import ones that do.
    import numpy as np
    import pandas as pd

    from tasks.child_requests import DataLoad  # inside: after the core pin (numpy's pools)
    from tasks.data.fold_data import load_fold  # inside: after the core pin (numpy's pools)
    from tasks.frameworks.base import JobFailure  # inside: after the core pin (numpy's pools)
    from tasks.frameworks.registry import (  # inside: after the core pin (numpy's pools)
        get_adapter,
        write_model_identity,
    )
    from tasks.results import (  # inside: after the core pin (numpy's pools)
        INPUT_EXAMPLE_FILE,
        MODEL_DIR,
        PREDICTIONS_FILE,
    )

    job, spec = request.job, request.spec
    adapter = get_adapter(job.framework)

    mark_stage(job_dir, "loading data")
    started, resident_before_mb = time.perf_counter(), _resident_mb()
    fold = load_fold(spec, job.fold)
    task, classes, test_rows = fold.task, fold.task.classes, fold.test_rows
    X_train, y_train, X_test, y_test = fold.X_train, fold.y_train, fold.X_test, fold.y_test
    del fold  # the frames above are all the job keeps
    costs.update(train_rows=float(len(X_train)), test_rows=float(len(X_test)))
    costs["data_load_s"] = time.perf_counter() - started
    # The harness's own share of the job's memory: the budget's memory_mb is the framework's.
    costs["data_load_rss_mb"] = _own_usage()[1]
    # What loading added is the data's copy in the harness: the watchdog grants it on top of memory_mb.
    data_mb = max(0.0, costs["data_load_rss_mb"] - resident_before_mb)
    DataLoad(data_load_rss_mb=costs["data_load_rss_mb"], data_mb=data_mb).write(job_dir / DATA_LOAD_FILE)
    info.classes = list(classes)

    params = dict(request.params)
    info.params = params
    # What the child really runs under (the parent set it): the record to check enforcement by.
    info.affinity = sorted(os.sched_getaffinity(0))
    info.environment = {
        name: os.environ.get(name, "")
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "CUDA_VISIBLE_DEVICES")
    }
    workdir = job_dir / WORK_DIR
    workdir.mkdir(parents=True, exist_ok=True)
    budget = job.budget

    mark_stage(job_dir, "starting the framework")
    started = time.perf_counter()
    adapter.start(budget, workdir)
    info.startup_s = time.perf_counter() - started

    meter = EnergyMeter(request.gpus)
    mark_stage(job_dir, "fitting")
    started = time.perf_counter()
    with meter.measure() as fit_energy:
        model = adapter.fit(
            X_train, y_train, task=task, budget=budget, params=params, workdir=workdir, seed=job.seed
        )
    costs["fit_s"] = time.perf_counter() - started

    mark_stage(job_dir, "predicting")
    started = time.perf_counter()
    with meter.measure() as predict_energy:
        predictions = np.asarray(model.predict(X_test))
    costs["predict_s"] = time.perf_counter() - started
    meter.close()
    if predictions.ndim == 0 or len(predictions) != len(X_test):
        raise JobFailure(f"{job.framework}'s model predicted an array of shape {predictions.shape} for "
                         f"{len(X_test):,} test rows; it most likely trained no model, so raise the "
                         "budget's time or set `_max_train_rows`")
    # Absent, never estimated, where no source exists: info.energy says which source and why not.
    info.energy = {"source": fit_energy.source, "reason": fit_energy.reason, "fit_parts_j": fit_energy.parts}
    if fit_energy.joules is not None:
        costs["energy_fit_j"] = fit_energy.joules
    if predict_energy.joules is not None and len(X_test):
        costs["energy_predict_per_1k_j"] = predict_energy.joules / len(X_test) * 1000
    costs["throughput_rows_s"] = len(X_test) / max(costs["predict_s"], 1e-9)
    table = pd.DataFrame({ROW: test_rows, TRUTH: y_test.to_numpy(), PREDICTION: predictions})
    if task.is_classification:
        started = time.perf_counter()
        proba = model.predict_proba(X_test)
        info.predict_proba_s = time.perf_counter() - started
        for label in classes:
            table[proba_column(label)] = proba[label].to_numpy(dtype=float)
    if task.forecast is not None:
        # Long format: series id and timestamp next to each point forecast, then its quantiles.
        table.insert(1, FORECAST_ID, X_test[task.forecast.id].to_numpy())
        table.insert(2, FORECAST_TIME, X_test[task.forecast.timestamp].to_numpy())
        started = time.perf_counter()
        quantiles = model.predict_quantiles(X_test)
        info.predict_quantiles_s = time.perf_counter() - started
        if quantiles is not None:
            for column in quantiles.columns:
                table[column] = quantiles[column].to_numpy(dtype=float)

    mark_stage(job_dir, "saving")
    model_dir = job_dir / MODEL_DIR
    model.save(model_dir)
    write_model_identity(model_dir, adapter, task)
    table.to_csv(job_dir / PREDICTIONS_FILE, index=False)
    _save_input_example(X_test, job_dir / INPUT_EXAMPLE_FILE)
    costs["models_count"] = float(model.models_count)
    costs["fit_rows"] = float(model.fit_rows if model.fit_rows is not None else len(X_train))
    costs.update({name: float(value) for name, value in model.training_costs().items()})
    for key, value in model.info().items():  # the framework's own (JobInfo keeps unknown keys)
        setattr(info, key, value)
    info.fixed_work = adapter.fixed_work
    info.fit_stopped_by_time = model.stopped_by_time()

    _record_anytime(job_dir, model, costs, info, X_test, y_test, task, spec, budget.time_s)

    mark_stage(job_dir, "measuring latency")
    started = time.perf_counter()
    latencies = _latencies_ms(model, X_test, request.latency_calls, request.latency_max_s)
    info.latency_measure_s = time.perf_counter() - started
    costs["latency_calls"] = float(len(latencies))
    costs["latency_p50_ms"] = float(np.percentile(latencies, 50))
    costs["latency_p99_ms"] = float(np.percentile(latencies, 99))
    shutil.rmtree(workdir, ignore_errors=True)


def _record_anytime(job_dir: Path, model: Any, costs: dict[str, float], info: JobInfo, X_test: Any,
                    y_test: Any, task: Any, spec: Any, budget_time_s: float) -> None:
    """The score-over-time curve (anytime.csv) of a model that records its search's progress; a model
    that does not says why in info.anytime. Nothing here fails the job: the curve is an extra."""
    from tasks.anytime import ANYTIME_FILE, series, time_to_share  # inside: after the core pin (pandas)
    from tasks.frameworks.capabilities import NotOffered  # inside: after the core pin (numpy)

    mark_stage(job_dir, "scoring the anytime curve")
    try:
        candidates = model.anytime_candidates()
    except NotOffered as refusal:
        info.anytime = {"offered": False, "reason": str(refusal)}
        return
    if spec.problem_type not in ("binary", "multiclass", "regression"):
        info.anytime = {"offered": False, "reason": f"no anytime scoring for {spec.problem_type} yet"}
        return
    try:
        # Inside the job's grace (60 s + 10% of its time), beside predicting, saving and the latency calls.
        max_s = min(ANYTIME_MAX_S, 5.0 + 0.05 * budget_time_s)
        curve = series(candidates, costs["fit_s"], X_test, y_test, spec.problem_type, str(spec.metric),
                       list(task.classes), max_s=max_s)
    except Exception as error:  # noqa: BLE001 - a candidate that cannot predict: the job stands
        info.anytime = {"offered": True, "reason": f"scoring a candidate failed: {error!r}"[:500]}
        return
    curve.to_csv(job_dir / ANYTIME_FILE, index=False)
    costs.update(time_to_share(curve))
    costs["anytime_points"] = float(len(curve))
    info.anytime = {"offered": True, "candidates": len(candidates),
                    "timing": next((c.timing for c in candidates if c.timing), "")}


def _resident_mb() -> float:
    """This process's resident memory now (Linux), 0 where /proc is not there."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _save_input_example(X_test: Any, path: Path, rows: int = 5) -> None:
    """The first test rows with their dtypes: the model's input example and signature in MLflow."""
    try:
        X_test.head(rows).to_parquet(path, index=False)
    except Exception:  # noqa: BLE001 - columns parquet cannot hold: the model is logged without it
        path.unlink(missing_ok=True)


def _own_peak_rss_kib() -> float:
    """This process's own peak RSS (VmHWM of its memory map).

    Not getrusage's ru_maxrss: Linux carries the *spawning* process's peak across exec into it, so
    a cold worker started by a Prefect job process (~280 MB with Prefect and MLflow loaded) would
    report that process's memory as its own.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return float(line.split()[1])
    except (OSError, IndexError, ValueError):
        pass
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # not Linux: the kernel's figure


def _own_usage() -> tuple[float, float]:
    """This process's (and its reaped children's) CPU seconds and peak RSS in MB, from the kernel."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime
    return cpu_s, max(_own_peak_rss_kib(), children.ru_maxrss) / 1024  # Linux reports KiB


def _limit_thread_pools(threads: int) -> list[dict[str, Any]]:
    """Hold the BLAS/OpenMP pools already loaded to the budget's threads.

    The thread variables only reach libraries loaded after they are set; in a worker forked from
    the warm server numpy's OpenBLAS and scikit-learn's OpenMP are loaded already.
    """
    from threadpoolctl import threadpool_info, threadpool_limits  # after the pin, like numpy

    threadpool_limits(limits=threads)
    return [{"api": pool["internal_api"], "threads": pool["num_threads"]} for pool in threadpool_info()]


def main(argv: list[str]) -> int:
    entered = time.time()
    job_dir = Path(argv[1]).resolve()
    raw_request = json.loads((job_dir / JOB_FILE).read_text())
    # Pinned first, before numpy & co start their thread pools; then it dies with its supervisor.
    begin(raw_request.get("cpus"))
    _stage_started.clear()
    _stage_started["worker started"] = entered

    # After the pin (see the top of this module): they import pydantic, the framework registry, ...
    from tasks.child_requests import JobRequest  # inside: after the core pin (numpy's pools)
    from tasks.frameworks.base import JobFailure  # inside: after the core pin (numpy's pools)
    from tasks.frameworks.registry import get_adapter  # inside: after the core pin (numpy's pools)
    from tasks.results import JobInfo, JobResult, WorkerUsage  # inside: after the core pin (numpy's pools)

    request = JobRequest.from_json(raw_request)
    result = JobResult(job_key=request.job_key, started_utc=now_utc())
    costs: dict[str, float] = {}
    info = JobInfo()
    adapter = None
    try:
        info.thread_pools = _limit_thread_pools(request.threads or 1)
        adapter = get_adapter(request.job.framework)
        # The version this interpreter imports: a framework environment's, or the main one's.
        result.framework_version = adapter.version() or ""
        info.python = sys.executable
        run(job_dir, request, costs, info)
        result.status = "ok"
    except JobFailure as exc:  # its message is the whole reason: no traceback to read
        result.status = "failed"
        result.error = str(exc)
    except Exception as exc:  # noqa: BLE001 - every failure is recorded, none escapes
        result.status = "failed"
        result.error = failure_text(exc, traceback.format_exc())
    finally:
        if adapter is not None:
            try:
                adapter.stop()
            except Exception as exc:  # noqa: BLE001
                info.stop_error = repr(exc)
    cpu_s, peak_rss_mb = _own_usage()
    info.worker_usage = WorkerUsage(cpu_s=cpu_s, peak_rss_mb=peak_rss_mb)
    mark_stage(job_dir, "done")
    info.stage_started_unix = dict(_stage_started)
    result.costs, result.info, result.ended_utc = costs, info.to_json(), now_utc()
    result.save(job_dir)
    return 0 if result.status == "ok" else 1


if __name__ == "__main__":
    exit_now(main(sys.argv))
