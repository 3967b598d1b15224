"""The job's pyfunc model in MLflow: its signature and input example, from the job's own rows.

The wrapper itself, its requirements and ``save_pyfunc`` live in tasks/evaluations/_pyfunc.py (the
serving evaluation, a layer below tracking, serves the same model before the job is logged).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

# Models logged before the wrapper moved to tasks/evaluations/_pyfunc.py were pickled as
# tasks.tracking.pyfunc.AdapterPyfunc: the name stays importable here so they still load.
from tasks.evaluations._pyfunc import AdapterPyfunc as AdapterPyfunc
from tasks.predictions import PREDICTION as PREDICTION_COLUMN  # the columns of predictions.csv
from tasks.predictions import is_proba_column
from tasks.tracking.signature import signature_for

EXAMPLE_ROWS = 5

logger = logging.getLogger("automl_eval.tracking")


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
