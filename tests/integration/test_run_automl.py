"""A mini suite with real AutoGluon and H2O: the MLflow record and the pyfunc models it holds."""

from __future__ import annotations

import mlflow
import numpy as np
import pandas as pd
import pytest
from run_support.project import add_suites, client, executions, job_runs, run_cli

from tasks.data.folds import split
from tasks.data.load import load_frame
from tasks.frameworks.registry import get_adapter
from tasks.specs import load_dataset_spec
from tasks.vocabulary import (
    COST_METRICS,
    JOB_PARAMS,
    JOB_TAGS,
    RESULT,
    SCALING_JOB_TAGS,
    SCORE_METRICS,
    SERIES_METRICS,
)

pytestmark = [pytest.mark.integration, pytest.mark.heavy]  # over a minute each: make test-heavy (CI)

SUITE = {"datasets": ["breast_cancer"], "frameworks": ["autogluon", "h2o"], "folds": 1, "budget": "tiny"}
TINY = {"tiny": {"time_s": 10, "cores": 1, "memory_mb": 4096, "gpus": 0}}


def test_autogluon_and_h2o_runs_hold_the_vocabulary_and_reloadable_models(data_home) -> None:  # noqa: ANN001
    home = add_suites(data_home("breast_cancer"), {"automl": SUITE}, budgets=TINY)
    completed = run_cli(home, "run", "automl", "--parallel", "2", timeout=900)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "site-packages" in mlflow.__file__  # the project's mlflow/ folder never shadows it

    [execution] = executions(home, "automl")
    runs = {run.data.tags["framework"]: run for run in job_runs(home, execution.info.run_id)}
    assert set(runs) == {"autogluon", "h2o"}
    allowed_metrics = set(SCORE_METRICS["binary"]) | {RESULT} | set(COST_METRICS) | set(SERIES_METRICS)
    for framework, run in runs.items():
        tags, metrics = run.data.tags, run.data.metrics
        assert tags["status"] == "ok", (framework, tags.get("error"))
        # error, anytime_reason and energy_reason: only when there is one
        optional = {"error", "anytime_reason", "energy_reason"} | SCALING_JOB_TAGS
        assert set(JOB_TAGS) - optional <= set(tags)
        assert tags["framework_version"] == get_adapter(framework).version()
        assert tags["dataset"] == "breast_cancer" and tags["budget"] == "tiny"
        costs = {"fit_s", "predict_s", "latency_p99_ms", "peak_rss_mb"}
        expected = set(SCORE_METRICS["binary"]) | {RESULT} | costs
        assert expected <= set(metrics) <= allowed_metrics
        assert all(name in JOB_PARAMS or name.startswith("param.") for name in run.data.params)
        assert 0.5 < metrics["auc"] <= 1.0 and metrics[RESULT] == metrics["auc"]

    # each pyfunc model reloads and predicts exactly what its job recorded
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AUTOML_EVAL_HOME", str(home))
        spec = load_dataset_spec("breast_cancer")
        frame = load_frame(spec)
        _, test_rows = split(spec, 0)
        X_test = frame.iloc[test_rows][[c for c in frame.columns if c != spec.target]].reset_index(drop=True)
        mlflow.set_tracking_uri(f"sqlite:///{home / 'mlflow' / 'mlflow.db'}")
        try:
            for run in runs.values():
                recorded = pd.read_csv(client(home).download_artifacts(run.info.run_id, "predictions.csv"))
                model = mlflow.pyfunc.load_model(f"runs:/{run.info.run_id}/model")
                reloaded = model.predict(X_test)
                labels = reloaded["prediction"].astype(str).tolist()
                assert labels == recorded["prediction"].astype(str).tolist()
                proba = [c for c in recorded.columns if c.startswith("proba_")]
                np.testing.assert_allclose(reloaded[proba].to_numpy(), recorded[proba].to_numpy(), atol=1e-6)
        finally:
            get_adapter("h2o").stop()  # the reload started a JVM in this process
