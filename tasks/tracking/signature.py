"""The logged model's signature: the columns a client sends and their types, as serving checks them.

MLflow infers `long` for an integer column, and a served model then refuses every row whose value
there is missing ("Failed to enforce schema": JSON's null becomes NaN, a float), although the
harness scored such rows. So an integer feature column is declared `double` unless its card rules
missing values out (ExpectColumnValuesToNotBeNull), and a numeric prediction is a `double` too.
A whole number still passes a `double` column; with no integer column left, MLflow has nothing to
warn about either.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd
from mlflow.models import ModelSignature, infer_signature
from mlflow.types import ColSpec, DataType, Schema

from tasks.errors import UserError
from tasks.specs import load_dataset_spec

NOT_NULL_EXPECTATIONS = ("ExpectColumnValuesToNotBeNull", "expect_column_values_to_not_be_null")


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
    example = with_room_for_missing(example, complete)
    output = with_room_for_missing(output) if output is not None else None
    # Inferred with every integer as a double, then the complete ones declared `long` again: MLflow
    # warns about any integer column it infers, though the card has settled the question for these.
    signature = infer_signature(with_room_for_missing(example), output)
    kept = {c for c in example.columns if pd.api.types.is_integer_dtype(example[c])}
    if kept:
        signature.inputs = Schema([
            ColSpec(DataType.long, spec.name, spec.required) if spec.name in kept else spec
            for spec in signature.inputs.inputs
        ])
    return signature, example
