"""Where things live. Every path the project reads or writes is derived here.

The project root is the folder holding ``specs/``; ``AUTOML_EVAL_HOME`` overrides it (tests use
this to work on a copy, workers use it to find a shared checkout).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from tasks.errors import UserError


class KeyedJob(Protocol):
    """What a job folder is named by (tasks/plan.py's Job); paths sit below the plan."""

    @property
    def suite(self) -> str: ...

    @property
    def key(self) -> str: ...


_PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def project_root() -> Path:
    override = os.environ.get("AUTOML_EVAL_HOME")
    if override:
        return Path(override).resolve()
    cwd = Path.cwd().resolve()
    for candidate in (cwd, *cwd.parents):
        if (candidate / "specs").is_dir() and (candidate / "pyproject.toml").is_file():
            return candidate
    return _PACKAGE_ROOT


def specs_dir() -> Path:
    return project_root() / "specs"


def dataset_cards_dir() -> Path:
    return specs_dir() / "datasets"


def suites_dir() -> Path:
    return specs_dir() / "suites"


def budgets_file() -> Path:
    return specs_dir() / "budgets.yaml"


def datasets_dir() -> Path:
    """The data itself (git-ignored, pinned by datasets.dvc)."""
    return project_root() / "datasets"


def runs_dir() -> Path:
    """One folder per job: the child writes predictions, model and result.json here first."""
    return Path(os.environ.get("AUTOML_EVAL_RUNS_DIR", project_root() / "runs"))


def venvs_dir() -> Path:
    """Framework environments, one folder each (.venvs/NAME-VERSION). AUTOML_EVAL_VENVS_DIR puts
    them elsewhere: shared by several checkouts of the project, or by a test session."""
    override = os.environ.get("AUTOML_EVAL_VENVS_DIR")
    return Path(override).resolve() if override else project_root() / ".venvs"


def reports_dir() -> Path:
    return project_root() / "reports"


def mlflow_dir() -> Path:
    """Embedded MLflow store: sqlite DB and artifacts. Never a Python package."""
    return project_root() / "mlflow"


def inside_project(path: Path, field: str) -> Path:
    """`path` (relative to the working folder, or absolute) if it lies inside the project root.

    A folder a user names (`report --out`) must not lead the program to write elsewhere.
    """

    root = project_root()
    resolved = Path(path).resolve()
    if not resolved.is_relative_to(root):
        raise UserError(
            f"{field}: {path} is outside the project ({root}); give a folder inside it, such as reports/NAME."
        )
    return resolved


def job_dir_for(job: KeyedJob) -> Path:
    """One folder per job key: a re-run of the same job replaces what an earlier attempt left."""
    return runs_dir() / job.suite / job.key
