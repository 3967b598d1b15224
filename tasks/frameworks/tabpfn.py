"""TabPFN v2: a transformer pre-trained on synthetic tables that predicts a new table in one forward
pass, its training rows given as context (no search, no gradient steps on the user's data).

Its weights come from a model hub, which nothing in this project fetches. A user who has the
checkpoint places it in a folder and names that folder with AUTOML_EVAL_TABPFN_WEIGHTS, beside a
`SHA256SUMS` file (sha256sum's format) that declares the hash its provider publishes for it. The
adapter reads only that file (TabPFN's `model_path`; the hub's own variables are set offline so a
slip cannot download), and only once its sha256 matches the declared one. Without the file, or with
another file, the job is refused in one sentence naming the file and the variable.

A fitted TabPFN is its context: the saved model is the training rows it was given (Parquet) and its
settings, and loading it fits it again on them, after checking the weights again; predictions are
the same. It runs in an environment of its own (`tabpfn@2.2.1`: torch at the CPU wheel on disk).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks._sampling import Sampled, sample_rows
from tasks.frameworks._tabular import FeatureSchema, code_matrix, labels_from_proba, proba_frame
from tasks.frameworks.base import FittedModel, FrameworkAdapter, JobFailure, TaskInfo, split_params
from tasks.frameworks.environments import EnvironmentSpec
from tasks.specs import Budget, DatasetSpec

WEIGHTS_ENV = "AUTOML_EVAL_TABPFN_WEIGHTS"  # the folder holding the checkpoints and SHA256SUMS
HASHES_FILE = "SHA256SUMS"
# The checkpoint file names TabPFN v2's provider publishes, by what they predict.
CLASSIFIER_WEIGHTS = "tabpfn-v2-classifier.ckpt"
REGRESSOR_WEIGHTS = "tabpfn-v2-regressor.ckpt"
CONTEXT_FILE = "context.parquet"  # the training rows the model predicts from
STATE_FILE = "tabpfn.json"
# TabPFN v2 was pre-trained on tables of up to 10,000 rows, 500 features and 10 classes; more rows
# are a seeded sample (its context), more classes or features are refused.
MAX_CONTEXT_ROWS = 10_000
MAX_FEATURES = 500
MAX_CLASSES = 10
# The hub clients TabPFN may call, told to stay offline whatever happens, and its usage telemetry (on
# by default outside CI, it fetches its settings from its provider's server) off.
OFFLINE_VARIABLES = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TABPFN_DISABLE_TELEMETRY": "1"}
ENVIRONMENTS = (EnvironmentSpec("2.2.1", requirements=("tabpfn==2.2.1",), imports=("tabpfn",)),)


def weights_name(problem_type: str) -> str:
    return REGRESSOR_WEIGHTS if problem_type == "regression" else CLASSIFIER_WEIGHTS


@dataclass(frozen=True)
class Weights:
    """A checkpoint found where AUTOML_EVAL_TABPFN_WEIGHTS points, its hash checked."""

    path: Path
    sha256: str


_checked: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256, hashed once


def file_sha256(path: Path) -> str:
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _checked:
        digest = hashlib.sha256()
        with path.open("rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
        _checked[key] = digest.hexdigest()
    return _checked[key]


def declared_hashes(folder: Path) -> dict[str, str]:
    """SHA256SUMS as sha256sum writes it: `HASH  NAME` (or `HASH *NAME`) per line."""
    hashes: dict[str, str] = {}
    path = folder / HASHES_FILE
    if not path.is_file():
        return hashes
    for line in path.read_text().splitlines():
        parts = line.strip().split(maxsplit=1)
        if len(parts) == 2:
            hashes[parts[1].lstrip("*").strip()] = parts[0].lower()
    return hashes


def weights_problem(problem_type: str) -> str | None:
    """Why TabPFN cannot run `problem_type` here (one sentence naming the file and the variable), or
    None when its checkpoint is in place and matches its declared hash."""
    try:
        find_weights(problem_type)
    except JobFailure as exc:
        return str(exc)
    return None


def find_weights(problem_type: str) -> Weights:
    name = weights_name(problem_type)
    setting = os.environ.get(WEIGHTS_ENV, "").strip()
    if not setting:
        raise JobFailure(f"tabpfn needs its weights file {name}, which nothing here downloads: place it "
                         f"in a folder with a {HASHES_FILE} declaring its sha256 and name that folder with "
                         f"{WEIGHTS_ENV} (now unset).")
    folder = Path(setting).expanduser()
    path = folder / name
    if not path.is_file():
        raise JobFailure(f"tabpfn needs its weights file {path}, which is not there: place {name} in the "
                         f"folder {WEIGHTS_ENV} names ({folder}), or point {WEIGHTS_ENV} at the folder "
                         "that holds it.")
    declared = declared_hashes(folder).get(name)
    if declared is None:
        raise JobFailure(f"tabpfn's weights file {path} has no declared sha256: add the line `HASH  {name}` "
                         f"with the hash its provider publishes to {folder / HASHES_FILE} "
                         f"({WEIGHTS_ENV} names that folder).")
    found = file_sha256(path)
    if found != declared:
        raise JobFailure(f"tabpfn's weights file {path} has sha256 {found}, not the {declared} that "
                         f"{folder / HASHES_FILE} declares: replace the file ({WEIGHTS_ENV} names its "
                         "folder).")
    return Weights(path, found)


def _context_frame(X: pd.DataFrame, schema: FeatureSchema) -> np.ndarray:
    return code_matrix(schema.apply(X), schema)


class TabPFNModel(FittedModel):
    def __init__(self, estimator: Any, schema: FeatureSchema, task: TaskInfo, context: pd.DataFrame,
                 settings: dict[str, Any], sampled: Sampled | None = None) -> None:
        self.estimator = estimator
        self.schema = schema
        self.task = task
        self.context = context  # the training rows and their target, as TabPFN was given them
        self.settings = settings  # the estimator's settings (weights file excluded)
        self.sampled = sampled

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        if self.task.is_classification:
            return labels_from_proba(self.predict_proba(X))
        return np.asarray(self.estimator.predict(_context_frame(X, self.schema)), dtype=float)

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        if not self.task.is_classification:
            raise NotImplementedError("regression models have no class probabilities")
        matrix = self.estimator.predict_proba(_context_frame(X, self.schema))
        return proba_frame(matrix, list(self.estimator.classes_), self.task)

    def save(self, model_dir: Path) -> None:
        model_dir.mkdir(parents=True, exist_ok=True)
        self.context.to_parquet(model_dir / CONTEXT_FILE, index=False)
        (model_dir / STATE_FILE).write_text(json.dumps({"settings": self.settings}, indent=2))
        self.schema.save(model_dir)

    @property
    def fit_rows(self) -> int | None:
        return self.sampled.rows if self.sampled else None

    def info(self) -> dict[str, Any]:
        recorded: dict[str, Any] = {"context_rows": len(self.context), "settings": self.settings}
        if self.sampled:
            recorded["sampled"] = self.sampled.sentence()
        return recorded


class TabPFNAdapter(FrameworkAdapter):
    name = "tabpfn"
    package = "tabpfn"
    install_hint = "automl-eval frameworks install tabpfn@2.2.1 (a suite names it tabpfn@2.2.1)"
    fixed_work = True  # one forward pass per prediction; the budget's time does not change what it fits
    environments = ENVIRONMENTS
    serving_packages = ("torch",)

    def unavailable_reason(self) -> str | None:
        """Not installed, or not one of its checkpoints in place (applies_to says which a dataset needs)."""
        reason = super().unavailable_reason()
        if reason:
            return reason
        problems = [weights_problem(kind) for kind in ("binary", "regression")]
        return problems[0] if all(problems) else None

    def applies_to(self, spec: DatasetSpec) -> str | None:
        reason = super().applies_to(spec)
        if reason:
            return reason
        if len(spec.features) > MAX_FEATURES:
            return f"tabpfn takes at most {MAX_FEATURES} features (its pre-training); {spec.name} has more."
        return weights_problem(spec.problem_type)

    def start(self, budget: Budget, workdir: Path) -> None:
        os.environ.update(OFFLINE_VARIABLES)
        import tabpfn  # noqa: F401 - torch's imports belong to start-up, not to the fit

    def fit(
        self,
        X: pd.DataFrame,
        y: pd.Series,
        *,
        task: TaskInfo,
        budget: Budget,
        params: dict[str, Any],
        workdir: Path,
        seed: int,
    ) -> TabPFNModel:
        _, framework_params = split_params(params)
        if len(task.classes) > MAX_CLASSES:
            raise JobFailure(f"tabpfn takes at most {MAX_CLASSES} classes (its pre-training); this task has "
                             f"{len(task.classes)}: choose another framework for it.")
        schema = FeatureSchema.learn(X, task)
        sampled = None
        if len(X) > MAX_CONTEXT_ROWS:
            keep = sample_rows(y, MAX_CONTEXT_ROWS, seed, stratify=task.is_classification)
            sampled = Sampled(len(keep), len(X))
            X, y = X.take(keep), y.take(keep)
        context = schema.apply(X).reset_index(drop=True)
        context[task.target] = (y.astype(str) if task.is_classification else pd.to_numeric(y)).to_numpy()
        settings = {"n_jobs": budget.cores, "random_state": seed, "device": "cuda" if budget.gpus else "cpu",
                    **framework_params}
        estimator = _fitted(context, schema, task, settings)
        return TabPFNModel(estimator, schema, task, context, settings, sampled)

    def load(self, model_dir: Path, task: TaskInfo) -> TabPFNModel:
        schema = FeatureSchema.load(model_dir)
        context = pd.read_parquet(model_dir / CONTEXT_FILE)
        settings = json.loads((model_dir / STATE_FILE).read_text())["settings"]
        return TabPFNModel(_fitted(context, schema, task, settings), schema, task, context, settings)

    def test_params(self) -> dict[str, Any]:
        return {"n_estimators": 1}


def _fitted(context: pd.DataFrame, schema: FeatureSchema, task: TaskInfo, settings: dict[str, Any]) -> Any:
    """TabPFN fitted on its context, reading only the checked weights file."""
    weights = find_weights(task.problem_type)  # refused before anything of TabPFN's is imported
    os.environ.update(OFFLINE_VARIABLES)
    from tabpfn import TabPFNClassifier, TabPFNRegressor

    categorical = [index for index, column in enumerate(schema.columns) if column in schema.levels]
    estimator_class = TabPFNClassifier if task.is_classification else TabPFNRegressor
    estimator = estimator_class(model_path=str(weights.path), categorical_features_indices=categorical,
                                **settings)
    target = context[task.target]
    estimator.fit(_context_frame(context, schema), target.astype(str) if task.is_classification
                  else target.astype(float))
    return estimator


ADAPTER = TabPFNAdapter()
