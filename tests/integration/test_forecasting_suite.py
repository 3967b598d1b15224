"""A mini forecasting suite end to end: seasonal naive, Naive2 and statsforecast on the tourism
collection's two rolling origins, through `automl-eval run` into MLflow, then the report."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from run_support.project import add_suites, client, executions, job_runs, run_cli

pytestmark = pytest.mark.integration

SUITE = {"datasets": ["tourism_quarterly"], "frameworks": ["seasonal_naive", "naive2", "statsforecast"],
         "folds": 2, "budget": "test"}


def test_mini_forecasting_suite_runs_into_mlflow_and_the_report(data_home, tmp_path: Path) -> None:  # noqa: ANN001
    home = add_suites(data_home("tourism_quarterly"), {"forecast_mini": SUITE})
    done = run_cli(home, "run", "forecast_mini")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    (execution,) = executions(home, "forecast_mini")
    runs = job_runs(home, execution.info.run_id)
    assert len(runs) == 3 * 2
    by_framework: dict[str, list[dict[str, float]]] = {}
    for run in runs:
        assert run.data.tags["status"] == "ok", run.data.tags.get("error")
        assert run.data.tags["problem_type"] == "forecasting" and run.data.tags["metric"] == "owa"
        by_framework.setdefault(run.data.tags["framework"], []).append(run.data.metrics)
    for metrics in by_framework["naive2"]:
        assert metrics["owa"] == pytest.approx(1.0)  # the harness's Naive2 is the job's Naive2
    for metrics in by_framework["statsforecast"]:
        assert {"smape", "mase", "owa", "quantile_loss", "coverage"} <= set(metrics)
        assert metrics["result"] == -metrics["owa"] and 0 <= metrics["coverage"] <= 1
    assert "quantile_loss" not in by_framework["seasonal_naive"][0]  # no quantiles, none scored

    # The predictions cross as a long table: series, timestamp, truth, forecast, quantiles.
    run = next(r for r in runs if r.data.tags["framework"] == "statsforecast")
    path = client(home).download_artifacts(run.info.run_id, "predictions.csv", str(tmp_path))
    predictions = pd.read_csv(path)
    assert {"series_id", "timestamp", "truth", "prediction", "q0.1", "q0.5", "q0.9"} <= set(predictions)
    assert len(predictions) == 20 * 8  # 20 regions x horizon 8

    from tasks.report.build import report_execution

    uri = f"sqlite:///{home / 'mlflow' / 'mlflow.db'}"
    report = report_execution(execution.info.run_id, folder=tmp_path / "report", uri=uri, bootstrap_rounds=20)
    owa = pd.read_csv(report.folder / "forecast_owa.csv").set_index("framework")
    assert set(owa.index) == {"seasonal_naive", "naive2", "statsforecast"}
    assert owa.loc["naive2", "tourism_quarterly"] == pytest.approx(1.0)
    assert report.anchor == "naive2"  # Elo's anchor and the imputation baseline of a forecasting suite
    assert (report.folder / "forecasts_tourism_quarterly.png").is_file()
    assert "## Forecasting (M4's OWA)" in report.markdown


def test_a_suite_naming_a_missing_framework_environment_is_refused(data_home) -> None:  # noqa: ANN001
    suite = {**SUITE, "frameworks": ["naive2", "autogluon_ts@1.6.3"], "folds": 1}
    home = add_suites(data_home("tourism_quarterly"), {"forecast_ag": suite})
    done = run_cli(home, "run", "forecast_ag", timeout=300)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "automl-eval frameworks install autogluon_ts@1.6.3" in done.stdout + done.stderr
    assert executions(home, "forecast_ag") == []  # refused before any job ran
