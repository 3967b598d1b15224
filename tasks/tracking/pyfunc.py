"""One MLflow pyfunc wrapper for every framework: it loads the job's saved model through the adapter.

AutoGluon, H2O and FLAML have no ready MLflow flavor; rather than one flavor per framework, the
job's ``model/`` folder (with ``task.json`` and ``framework.json``) is logged as an artifact and
the adapter that wrote it loads it again. ``predict`` returns what the job recorded in
predictions.csv: the ``prediction`` column, then one ``proba_<class>`` column per class.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow.pyfunc
import pandas as pd

PREDICTION_COLUMN = "prediction"  # the column names of predictions.csv (tasks/worker.py)
PROBA_PREFIX = "proba_"


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
        from tasks.frameworks.registry import load_saved_model

        # model/ names its adapter (framework.json) and its TaskInfo (task.json).
        self._model, self._task = load_saved_model(Path(context.artifacts["model_dir"]))

    # Untyped on purpose: MLflow would try to infer a signature from the hints, and warn.
    def predict(self, context, model_input, params=None):  # noqa: ANN001, ANN201
        if not isinstance(model_input, pd.DataFrame):
            model_input = pd.DataFrame(model_input)
        return predictions_frame(self._model, self._task, model_input)


def requirements(framework: str, framework_version: str) -> list[str]:
    """What a serving environment needs; given explicitly because inferring it costs seconds."""
    from importlib import metadata

    pins = []
    try:
        from tasks.frameworks.registry import get_adapter

        package = get_adapter(framework).package
    except Exception:  # an unknown adapter still gets a loadable model, just without its pin
        package = ""
    if package and framework_version and framework_version != "unknown":
        pins.append(f"{package}=={framework_version}")
    for dependency in ("mlflow", "pandas", "scikit-learn"):
        if dependency == package:
            continue  # pinned above; MLflow rejects two pins of one package
        try:
            pins.append(f"{dependency}=={metadata.version(dependency)}")
        except metadata.PackageNotFoundError:
            continue
    return pins
