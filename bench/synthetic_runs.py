"""Synthetic suite executions written into an MLflow store, for the report tests and benchmark.

The runs use the project's vocabulary (tasks.vocabulary) exactly as the tracking package writes
them: one experiment per suite, a parent run per execution, one child run per job with the job
tags, the score and cost metrics, and the budget/fold/seed params. Frameworks have known
strengths so tests can check that the statistics recover them.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from tasks.metric_registry import default_metric, metrics_for
from tasks.vocabulary import COST_METRICS, JOB_TAGS, LOWER_IS_BETTER, RESULT, SCORE_METRICS

DEFAULT_STRENGTHS: dict[str, float] = {"constant": 0.0, "rf": 1.0, "hgb": 1.4, "flaml": 1.7, "autogluon": 2.0}
PROBLEM_CYCLE = ("binary", "multiclass", "regression")
NATIVE_METRIC = {problem: default_metric(problem) for problem in PROBLEM_CYCLE}


@dataclass
class SyntheticSuite:
    """What to generate. `overrides` sets job tags for every run (e.g. a new framework_version)."""

    suite: str = "synthetic"
    datasets: int = 4
    strengths: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_STRENGTHS))
    folds: int = 3
    seeds: Sequence[int] = (0, 1, 2)
    seed_noise: float = 0.004  # std of `result` between seeds, in result units (AUC points / 100)
    fail: Sequence[tuple[str, str]] = ()  # (dataset, framework) pairs whose jobs all fail
    shift: Mapping[tuple[str, str], float] = field(default_factory=dict)  # added to `result`
    overrides: Mapping[str, str] = field(default_factory=dict)
    random_state: int = 0


def dataset_names(count: int) -> list[str]:
    return [f"ds{index:02d}_{PROBLEM_CYCLE[index % 3]}" for index in range(count)]


def synthetic_jobs(spec: SyntheticSuite) -> pd.DataFrame:
    """One row per job: tags (strings), metrics (floats) and params (`param.` columns)."""
    rng = np.random.default_rng(spec.random_state)
    rows: list[dict[str, object]] = []
    for d_index, dataset in enumerate(dataset_names(spec.datasets)):
        problem = PROBLEM_CYCLE[d_index % 3]
        metric = NATIVE_METRIC[problem]
        rows_total = int(200 * (1 + d_index) ** 1.5)
        difficulty = 0.3 + 0.1 * (d_index % 4)
        # Fold effects are shared by all frameworks (harder and easier folds), seeds are noise.
        fold_effect = rng.normal(0.0, 0.01, size=spec.folds)
        for fold in range(spec.folds):
            for seed in spec.seeds:
                # The seed's effect is drawn from a generator keyed by the seed itself, so two
                # executions with different seeds differ by seed noise only.
                for framework, strength in spec.strengths.items():
                    noise_rng = np.random.default_rng(
                        [spec.random_state, d_index, fold, int(seed), _stable_int(framework)]
                    )
                    quality = 1.0 - np.exp(-strength * difficulty * 2.0)  # 0 for constant, -> 1
                    quality += fold_effect[fold] + noise_rng.normal(0.0, spec.seed_noise)
                    quality += spec.shift.get((dataset, framework), 0.0)
                    failed = (dataset, framework) in spec.fail
                    rows.append(
                        _job_row(
                            spec,
                            dataset,
                            problem,
                            metric,
                            framework,
                            fold,
                            int(seed),
                            quality,
                            strength,
                            rows_total,
                            failed,
                            noise_rng,
                        )
                    )
    return pd.DataFrame(rows)


def _stable_int(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def _job_row(
    spec: SyntheticSuite,
    dataset: str,
    problem: str,
    metric: str,
    framework: str,
    fold: int,
    seed: int,
    quality: float,
    strength: float,
    rows_total: int,
    failed: bool,
    rng: np.random.Generator,
) -> dict[str, object]:
    tags = {
        "suite": spec.suite,
        "execution_id": "",
        "status": "failed" if failed else "ok",
        "framework": framework,
        "framework_name": framework.split(":")[0],
        "framework_version": "1.0.0",
        "dataset": dataset,
        "data_version": f"md5-{dataset}",
        "problem_type": problem,
        "metric": metric,
        "budget": "test",
        "fold": str(fold),
        "seed": str(seed),
        "git_sha": "abc1234",
        "app_version": "0.1.0",
        "host": "host-a",
        "cpu_model": "Synthetic CPU",
        "gpu_model": "none",
        "team": "core",
        "error": "RuntimeError: synthetic failure" if failed else "",
    }
    tags.update(spec.overrides)
    tags["job_key"] = hashlib.sha256(
        f"{spec.suite}|{dataset}|{framework}|{fold}|{seed}".encode()
    ).hexdigest()[:16]
    row: dict[str, object] = dict(tags)
    fit_s = 0.05 + strength**2 * 3.0 * (1 + rows_total / 5000) * float(rng.lognormal(0, 0.1))
    if not failed:
        scores = _scores(problem, quality, rng)
        row.update(scores)
        native = scores[metric]
        row[RESULT] = -native if metric in LOWER_IS_BETTER else native
        row.update(
            {
                "fit_s": fit_s,
                "predict_s": 0.01 + strength * 0.05,
                "latency_p50_ms": 0.2 + strength * 2.0,
                "latency_p99_ms": (0.4 + strength * 4.0) * float(rng.lognormal(0, 0.1)),
                "throughput_rows_s": 1e5 / (1 + strength),
                "model_size_mb": 0.01 + strength * 5,
                "models_count": float(1 + int(strength * 5)),
                "duration_s": fit_s + 2.0,
                "overhead_s": 1.5,
                "peak_rss_mb": 150 + strength * 200 * float(rng.lognormal(0, 0.05)),
                "cpu_s": fit_s * 0.9,
            }
        )
    row["train_rows"] = float(int(rows_total * 0.8))
    row["test_rows"] = float(rows_total - int(rows_total * 0.8))
    row["params.budget_time_s"] = "20"
    row["params.fold"] = str(fold)
    row["params.seed"] = str(seed)
    row.update({k: v for k, v in spec.overrides.items() if k.startswith("params.")})
    return row


def _scores(problem: str, quality: float, rng: np.random.Generator) -> dict[str, float]:
    """Every metric of the problem type in the metric registry: the hand-shaped ones below, and for any
    other a value that moves with the quality in the metric's direction (between 0 and about 1)."""
    quality = float(np.clip(quality, -0.2, 1.0))
    shaped = _shaped_scores(problem, quality)
    return {entry.name: shaped[entry.name] if entry.name in shaped
            else 0.3 * (1.0 - quality) if entry.lower_is_better else 0.5 + 0.45 * quality
            for entry in metrics_for(problem)}


