"""Materialize datasets/ from the packages that ship the data: byte-reproducible files and folds.

A card whose `file` ends in `.parquet` is written as Parquet (fixed writer settings, so the same
data gives the same bytes too); `parquet_copy` writes a Parquet twin of a CSV dataset.

Same package versions (requirements.lock) -> same bytes -> same DVC hash as datasets.dvc.
Files are written only when their bytes change, through a temporary name, so an interrupted build
never leaves half a file and an unchanged dataset keeps its timestamps (DVC re-hashes nothing).
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tasks.data import folds, load, sources
from tasks.errors import UserError
from tasks.images.card import pixels_of
from tasks.modalities.base import modality_of
from tasks.specs import DatasetSpec, load_dataset_spec

# Rows per Parquet row group: a job reads only the groups holding its fold's rows.
PARQUET_ROW_GROUP = 250_000


@dataclass(frozen=True)
class Materialized:
    name: str
    rows: int
    columns: int
    source: str  # the package call, or "user file"
    written: bool  # False when the file on disk already had these exact bytes


def _declared_columns(frame: pd.DataFrame, spec: DatasetSpec) -> list[str]:
    declared = (
        [*spec.columns, spec.target]
        if spec.columns
        else [*(c for c in frame.columns if c != spec.target), spec.target]
    )
    missing = [c for c in declared if c not in frame.columns]
    if missing:
        raise UserError(
            f"{spec.card_path}: the source '{spec.source.loader}' gives no column {', '.join(missing)}; "
            "fix the card's columns/target."
        )
    return declared


def canonical_csv(frame: pd.DataFrame, spec: DatasetSpec) -> bytes:
    """Deterministic CSV: the card's column order then the target, source row order, '\\n' endings."""
    declared = _declared_columns(frame, spec)
    buffer = io.StringIO()
    # Shortest round-trip float repr (pandas' default), fixed line ending and no index column.
    frame[declared].to_csv(buffer, index=False, lineterminator="\n")
    return buffer.getvalue().encode("utf-8")


def canonical_parquet(frame: pd.DataFrame, spec: DatasetSpec) -> bytes:
    """Deterministic Parquet: the CSV's column order and rows, fixed compression and row groups.

    Parquet stores no write time; its schema names the pyarrow and pandas versions, which
    requirements.lock pins, so the same packages give the same bytes.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(frame[_declared_columns(frame, spec)], preserve_index=False)
    buffer = pa.BufferOutputStream()
    pq.write_table(table, buffer, compression="zstd", compression_level=3, row_group_size=PARQUET_ROW_GROUP)
    return buffer.getvalue().to_pybytes()


def canonical_bytes(frame: pd.DataFrame, spec: DatasetSpec, path: Path) -> bytes:
    return canonical_parquet(frame, spec) if path.suffix == ".parquet" else canonical_csv(frame, spec)


def holds_bytes(path: Path, content: bytes) -> bool:
    """Whether the file at `path` holds exactly `content` (the size first: no read when it differs)."""
    return path.is_file() and path.stat().st_size == len(content) and path.read_bytes() == content


def write_if_changed(path: Path, content: bytes) -> bool:
    if holds_bytes(path, content):
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    # A partial file per process (two builds at once must not share one); *.tmp is in .dvcignore.
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_bytes(content)
    os.replace(partial, path)
    return True


def save_folds(spec: DatasetSpec, typed: pd.DataFrame) -> bool:
    """Assign and save the dataset's folds; True if a folds file changed.

    A multimodal dataset's modality combinations get the very same file: every combination is
    scored on exactly the same rows and folds as the whole. Folds the card names (a file or a
    column) are the user's: never computed, never overwritten; the gate checks them.
    """
    if folds.is_user_given(spec):
        return False
    images = pixels_of(spec)
    if images is not None:
        # A pixel table takes its image card's folds: the same images on the same sides.
        base = load_dataset_spec(images)
        assignment = folds.assign_folds(load.load_frame(base), base, folds.fold_settings(base))
    else:
        assignment = folds.assign_folds(typed, spec, folds.fold_settings(spec))
    content = folds.folds_csv_bytes(assignment)
    written = write_if_changed(folds.folds_path(spec), content)
    for name in modality_of(spec).shared_folds(spec):
        written |= write_if_changed(folds.folds_path(spec.model_copy(update={"name": name})), content)
    return written


def differs_from_source(spec: DatasetSpec) -> bool:
    """Whether the dataset's file on disk differs from what its packaged source gives now."""
    source = sources.get_source(spec)
    frame = source(spec) if source is not None else None
    if frame is None or not spec.path.is_file():
        return False
    return not holds_bytes(spec.path, canonical_bytes(frame, spec, spec.path))


def materialize(spec: DatasetSpec, *, regenerate_file: bool = True) -> Materialized:
    """Write the dataset's file (packaged sources only) and its saved folds (every dataset).

    ``regenerate_file=False`` keeps a file that is already there (pulled pinned data) and only
    recomputes its folds.
    """
    source = sources.get_source(spec)
    written = False
    if source is not None and regenerate_file:
        frame = source(spec)
        if frame is not None:
            written = write_if_changed(spec.path, canonical_bytes(frame, spec, spec.path))
    elif not spec.path.is_file():
        raise UserError(
            f"{spec.card_path}: field 'file': {spec.path} is missing and the card has no packaged "
            "source (source.loader); put the file there or run `dvc pull`."
        )
    # Folds come from the file as every consumer reads it, so they always match what is loaded.
    typed = load.load_frame(spec)
    written |= save_folds(spec, typed)
    n_rows, n_columns = typed.shape
    del typed
    return Materialized(
        name=spec.name,
        rows=n_rows,
        columns=n_columns,
        source=(
            "file kept as it is, folds recomputed"
            if not regenerate_file
            else spec.source.call
            if source is not None
            else "user file"
        ),
        written=written,
    )


def parquet_copy(spec: DatasetSpec) -> Materialized:
    """Write datasets/STEM.parquet, a byte-reproducible Parquet twin of a packaged CSV dataset.

    Point the card's `file` at it to have every job read Parquet (only its fold's row groups).
    """
    source = sources.get_source(spec)
    frame = source(spec) if source is not None else None
    if frame is None:
        raise UserError(
            f"{spec.card_path}: `--format parquet` needs a packaged source that returns a table "
            "(source.loader); a user's own file is already in the format it was given in."
        )
    target = spec.path.with_suffix(".parquet")
    written = write_if_changed(target, canonical_parquet(frame, spec))
    source_text = f"{spec.source.call} -> {target.name}"
    return Materialized(spec.name, len(frame), frame.shape[1], source_text, written)
