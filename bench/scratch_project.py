"""A scratch project for benchmarks that run suites: copies of chosen dataset cards, their data and
saved folds, the budgets and the data parameters, so that a run writes nothing into the project."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def scratch_project(home: Path, datasets: Iterable[str]) -> None:
    from tasks.data.folds import folds_path
    from tasks.specs import load_dataset_spec

    (home / "specs" / "datasets").mkdir(parents=True)
    (home / "specs" / "suites").mkdir()
    (home / "datasets").mkdir()
    shutil.copy(ROOT / "specs" / "budgets.yaml", home / "specs")
    for name in ("params.yaml", ".dvcignore"):
        shutil.copy(ROOT / name, home / name)
    for dataset in datasets:
        spec = load_dataset_spec(dataset)  # from the project, before AUTOML_EVAL_HOME moves
        shutil.copy(ROOT / "specs" / "datasets" / f"{dataset}.yaml", home / "specs" / "datasets")
        shutil.copy(spec.path, home / "datasets")
        shutil.copy(folds_path(spec), home / "datasets")
