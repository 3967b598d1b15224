"""The job's model as an MLflow pyfunc model: one wrapper for every framework, loading the job's saved
model through the adapter that saved it.

AutoGluon, H2O and FLAML have no ready MLflow flavor; rather than one flavor per framework, the
job's ``model/`` folder (with ``task.json`` and ``framework.json``) is the model's artifact and
the adapter that wrote it loads it again. ``predict`` returns what the job recorded in
predictions.csv: the ``prediction`` column, then one ``proba_<class>`` column per class.

The model is self-contained: the harness's package goes into it as one zip archive in
``code_paths``, which the model's code (tasks/evaluations/_pyfunc_model_code.py, "models from
code") puts first on ``sys.path`` when MLflow loads the model, and its pip requirements are pinned,
so ``mlflow models serve -m runs:/ID/model --env-manager local`` works from any directory where the
frameworks are installed. One archive, not the package's folder: each file of a model is one
upload through the MLflow server's artifact proxy, and the package has some 170 files.
``save_pyfunc`` writes the model to a folder, the one place that does: what the serving evaluation
serves, before the job is logged, and what tasks/tracking/job_run.py uploads as the job's run's model.

The one module below tracking that imports MLflow (see the MLflow door in .importlinter): the
serving evaluation serves the model as MLflow serves it, and tracking sits a layer above the
evaluations. Private (underscore): the evaluation registry does not import it, so planning and
the other evaluations never load MLflow.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import functools
import logging
import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

import mlflow.pyfunc
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.models import Model, ModelSignature, infer_signature
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE
from mlflow.pyfunc.model import PythonModel
from mlflow.types import ColSpec, DataType, Schema
from mlflow.types.schema import AnyType

from tasks.errors import UserError
from tasks.frameworks.environments import MODEL_REQUIREMENTS_FILE
from tasks.frameworks.registry import get_adapter, load_saved_model
from tasks.predictions import PREDICTION as PREDICTION_COLUMN  # the columns of predictions.csv
from tasks.predictions import PROBA_PREFIX, is_proba_column
from tasks.specs import load_dataset_spec

HARNESS_PACKAGE = Path(__file__).resolve().parent.parent  # tasks/, archived into the model
# The file MLflow runs to load the model; it names the archive it puts on sys.path.
MODEL_CODE = Path(__file__).resolve().parent / "_pyfunc_model_code.py"
HARNESS_ARCHIVE = "automl_eval_harness.zip"
MODEL_ARCHIVE = "model.zip"  # the job's model/ folder inside a logged model
# What the wrapper itself imports besides the framework (tasks.specs: pydantic and yaml).
HARNESS_REQUIREMENTS = ("mlflow", "pandas", "numpy", "scikit-learn", "pydantic", "PyYAML")
EXAMPLE_ROWS = 5
IMAGE_ROLE = "image"  # a column of encoded images (tasks.images.card.IMAGE_ROLE)
NOT_NULL_EXPECTATIONS = ("ExpectColumnValuesToNotBeNull", "expect_column_values_to_not_be_null")

logger = logging.getLogger("automl_eval.tracking")


def predictions_frame(model: Any, task: Any, X: pd.DataFrame) -> pd.DataFrame:
    """The job's prediction table for X: labels or values, then class probabilities."""
    if not task.is_classification:
        return pd.DataFrame({PREDICTION_COLUMN: pd.Series(model.predict(X)).to_numpy()}, index=X.index)
    labels, proba = model.predict_with_proba(X)  # one model call where the model offers it
    columns = {PREDICTION_COLUMN: pd.Series(labels).to_numpy()}
    columns |= {f"{PROBA_PREFIX}{label}": proba[label].to_numpy(dtype=float) for label in proba.columns}
    return pd.DataFrame(columns, index=X.index)


class AdapterPyfunc(PythonModel):
    """Loads `artifacts["model_dir"]` with the adapter that saved it."""

    # Every framework's columns pass through this one wrapper, so it has no single input type to
    # declare; this tells MLflow not to wrap predict with type-hint validation (and not to warn).
    _skip_type_hint_validation = True

    def load_context(self, context: Any) -> None:
        # model/ names its adapter (framework.json) and its TaskInfo (task.json); a logged model
        # holds it as one archive (archive_model_dir).
        self._model, self._task = load_saved_model(model_folder(Path(context.artifacts["model_dir"])))

    # Untyped on purpose: MLflow would try to infer a signature from the hints, and warn.
    def predict(self, context, model_input, params=None):  # noqa: ANN001, ANN201
        if not isinstance(model_input, pd.DataFrame):
            model_input = pd.DataFrame(model_input)
        return predictions_frame(self._model, self._task, typed_by_roles(model_input, self._task))


