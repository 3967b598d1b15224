"""Load a dataset as its card describes it: every row, columns typed by their card roles.

numeric -> int/float, categorical -> pandas 'category', text -> str (object), id/ignore -> as read.
A classification target is a 'category' of string labels, a regression target is float.
Bad content (a missing column, a word in a numeric column) is a UserError naming file and column.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tasks.errors import UserError
from tasks.specs import DatasetSpec

_STRING_ROLES = ("categorical", "text")


def _card(spec: DatasetSpec) -> str:
    return spec.card_path or f"specs/datasets/{spec.name}.yaml"


def _read_raw(spec: DatasetSpec) -> pd.DataFrame:
    path = spec.path
    if not path.is_file():
        raise UserError(
            f"{_card(spec)}: field 'file': {path} does not exist; run `automl-eval datasets build` "
            "(or `dvc pull`), or fix the file name in the card."
        )
    # Strings stay strings: a label "01" or a category "1" must not turn into a number.
    as_string = {c for c, role in spec.columns.items() if role in _STRING_ROLES}
    if spec.problem_type != "regression":
        as_string.add(spec.target)
    try:
        if path.suffix == ".parquet":
            frame = pd.read_parquet(path)
            for column in as_string & set(frame.columns):
                frame[column] = frame[column].astype(object)
            return frame
        return pd.read_csv(path, dtype={c: str for c in as_string}, low_memory=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError, OSError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{path}: cannot be read as a table ({reason}); fix or rebuild the file.") from None


def _as_number(frame: pd.DataFrame, column: str, path: Path, what: str) -> pd.Series:
    """Plain int64/float64 (what every framework accepts); anything else is a UserError."""
    values = frame[column]
    if pd.api.types.is_bool_dtype(values):
        return values.astype("int64") if values.notna().all() else values.astype("float64")
    if isinstance(values.dtype, pd.api.extensions.ExtensionDtype) and pd.api.types.is_numeric_dtype(values):
        # Parquet's nullable Int64/Float64: NaN-holding float64 is the common denominator.
        return values.astype("float64")
    if pd.api.types.is_numeric_dtype(values):
        return values
    numbers = pd.to_numeric(values, errors="coerce")
    bad = values.notna() & numbers.isna()
    if bad.any():
        position = int(bad.to_numpy().nonzero()[0][0])
        raise UserError(
            f"{path}: column '{column}' is {what} but data row {position + 1} holds "
            f"'{values.iloc[position]}' ({int(bad.sum())} non-numeric values); fix the file or change "
            "the column's role in the card."
        )
    return numbers


def read_typed(spec: DatasetSpec, *, require_columns: bool = True) -> pd.DataFrame:
    """The typed frame; with ``require_columns=False`` missing feature columns are left for the gate."""
    frame = _read_raw(spec)
    if spec.target not in frame.columns:
        raise UserError(
            f"{_card(spec)}: field 'target': column '{spec.target}' is not in {spec.path}; "
            f"its columns are {', '.join(map(str, frame.columns[:12]))}"
            f"{'...' if len(frame.columns) > 12 else ''}."
        )
    missing = [c for c in spec.columns if c not in frame.columns]
    if missing and require_columns:
        raise UserError(
            f"{_card(spec)}: field 'columns': {', '.join(missing)} not in {spec.path}; "
            "fix the card or the file."
        )
    for column, role in spec.columns.items():
        if column not in frame.columns:
            continue
        if role == "numeric":
            frame[column] = _as_number(frame, column, spec.path, "declared numeric in the card")
        elif role == "categorical":
            frame[column] = frame[column].astype("category")
        elif role == "text":
            frame[column] = frame[column].astype(object)
    if spec.problem_type == "regression":
        frame[spec.target] = _as_number(frame, spec.target, spec.path, "a regression target").astype(float)
    else:
        labels = frame[spec.target]
        frame[spec.target] = labels.astype(pd.CategoricalDtype(sorted(labels.dropna().unique())))
    return frame


def load_frame(spec: DatasetSpec) -> pd.DataFrame:
    """The whole dataset, columns typed by their card roles (categorical as 'category', text as str)."""
    return read_typed(spec, require_columns=True)