def _shaped_scores(problem: str, quality: float) -> dict[str, float]:
    if problem == "binary":
        auc = 0.5 + 0.45 * quality
        return {
            "auc": auc,
            "logloss": 0.69 - 0.4 * quality,
            "acc": 0.6 + 0.35 * quality,
            "balacc": 0.5 + 0.4 * quality,
            "f1": 0.4 + 0.5 * quality,
        }
    if problem == "multiclass":
        return {
            "logloss": 1.1 - 0.8 * quality,
            "acc": 0.34 + 0.6 * quality,
            "balacc": 0.33 + 0.6 * quality,
            "macro_f1": 0.3 + 0.6 * quality,
        }
    rmse = 10.0 * (1.0 - 0.7 * quality)
    return {"rmse": rmse, "mae": rmse * 0.8, "r2": 1.0 - (rmse / 10.0) ** 2}


# ------------------------------------------------------------------------------ writing to MLflow

_METRIC_NAMES = {RESULT, *COST_METRICS, *(m for ms in SCORE_METRICS.values() for m in ms)}


def _split_row(row: Mapping[str, object]) -> tuple[dict[str, str], dict[str, float], dict[str, str]]:
    # The vocabulary's tags, and any other text column (a tag some runs have and others lack).
    tags = {
        k: str(v)
        for k, v in row.items()
        if (k in JOB_TAGS or (isinstance(v, str) and k not in _METRIC_NAMES and not k.startswith("params.")))
        and v is not None
        and not (isinstance(v, float) and pd.isna(v))
    }
    metrics = {k: float(v) for k, v in row.items() if k in _METRIC_NAMES and v is not None and not pd.isna(v)}
    params = {
        k[len("params.") :]: str(v)
        for k, v in row.items()
        if str(k).startswith("params.") and v is not None and not (isinstance(v, float) and pd.isna(v))
    }
    return tags, metrics, params


