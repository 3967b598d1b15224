"""What `automl-eval datasets list` shows: every card with its file's size and DVC hash."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from tasks.data import pinning
from tasks.data.versions import file_md5
from tasks.specs import list_dataset_specs


@dataclass(frozen=True)
class CatalogRow:
    name: str
    rows: str
    columns: str
    problem_type: str
    metric: str
    md5: str
    pinned: str  # yes | changed | not pinned | unknown (cache lacks the pinned listing)
    file: str


def _shape(path) -> tuple[str, str]:  # noqa: ANN001 - a Path
    try:
        if path.suffix == ".parquet":
            frame = pd.read_parquet(path)
            return f"{len(frame):,}", str(frame.shape[1])
        header = pd.read_csv(path, nrows=0)
        rows = len(pd.read_csv(path, usecols=[0]))  # quoted newlines counted right, unlike a line count
        return f"{rows:,}", str(len(header.columns))
    except (ValueError, OSError, pd.errors.ParserError, pd.errors.EmptyDataError):
        return "unreadable", "-"


def catalog_rows() -> list[CatalogRow]:
    listing = pinning.pinned_listing()
    rows: list[CatalogRow] = []
    for spec in list_dataset_specs():
        if spec.path.is_file():
            n_rows, n_columns = _shape(spec.path)
            md5 = file_md5(spec.path)
            if listing is None:
                pinned = "unknown"
            else:
                pinned = {None: "not pinned", md5: "yes"}.get(listing.get(spec.file), "changed")
        else:
            n_rows, n_columns, md5, pinned = "missing", "-", "-", "-"
        rows.append(
            CatalogRow(
                spec.name, n_rows, n_columns, spec.problem_type, str(spec.metric), md5, pinned, spec.file
            )
        )
    return rows