def typed_by_roles(frame: pd.DataFrame, task: Any) -> pd.DataFrame:
    """Columns typed by their card roles, as the harness loads them (tasks/data/load.py).

    JSON rows lose their types: a missing number arrives as null in an object column, which a
    framework would take for text. Numeric columns become numbers again, categorical ones
    categories (the adapters map them onto the levels seen at fit time). A value in a numeric
    column that is not a number is refused with the column's name: the signature leaves integer
    columns that may be missing to this check (see "the signature" below).
    """
    frame = frame.copy()
    for column, role in task.column_roles.items():
        if column not in frame.columns:
            continue
        if role == IMAGE_ROLE:
            # A model served with its signature gets bytes (MLflow decodes the base64 of a binary
            # column); one served without gets the base64 text a JSON body carries.
            frame[column] = frame[column].map(_image_bytes)
        elif role == "numeric" and not pd.api.types.is_numeric_dtype(frame[column]):
            frame[column] = _as_numbers(frame[column])
        elif role == "categorical" and not isinstance(frame[column].dtype, pd.CategoricalDtype):
            frame[column] = frame[column].astype(object).astype("category")
    return frame


def _as_numbers(values: pd.Series) -> pd.Series:
    """A numeric column's values as numbers; missing ones stay missing, anything else is refused."""
    numbers = pd.to_numeric(values, errors="coerce")
    refused = values[numbers.isna() & values.notna()]
    if not refused.empty:
        # MLflow's own exception and code: a served model answers 400 naming the column, as it does
        # for a schema error, and a caller in process gets what MLflow's enforcement would raise.
        raise MlflowException(
            f"column {values.name!r} takes numbers, but got {refused.iloc[0]!r} "
            f"({len(refused)} such value{'s' if len(refused) > 1 else ''}): send a number, or null "
            "for a missing value",
            error_code=INVALID_PARAMETER_VALUE,
        )
    return numbers


def _image_bytes(value: Any) -> Any:
    """An image as its encoded bytes: bytes stay, base64 text is decoded, anything else is left for
    the model to refuse."""
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=False)
        except (binascii.Error, ValueError):
            return value
    return bytes(value) if isinstance(value, (bytearray, memoryview)) else value


def model_code_paths() -> list[str]:
    """The harness's package as one zip archive, so the adapter that saved the model loads it
    anywhere (tasks/evaluations/_pyfunc_model_code.py imports from it)."""
    return [str(_harness_archive(os.getpid()))]


@functools.cache
def _harness_archive(pid: int) -> Path:
    """The package's files (no bytecode), written once per process: a forked job process makes its
    own, so it never depends on a folder its parent removes at exit."""
    folder = Path(tempfile.mkdtemp(prefix="automl-eval-harness-"))
    atexit.register(_remove_if_mine, folder, pid)
    archive = folder / HARNESS_ARCHIVE
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        for path in sorted(HARNESS_PACKAGE.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                bundle.write(path, path.relative_to(HARNESS_PACKAGE.parent).as_posix())
    return archive


def archive_model_dir(model_dir: Path, destination: Path) -> Path:
    """The job's model/ folder as one zip archive at `destination`: a logged model's files each cost
    an upload through the MLflow server's artifact proxy, and a framework's model folder holds from
    three files (the constant model) to hundreds (AutoGluon). Lightly compressed: the fitted models
    are mostly binary, and the worker, not the control plane, pays for the compression."""
    with zipfile.ZipFile(destination, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as bundle:
        for path in sorted(model_dir.rglob("*")):
            if path.is_file():
                bundle.write(path, path.relative_to(model_dir).as_posix())
    return destination


def model_folder(path: Path) -> Path:
    """The model/ folder a pyfunc model's artifact holds: the folder itself (a model saved beside its
    job), or an archive (a logged model) unpacked once per process into a folder removed at exit."""
    if path.is_dir():
        return path
    return _unpacked(path.resolve(), os.getpid())


@functools.cache
def _unpacked(archive: Path, pid: int) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="automl-eval-model-"))
    atexit.register(_remove_if_mine, folder, pid)
    with zipfile.ZipFile(archive) as bundle:
        for member in bundle.namelist():
            # Written by archive_model_dir, but read wherever the model travelled: nothing may land
            # outside the folder.
            if not (folder / member).resolve().is_relative_to(folder.resolve()):
                raise UserError(f"model archive {archive}: member '{member}' would be written outside "
                                "its folder; log the model again from its job folder.")
        bundle.extractall(folder)
    return folder


def _remove_if_mine(folder: Path, pid: int) -> None:
    if os.getpid() == pid:  # a forked child exiting normally must not remove its parent's archive
        shutil.rmtree(folder, ignore_errors=True)