def write_execution(
    tracking_uri: str,
    jobs: pd.DataFrame,
    *,
    suite: str,
    parent_tags: Mapping[str, str] = (),
    bulk: bool = False,
) -> str:
    """Write one suite execution (parent run + one child per job row); return its execution id.

    bulk=True inserts the child rows with one SQL transaction (insert_job_runs), so tracking_uri must
    then be the store's database (sqlite:/// or postgresql://), not a server: the public client takes
    about 40 ms a run here, far too slow to fill a 5,000-run benchmark store.
    """
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param

    execution_id, experiment_id = start_execution(tracking_uri, suite, parent_tags)
    if bulk:
        insert_job_runs(tracking_uri, experiment_id, execution_id, jobs)
        return execution_id
    client = MlflowClient(tracking_uri)
    now_ms = int(time.time() * 1000)
    for record in jobs.to_dict("records"):
        tags, metrics, params = _split_row(record)
        tags.update({"execution_id": execution_id, "mlflow.parentRunId": execution_id})
        run = client.create_run(
            experiment_id,
            tags=tags,
            run_name=f"{tags['dataset']}/{tags['framework']}/f{tags['fold']}s{tags['seed']}",
        )
        client.log_batch(
            run.info.run_id,
            metrics=[Metric(k, v, now_ms, 0) for k, v in metrics.items()],
            params=[Param(k, v) for k, v in params.items()],
        )
        client.set_terminated(run.info.run_id)
    return execution_id


def start_execution(tracking_uri: str, suite: str, parent_tags: Mapping[str, str] = ()) -> tuple[str, str]:
    """The suite's experiment (made if new) and a finished parent run, through MLflow's client (any
    store, a server over HTTP included); returns (execution id, experiment id)."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name(suite)
    # Artifacts next to the sqlite file: MLflow's default would be ./mlruns in the working directory.
    artifacts = Path(tracking_uri.removeprefix("sqlite:///")).parent / "artifacts" / suite
    location = artifacts.as_uri() if tracking_uri.startswith("sqlite:///") else None
    experiment_id = (
        experiment.experiment_id
        if experiment
        else client.create_experiment(suite, artifact_location=location)
    )
    parent = client.create_run(
        experiment_id,
        run_name=f"{suite}-execution",
        tags={"suite": suite, "execution_state": "finished", **dict(parent_tags)},
    )
    execution_id = parent.info.run_id
    client.set_tag(execution_id, "execution_id", execution_id)
    client.set_terminated(execution_id)
    return execution_id, experiment_id


def insert_job_runs(database_url: str, experiment_id: str, execution_id: str, jobs: pd.DataFrame) -> None:
    """The execution's child runs written straight into an MLflow store's database in one transaction
    (SQLAlchemy URL: `sqlite:///…` or `postgresql+psycopg2://…`), with the tags, metrics and params
    MLflow's own client would write. For benchmarks that need tens of thousands of runs."""
    import sqlalchemy

    now_ms = int(time.time() * 1000)
    runs, tags_rows, metric_rows, param_rows = [], [], [], []
    for record in jobs.to_dict("records"):
        run_id = uuid.uuid4().hex
        tags, metrics, params = _split_row(record)
        tags.update(
            {
                "execution_id": execution_id,
                "mlflow.parentRunId": execution_id,
                "mlflow.runName": f"{tags['dataset']}/{tags['framework']}",
            }
        )
        runs.append(
            {
                "run_uuid": run_id,
                "name": tags["mlflow.runName"],
                "source_type": "LOCAL",
                "source_name": "",
                "entry_point_name": "",
                "user_id": "bench",
                "status": "FINISHED",
                "start_time": now_ms,
                "end_time": now_ms + 1000,
                "deleted_time": None,
                "source_version": "",
                "lifecycle_stage": "active",
                "artifact_uri": f"mlflow-artifacts:/{experiment_id}/{run_id}/artifacts",
                "experiment_id": int(experiment_id),
            }
        )
        tags_rows += [{"key": k, "value": v, "run_uuid": run_id} for k, v in tags.items()]
        metric_rows += [
            {"key": k, "value": v, "timestamp": now_ms, "step": 0, "is_nan": False, "run_uuid": run_id}
            for k, v in metrics.items()
        ]
        param_rows += [{"key": k, "value": v, "run_uuid": run_id} for k, v in params.items()]
    engine = sqlalchemy.create_engine(database_url)
    try:
        with engine.begin() as connection:
            for table, rows in (("runs", runs), ("tags", tags_rows), ("params", param_rows),
                                ("metrics", metric_rows), ("latest_metrics", metric_rows)):
                if rows:
                    columns = list(rows[0])
                    connection.execute(
                        sqlalchemy.text(f"INSERT INTO {table} ({', '.join(columns)})"
                                        f" VALUES ({', '.join(':' + c for c in columns)})"),
                        rows,
                    )
    finally:
        engine.dispose()
