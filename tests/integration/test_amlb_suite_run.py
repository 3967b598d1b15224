"""An AMLB benchmark in AMLB's format, end to end through the command: import, build, run, report.

One task is an OpenML task served on 127.0.0.1 in OpenML's formats (the real `openml` client fetches
it), one a local train/test pair. The suite runs with the constant predictor on fold 0 (the local pair has
that one); the report, given its own results.csv as the published reference, finds every fold
reproduced (difference 0).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from openml_support.server import OpenMLFiles, OpenMLServer, TaskFiles

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]

BENCHMARK = """---
- name: __defaults__
  folds: 1
  max_runtime_seconds: 20
  cores: 1

- name: cancer
  openml_task_id: 9201

- name: penguins
  dataset:
    train: data/penguins_train.csv
    test: data/penguins_test.csv
    target: species
"""
CONSTRAINTS = "---\n\ntest:\n  folds: 1\n  max_runtime_seconds: 20\n  cores: 1\n  max_mem_size_mb: 2048\n"


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "AUTOML_EVAL_HOME": str(home),
        "COLUMNS": "200",
        "MLFLOW_TRACKING_URI": f"sqlite:///{home / 'mlflow' / 'mlflow.db'}",
    }
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


def test_an_amlb_benchmark_imports_builds_runs_and_reproduces_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from palmerpenguins import load_penguins
    from sklearn.datasets import load_breast_cancer

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

    cancer = load_breast_cancer(as_frame=True)
    frame = cancer.data.iloc[:150, :4].rename(columns=lambda name: name.replace(" ", "_"))
    frame["diagnosis"] = cancer.target.iloc[:150].map(dict(enumerate(cancer.target_names)))
    files = OpenMLFiles(tmp_path / "openml")
    server = OpenMLServer(files.root)
    try:
        files.add_task(
            TaskFiles(9201, 901, "cancer_mini", frame, "diagnosis", "Supervised Classification", folds=5),
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
            "constantpredictor",
        )
        _cli(home, "datasets", "build", "--no-dvc")
    finally:
        server.stop()
    # From here on OpenML is gone: the run reads the built data only.
    _cli(home, "run", "mini")
    reports = sorted((home / "reports").glob("mini-*"))
    results = reports[-1] / "results.csv"
    assert set(pd.read_csv(results)["task"]) == {"openml_9201", "amlb_mini_penguins"}
    reference = home / "amlb-results.csv"
    shutil.copy(results, reference)
    _cli(home, "report", "mini", "--reference", str(reference), "--out", str(home / "reports" / "against"))
    rows = pd.read_csv(home / "reports" / "against" / "reference.csv")
    assert len(rows) == 2  # 2 tasks x fold 0 of the constant predictor
    assert set(rows["task"]) == {"openml_9201", "amlb_mini_penguins"} and (rows["difference"] == 0).all()
    tabarena = pd.read_csv(home / "reports" / "against" / "tabarena.csv")
    assert set(tabarena.loc[tabarena["dataset"] == "openml_9201", "tid"]) == {9201}
