"""Load a dataset as its card describes it, columns typed by their card roles.

numeric -> int/float, categorical -> pandas 'category' of strings, text -> str (object),
id/ignore -> as read. A classification target is a 'category' of string labels whatever the file
stores (CSV text, Parquet int, bool, string or nullable), a regression target is float: every
framework then sees the same labels from CSV and from Parquet.
Bad content (a missing column, a word in a numeric column) is a UserError naming file and column.

A job needs only some columns and, of a Parquet file, reads only its fold's rows (row group by
row group, kept in Arrow until each part is converted once); a CSV is read once and sliced.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks import paths
from tasks.errors import UserError
from tasks.images.files import image_bytes
from tasks.specs import DatasetSpec

_STRING_ROLES = ("categorical", "text")
_READ_ERRORS = (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError, OSError)


def _card(spec: DatasetSpec) -> str:
    return spec.card_path or f"specs/datasets/{spec.name}.yaml"


def _unreadable(path: Path, exc: Exception) -> UserError:
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return UserError(f"{path}: cannot be read as a table ({reason}); fix or rebuild the file.")


def _require_file(spec: DatasetSpec) -> Path:
    path = spec.path
    if not path.is_file():
        raise UserError(
            f"{_card(spec)}: field 'file': {path} does not exist; run `automl-eval datasets build` "
            "(or `dvc pull`), or fix the file name in the card."
        )
    return path


def _string_columns(spec: DatasetSpec) -> set[str]:
    # Strings stay strings: a label "01" or a category "1" must not turn into a number.
    as_string = {c for c, role in spec.columns.items() if role in _STRING_ROLES}
    if not spec.numeric_target:
        as_string.add(spec.target)
    return as_string


def _return_freed_memory(pa: Any) -> None:
    """Arrow's allocator keeps freed memory for reuse, which a job's loader never needs again:
    with no decay, jemalloc hands it back to the OS at once, so the framework gets it (glibc's
    malloc would keep the many mid-sized chunks of a multi-row-group file in its heap)."""
    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
        pa.jemalloc_set_decay_ms(0)
    except (NotImplementedError, AttributeError, pa.ArrowNotImplementedError):
        pass  # a pyarrow built without jemalloc: its default pool, as it is


def _parquet_parts(
    path: Path, columns: Sequence[str] | None, rows: Sequence[np.ndarray] | None
) -> list[pd.DataFrame]:
    """One frame per part of `rows` (sorted row positions), or the whole file as one part.

    Read a column at a time, of only the row groups that hold some of the parts' rows, and take
    each part's rows of it: one contiguous array per part and column, which pandas then takes
    over without a copy (self_destruct frees the Arrow memory as it goes). Taking row group by
    row group instead leaves each column in pieces that pandas must join: a second copy, 1.6 s
    at 10 M rows. Peak: the parts once, plus one column of the row groups read.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    _return_freed_memory(pa)
    parquet = pq.ParquetFile(path)
    present = parquet.schema_arrow.names
    wanted = [c for c in columns if c in present] if columns is not None else list(present)
    if rows is None:
        table = parquet.read(columns=wanted)
        return [table.to_pandas(split_blocks=True, self_destruct=True)]
    sizes = np.array([parquet.metadata.row_group(g).num_rows for g in range(parquet.num_row_groups)])
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    needed = np.zeros(len(sizes), dtype=bool)
    for positions in rows:
        needed[np.unique(np.searchsorted(starts, positions, side="right") - 1)] = True
    groups = np.flatnonzero(needed)
    # A row's position among the row groups read: its file position less the rows skipped before it.
    skipped_before = starts - np.concatenate(([0], np.cumsum(np.where(needed, sizes, 0))[:-1]))
    local = [pa.array(positions - skipped_before[np.searchsorted(starts, positions, side="right") - 1])
             for positions in rows]
    pieces: list[dict[str, pa.Array]] = [{} for _ in rows]
    schema = parquet.schema_arrow
    for column in wanted:
        values = (parquet.read_row_groups(groups.tolist(), columns=[column]).column(0) if len(groups)
                  else pa.chunked_array([], type=schema.field(column).type))
        for part, positions in enumerate(local):
            pieces[part][column] = values.take(positions)
        del values
    frames = []
    part_schema = pa.schema([schema.field(c) for c in wanted])
    for part in range(len(pieces)):
        table = pa.table({c: pieces[part][c] for c in wanted}, schema=part_schema)
        pieces[part] = {}
        frames.append(table.to_pandas(split_blocks=True, self_destruct=True))
        del table
    return frames


def _read_parts(
    spec: DatasetSpec, columns: Sequence[str] | None, rows: Sequence[np.ndarray] | None
) -> list[pd.DataFrame]:
    path = _require_file(spec)
    try:
        if path.suffix == ".parquet":
            return _parquet_parts(path, columns, rows)
        wanted = set(columns) if columns is not None else None
        frame = pd.read_csv(
            path,
            dtype={c: str for c in _string_columns(spec)},
            usecols=(lambda c: c in wanted) if wanted is not None else None,
            low_memory=False,
        )
    except _READ_ERRORS as exc:
        raise _unreadable(path, exc) from None
    if rows is None:
        return [frame]
    parts = [frame.take(positions) for positions in rows]
    del frame  # each part is its own copy now: the whole table is not kept
    return parts