def save_pyfunc(model_dir: Path, destination: Path, framework: str, framework_version: str, *,
                signature: ModelSignature | None = None, input_example: pd.DataFrame | None = None,
                mlflow_model: Model | None = None, archived: bool = False) -> Path:
    """Write the job's pyfunc model to `destination`: the one place its folder is made, for the serving
    evaluation (model/ as it is, before the job is logged) and for tracking (tasks/tracking/job_run.py,
    which uploads the folder as the run's logged model). The wrapper, its code, the requirements
    pinned for `model_dir` (a framework environment's own, if it made the model), the signature and
    input example; `mlflow_model` is the MLmodel to fill (a logged model's ids and location), and
    `archived` puts model/ in as one archive (archive_model_dir: one upload instead of one per file).

    Models from code: the wrapper imports the harness's archive, so the model is served from any
    directory; no model is loaded here (an H2O model would start a JVM)."""
    # Its advice (signatures, type hints) is for hand-written models, not for this wrapper.
    logging.getLogger("mlflow.pyfunc").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="automl-eval-pyfunc-") as scratch:
        artifact = archive_model_dir(model_dir, Path(scratch) / MODEL_ARCHIVE) if archived else model_dir
        mlflow.pyfunc.save_model(
            path=str(destination),
            mlflow_model=mlflow_model,
            python_model=str(MODEL_CODE),
            artifacts={"model_dir": str(artifact)},  # copied into the model's folder
            code_paths=model_code_paths(),
            # Given, not inferred: inference loads the model in a subprocess, seconds per job.
            pip_requirements=requirements(framework, framework_version, model_dir),
            signature=signature,
            input_example=input_example,
        )
    return destination


# ---------------------------------------------------------------- the signature
# An integer feature column that may be missing has no MLflow type that takes both of the ways a
# client sends it: declared `long`, a JSON request whose value is null is refused ("Failed to enforce
# schema": null becomes NaN, a float); declared `double`, the dataset's own rows are refused in process
# ("Can not safely convert int64 to float64": MLflow casts only integers of up to 6 bytes to double).
# So such a column is declared `Any`, and the wrapper checks it instead (typed_by_roles): whole
# numbers, floats and missing values pass, text that is not a number is refused, naming the column.
# A column the card rules never missing (ExpectColumnValuesToNotBeNull) stays `long`. A numeric
# prediction is a `double`. Encoded images (bytes) are inferred `binary`: base64 text in JSON.


def never_missing(dataset: str) -> frozenset[str]:
    """Columns the dataset's card says are never missing; none when the card cannot be read."""
    try:
        spec = load_dataset_spec(dataset)
    except (UserError, OSError):
        return frozenset()  # no card to go by: every integer column may then be missing
    return frozenset(
        str(expectation.kwargs["column"])
        for expectation in spec.expectations
        if expectation.expectation in NOT_NULL_EXPECTATIONS and "column" in expectation.kwargs
    )


def with_room_for_missing(frame: pd.DataFrame, complete: Iterable[str] = ()) -> pd.DataFrame:
    """The frame with its integer columns as float64, except the `complete` ones (never missing)."""
    kept = set(complete)
    integers = [c for c in frame.columns if pd.api.types.is_integer_dtype(frame[c]) and c not in kept]
    return frame.astype(dict.fromkeys(integers, "float64")) if integers else frame


def signature_for(
    example: pd.DataFrame, output: pd.DataFrame | None = None, complete: Iterable[str] = ()
) -> tuple[ModelSignature, pd.DataFrame]:
    """The signature for the model's input example and predictions, and the example as declared."""
    kept = set(complete)
    integers = {c for c in example.columns if pd.api.types.is_integer_dtype(example[c])}
    example = with_room_for_missing(example, kept)
    output = with_room_for_missing(output) if output is not None else None
    # Inferred with every integer as a double (MLflow warns about any integer column it infers, though
    # the card has settled the question), then each integer column declared again: `long` where the
    # card says it is never missing, `Any` where a value may be missing (see above).
    signature = infer_signature(with_room_for_missing(example), output)
    if integers:
        signature.inputs = Schema([
            ColSpec(DataType.long if spec.name in kept else AnyType(), spec.name, spec.required)
            if spec.name in integers else spec
            for spec in signature.inputs.inputs
        ])
    return signature, example


def signature_and_example(
    example_file: Path, predictions_file: Path, complete: Iterable[str] = ()
) -> tuple[Any, pd.DataFrame | None]:
    """The model's signature and input example, from the first test rows the worker saved and the
    predictions it made for them; (None, None) for a folder without them (older job folders).
    Integer columns are declared double, room for a missing value, unless `complete` names them."""
    if not example_file.is_file():
        return None, None
    try:
        example = pd.read_parquet(example_file).head(EXAMPLE_ROWS)
        # What a client sends is JSON: a category column arrives as strings, and is declared so.
        for column in example.select_dtypes("category").columns:
            example[column] = example[column].astype(object).where(example[column].notna(), None)
        output = None
        if predictions_file.is_file():
            # Read as text: a class label "0" or "01" is a string the model returns, not a number.
            predictions = pd.read_csv(predictions_file, nrows=EXAMPLE_ROWS, dtype={PREDICTION_COLUMN: str})
            columns = [c for c in predictions.columns if c == PREDICTION_COLUMN or is_proba_column(c)]
            output = predictions[columns].copy()
            if not any(is_proba_column(c) for c in columns):  # regression, forecasting: values
                output[PREDICTION_COLUMN] = pd.to_numeric(output[PREDICTION_COLUMN])
        return signature_for(example, output, complete)
    except Exception as exc:  # noqa: BLE001 - a model without a schema beats no model
        logger.warning("model logged without a signature (%s: %s)", type(exc).__name__, exc)
        return None, None


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
