"""An AMLB benchmark in AMLB's format, end to end through the command: import, build, run, report.

One task is OpenML's iris task (59) served on 127.0.0.1 in OpenML's formats (the real `openml` client
fetches it), one a local train/test pair. The suite runs the constant predictor and RandomForest on
fold 0 (the local pair has that one); the report, given rows of a real AMLB run as the published
reference (tests/fixtures/amlb_results_sample.csv, whose task names are AMLB's, not this project's),
matches iris by AMLB's `id` (openml.org/t/59) and sets this run's RandomForest beside AMLB's.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from openml_support.server import OpenMLFiles, OpenMLServer, TaskFiles

pytestmark = [pytest.mark.integration, pytest.mark.heavy]  # over a minute each: make test-heavy (CI)
ROOT = Path(__file__).resolve().parents[2]
AMLB_SAMPLE = ROOT / "tests" / "fixtures" / "amlb_results_sample.csv"

BENCHMARK = """---
- name: __defaults__
  folds: 1
  max_runtime_seconds: 20
  cores: 1

- name: iris
  openml_task_id: 59

- name: penguins
  dataset:
    train: data/penguins_train.csv
    test: data/penguins_test.csv
    target: species
"""
CONSTRAINTS = "---\n\ntest:\n  folds: 1\n  max_runtime_seconds: 20\n  cores: 1\n  max_mem_size_mb: 2048\n"


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    # The scratch project's embedded store (home/mlflow/mlflow.db, artifacts beside it): a
    # MLFLOW_TRACKING_URI of our own would leave the artifact root to MLflow, which puts it in
    # ./mlruns of the working directory, the real project's.
    env = {name: value for name, value in os.environ.items() if name != "MLFLOW_TRACKING_URI"}
    env |= {"AUTOML_EVAL_HOME": str(home), "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "flows.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"{args}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
    return done


def test_an_amlb_benchmark_imports_builds_runs_and_is_set_beside_published_amlb_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from palmerpenguins import load_penguins
    from sklearn.datasets import load_iris

    home = tmp_path / "project"
    (home / "specs" / "datasets").mkdir(parents=True)
    (home / "datasets").mkdir()
    for name in ("params.yaml", ".dvcignore"):
        shutil.copy(ROOT / name, home / name)
    shutil.copy(ROOT / "specs" / "budgets.yaml", home / "specs" / "budgets.yaml")
    (home / "pyproject.toml").touch()
    penguins = load_penguins().dropna()  # every column: no two rows alike across train and test
    (home / "amlb" / "data").mkdir(parents=True)
    penguins.iloc[::2].to_csv(home / "amlb" / "data" / "penguins_train.csv", index=False)
    penguins.iloc[1::2].to_csv(home / "amlb" / "data" / "penguins_test.csv", index=False)
    (home / "amlb" / "mini.yaml").write_text(BENCHMARK)
    (home / "amlb" / "constraints.yaml").write_text(CONSTRAINTS)

    # Iris as OpenML's dataset 61 holds it (its column names and labels), under task 59's 10 folds;
    # its few identical rows are left out, as the data gate refuses a split that tests a copy of a
    # training row (tests/unit/test_openml_tasks.py covers that refusal).
    iris = load_iris(as_frame=True)
    frame = iris.data.rename(columns=lambda name: name.replace(" (cm)", "").replace(" ", ""))
    frame["class"] = iris.target.map({i: f"Iris-{name}" for i, name in enumerate(iris.target_names)})
    frame = frame.drop_duplicates(ignore_index=True)
    files = OpenMLFiles(tmp_path / "openml")
    server = OpenMLServer(files.root)
    try:
        files.add_task(
            TaskFiles(59, 61, "iris", frame, "class", "Supervised Classification", folds=10),
            server.base_url,
        )
        monkeypatch.setenv("AUTOML_EVAL_OPENML_SERVER", server.url)
        _cli(
            home,
            "suites",
            "import-amlb",
            str(home / "amlb" / "mini.yaml"),
            "--constraint",
            str(home / "amlb" / "constraints.yaml"),
            "--frameworks",
            "constantpredictor,RandomForest",
        )
        _cli(home, "datasets", "build", "--no-dvc")
    finally:
        server.stop()
    # From here on OpenML is gone: the run reads the built data only.
    _cli(home, "run", "mini")
    reports = sorted((home / "reports").glob("mini-*"))
    results = pd.read_csv(reports[-1] / "results.csv")
    assert set(results["task"]) == {"openml_59", "amlb_mini_penguins"} and results["result"].notna().all()
    _cli(home, "report", "mini", "--reference", str(AMLB_SAMPLE), "--out", str(home / "reports" / "against"))
    every = pd.read_csv(home / "reports" / "against" / "reference.csv")
    assert len(every) == len(results)  # every row of this run, the unpublished ones marked
    assert set(every.loc[every["reference"] != "published", "reference"]) == {"not published"}
    rows = every[every["reference"] == "published"]
    # AMLB published iris (openml.org/t/59) for RandomForest only: one row, fold 0 of rf, matched by
    # the id although AMLB calls the task `iris` and this project `openml_59`.
    assert list(zip(rows["task"], rows["framework"], rows["fold"], rows["metric"], strict=True)) == [
        ("openml_59", "rf", 0, "neg_logloss")
    ]
    with AMLB_SAMPLE.open(newline="") as handle:
        published = {
            int(row["fold"]): float(row["result"])
            for row in csv.DictReader(handle)
            if (row["id"], row["framework"]) == ("openml.org/t/59", "RandomForest")
        }
    ours = results.loc[(results["task"] == "openml_59") & (results["framework"] == "rf"), "result"].item()
    assert rows["reference_result"].item() == pytest.approx(published[0])
    assert rows["difference"].item() == pytest.approx(ours - published[0]) and rows["difference"].item() != 0
    spread = pd.Series([published[0], published[1]]).std()  # over the published folds, as AMLB ran them
    assert rows["z"].item() == pytest.approx((ours - published[0]) / spread)
    markdown = (home / "reports" / "against" / "report.md").read_text()
    # named as unpublished
    assert "amlb_mini_penguins x rf" in markdown and "openml_59 x constant" in markdown
    tabarena = pd.read_csv(home / "reports" / "against" / "tabarena.csv")
    assert set(tabarena.loc[tabarena["dataset"] == "openml_59", "tid"]) == {59}
