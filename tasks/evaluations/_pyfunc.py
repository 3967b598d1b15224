"""The job's model as an MLflow pyfunc model: one wrapper for every framework, loading the job's saved
model through the adapter that saved it.

AutoGluon, H2O and FLAML have no ready MLflow flavor; rather than one flavor per framework, the
job's ``model/`` folder (with ``task.json`` and ``framework.json``) is the model's artifact and
the adapter that wrote it loads it again. ``predict`` returns what the job recorded in
predictions.csv: the ``prediction`` column, then one ``proba_<class>`` column per class.

The model is self-contained: the harness's package goes into it as ``code_paths`` (MLflow puts
it first on ``sys.path`` when it loads the model) and its pip requirements are pinned, so
``mlflow models serve -m runs:/ID/model --env-manager local`` works from any directory where the
frameworks are installed. ``save_pyfunc`` writes the model to a folder: what the serving
evaluation serves, before the job is logged. tasks/tracking/pyfunc.py logs the same wrapper with
the job's run.

The one module below tracking that imports MLflow (see the MLflow door in .importlinter): the
serving evaluation serves the model as MLflow serves it, and tracking sits a layer above the
evaluations. Private (underscore): the evaluation registry does not import it, so planning and
the other evaluations never load MLflow.
"""

from __future__ import annotations

import logging
from importlib import metadata
from pathlib import Path
from typing import Any

import mlflow.pyfunc
import pandas as pd

from tasks.frameworks.environments import MODEL_REQUIREMENTS_FILE
from tasks.frameworks.registry import get_adapter, load_saved_model
from tasks.predictions import PREDICTION as PREDICTION_COLUMN  # the columns of predictions.csv
from tasks.predictions import PROBA_PREFIX

HARNESS_PACKAGE = Path(__file__).resolve().parent.parent  # tasks/, copied into the model
# What the wrapper itself imports besides the framework (tasks.specs: pydantic and yaml).
HARNESS_REQUIREMENTS = ("mlflow", "pandas", "numpy", "scikit-learn", "pydantic", "PyYAML")


def predictions_frame(model: Any, task: Any, X: pd.DataFrame) -> pd.DataFrame:
    """The job's prediction table for X: labels or values, then class probabilities."""
    frame = pd.DataFrame({PREDICTION_COLUMN: pd.Series(model.predict(X)).to_numpy()}, index=X.index)
    if task.is_classification:
        proba = model.predict_proba(X)
        for label in proba.columns:
            frame[f"{PROBA_PREFIX}{label}"] = proba[label].to_numpy(dtype=float)
    return frame


class AdapterPyfunc(mlflow.pyfunc.PythonModel):
    """Loads `artifacts["model_dir"]` with the adapter that saved it."""

    # Every framework's columns pass through this one wrapper, so it has no single input type to
    # declare; this tells MLflow not to wrap predict with type-hint validation (and not to warn).
    _skip_type_hint_validation = True

    def load_context(self, context: Any) -> None:
        # model/ names its adapter (framework.json) and its TaskInfo (task.json).
        self._model, self._task = load_saved_model(Path(context.artifacts["model_dir"]))

    # Untyped on purpose: MLflow would try to infer a signature from the hints, and warn.
    def predict(self, context, model_input, params=None):  # noqa: ANN001, ANN201
        if not isinstance(model_input, pd.DataFrame):
            model_input = pd.DataFrame(model_input)
        return predictions_frame(self._model, self._task, typed_by_roles(model_input, self._task))


def typed_by_roles(frame: pd.DataFrame, task: Any) -> pd.DataFrame:
    """Columns typed by their card roles, as the harness loads them (tasks/data/load.py).

    JSON rows lose their types: a missing number arrives as null in an object column, which a
    framework would take for text. Numeric columns become numbers again, categorical ones
    categories (the adapters map them onto the levels seen at fit time).
    """
    frame = frame.copy()
    for column, role in task.column_roles.items():
        if column not in frame.columns:
            continue
        if role == "numeric" and not pd.api.types.is_numeric_dtype(frame[column]):
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
        elif role == "categorical" and not isinstance(frame[column].dtype, pd.CategoricalDtype):
            frame[column] = frame[column].astype(object).astype("category")
    return frame


def model_code_paths() -> list[str]:
    """The harness's package, so the adapter that saved the model loads it anywhere."""
    return [str(HARNESS_PACKAGE)]


def save_pyfunc(model_dir: Path, destination: Path, framework: str, framework_version: str) -> Path:
    """Write the job's pyfunc model to `destination`: the same wrapper, artifacts, code and pinned
    requirements as the model tracking logs with the job (tasks/tracking/job_run.py)."""
    # Its advice (models-from-code, signatures) is for hand-written models, not for this wrapper.
    logging.getLogger("mlflow.pyfunc").setLevel(logging.ERROR)
    mlflow.pyfunc.save_model(
        path=str(destination),
        python_model=AdapterPyfunc(),
        artifacts={"model_dir": str(model_dir)},
        code_paths=model_code_paths(),
        pip_requirements=requirements(framework, framework_version),
    )
    return destination


def requirements(framework: str, framework_version: str, model_dir: Path | None = None) -> list[str]:
    """What a serving environment needs; given explicitly because inferring it costs seconds.

    A model made in a framework environment of its own carries that environment's pip freeze
    (tasks/frameworks/environments.py): its requirements are that freeze plus MLflow, so the
    model is served in a copy of the environment that made it, not in the main one's.
    """
    frozen = model_dir / MODEL_REQUIREMENTS_FILE if model_dir is not None else None
    if frozen is not None and frozen.is_file():
        lines = [line.strip() for line in frozen.read_text().splitlines()]
        pins = [line for line in lines if line and not line.startswith(("#", "-"))]
        if not any(line.lower().startswith("mlflow") for line in pins):
            pins.append(f"mlflow=={metadata.version('mlflow')}")
        return pins
    pins = []
    try:
        adapter = get_adapter(framework)
        # What the adapter says its saved models may load besides its own package.
        package, libraries = adapter.package, adapter.serving_packages
    except Exception:  # an unknown adapter still gets a loadable model, just without its pins
        package, libraries = "", ()
    if package and framework_version and framework_version != "unknown":
        pins.append(f"{package}=={framework_version}")
    for dependency in (*HARNESS_REQUIREMENTS, *libraries):
        if dependency == package:
            continue  # pinned above; MLflow rejects two pins of one package
        try:
            pins.append(f"{dependency}=={metadata.version(dependency)}")
        except metadata.PackageNotFoundError:
            continue
    return pins