def read_columns(spec: DatasetSpec, columns: Sequence[str]) -> pd.DataFrame:
    """Some columns of every row, as the file stores them (untyped); a missing one is a UserError."""
    (frame,) = _read_parts(spec, columns, None)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise UserError(f"{_card(spec)}: column {', '.join(missing)} is not in {spec.path}; fix the card.")
    return frame


def _as_number(
    values: pd.Series, column: str, path: Path, what: str, positions: np.ndarray | None
) -> pd.Series:
    """Plain int64/float64 (what every framework accepts); anything else is a UserError."""
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
        row = int(positions[position]) if positions is not None else position
        raise UserError(
            f"{path}: column '{column}' is {what} but data row {row + 1} holds "
            f"'{values.iloc[position]}' ({int(bad.sum())} non-numeric values); fix the file or change "
            "the column's role in the card."
        )
    return numbers


def _as_text_category(values: pd.Series) -> pd.Series:
    """A 'category' whose categories are strings, cheaply: typed values (Parquet ints, bools) are
    encoded first and only the distinct values are turned into text."""
    category = values if isinstance(values.dtype, pd.CategoricalDtype) else values.astype("category")
    names = [str(level) for level in category.cat.categories]
    if len(set(names)) != len(names):  # e.g. 1 and "1" in one object column
        text = values.astype(object).where(values.notna(), None).map(str, na_action="ignore")
        return text.astype("category")
    if not all(isinstance(level, str) for level in category.cat.categories):
        category = category.cat.rename_categories(names)
    return category


def _type_part(
    spec: DatasetSpec,
    frame: pd.DataFrame,
    positions: np.ndarray | None,
    require_columns: bool,
    wanted: Sequence[str] | None,
) -> None:
    """Type `frame`'s columns in place, one column at a time (never a copy of the whole frame)."""
    if spec.target not in frame.columns:
        raise UserError(
            f"{_card(spec)}: field 'target': column '{spec.target}' is not in {spec.path}; "
            f"its columns are {', '.join(map(str, frame.columns[:12]))}"
            f"{'...' if len(frame.columns) > 12 else ''}."
        )
    missing = [c for c in spec.columns if c not in frame.columns and (wanted is None or c in wanted)]
    if missing and require_columns:
        raise UserError(
            f"{_card(spec)}: field 'columns': {', '.join(missing)} not in {spec.path}; "
            "fix the card or the file."
        )
    for column, role in spec.columns.items():
        if column not in frame.columns or column == spec.target:
            continue
        values = frame[column]
        if role == "numeric":
            typed = _as_number(values, column, spec.path, "declared numeric in the card", positions)
        elif role == "categorical":
            typed = _as_text_category(values)
        elif role == "text":
            typed = values if values.dtype == object else values.astype(object).where(values.notna(), None)
        elif role == "image":
            # Encoded images as they are; a labels table's file paths read into the bytes of the files.
            typed = image_bytes(values, spec.path, paths.datasets_dir(), positions)
        else:
            continue
        if typed is not values:  # an already typed column is left alone: assigning copies it
            frame[column] = typed
        del values, typed
    if spec.numeric_target:
        target = _as_number(frame[spec.target], spec.target, spec.path, f"a {spec.problem_type} target",
                            positions)
        frame[spec.target] = target.astype(float)
    else:
        frame[spec.target] = _as_text_category(frame[spec.target])


def _share_categories(spec: DatasetSpec, parts: list[pd.DataFrame]) -> None:
    """Every part gets the same sorted categories (the union), as if typed as one table."""
    for column in parts[0].columns:
        if not isinstance(parts[0][column].dtype, pd.CategoricalDtype):
            continue
        levels = sorted(set().union(*(set(p[column].cat.categories) for p in parts)), key=str)
        for part in parts:
            if list(part[column].cat.categories) != levels:
                part[column] = part[column].cat.set_categories(levels)


def read_parts(
    spec: DatasetSpec,
    rows: Sequence[np.ndarray] | None = None,
    *,
    columns: Sequence[str] | None = None,
    require_columns: bool = True,
) -> list[pd.DataFrame]:
    """Typed frames of the given row positions (each sorted), or one frame of every row.

    `columns` limits what is read (the target is always read); categories are shared by all parts.
    """
    if columns is not None and spec.target not in columns:
        columns = [*columns, spec.target]
    parts = _read_parts(spec, columns, rows)
    for index, part in enumerate(parts):
        _type_part(spec, part, rows[index] if rows is not None else None, require_columns, columns)
        if rows is not None:
            part.reset_index(drop=True, inplace=True)
    if len(parts) > 1:
        _share_categories(spec, parts)
    return parts


def read_typed(spec: DatasetSpec, *, require_columns: bool = True) -> pd.DataFrame:
    """The typed frame; with ``require_columns=False`` missing feature columns are left for the gate."""
    (frame,) = read_parts(spec, require_columns=require_columns)
    return frame


def load_frame(spec: DatasetSpec) -> pd.DataFrame:
    """The whole dataset, columns typed by their card roles (categorical as 'category', text as str)."""
    return read_typed(spec, require_columns=True)
