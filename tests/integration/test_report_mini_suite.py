"""report on a store filled by a real mini suite: `automl-eval run` with two cheap frameworks, then report."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SUITE_NAME = "report_mini"
SUITE_YAML = "datasets: [breast_cancer]\nframeworks: [constant, hgb]\nfolds: 1\nbudget: test\n"


def test_report_on_a_real_mini_suite(data_home, tmp_path: Path) -> None:  # noqa: ANN001 - conftest fixture
    home = data_home("breast_cancer")
    shutil.copy(ROOT / "specs" / "budgets.yaml", home / "specs" / "budgets.yaml")
    (home / "specs" / "suites").mkdir(exist_ok=True)
    name = SUITE_NAME
    (home / "specs" / "suites" / f"{name}.yaml").write_text(SUITE_YAML)
    uri = f"sqlite:///{home / 'mlflow' / 'mlflow.db'}"
    env = {**os.environ, "AUTOML_EVAL_HOME": str(home), "MLFLOW_TRACKING_URI": uri}
    done = subprocess.run(
        [sys.executable, "-c", "from flows.cli import main; main()", "run", name],
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

    from tasks.report.build import report_execution
    from tasks.report.compare_store import resolve_execution
    from tasks.tracking import read

    execution_id = resolve_execution(f"{name}@latest", uri=uri)
    report = report_execution(execution_id, folder=tmp_path / "report", uri=uri, bootstrap_rounds=20)
    board = report.leaderboard.set_index("framework")
    assert set(board.index) == {"constant", "hgb"}
    assert board.loc["constant", "result_mean"] == pytest.approx(0.5)  # AUC of a constant predictor
    assert board.loc["hgb", "result_mean"] > 0.9
    assert report.elo is not None and report.anchor == "constant"
    results = pd.read_csv(report.folder / "results.csv")
    assert len(results) == 2 and set(results["metric"]) == {"auc"} and results["result"].notna().all()
    logged = {f.path for f in read.client(uri).list_artifacts(execution_id, "report")}
    assert "report/report.md" in logged and "report/elo.png" in logged
