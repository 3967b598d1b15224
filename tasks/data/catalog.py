"""What `automl-eval datasets list` shows: every card with its file's size and DVC hash.

A card that cannot be read is listed with its one-sentence error; the others are listed as usual.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tasks import paths
from tasks.data import pinning
from tasks.data.versions import file_md5
from tasks.errors import UserError
from tasks.specs import load_dataset_spec


@dataclass(frozen=True)
class CatalogRow:
    """One card as `datasets list` shows it; `--json` prints these fields as they are, for programs:
    counts are numbers (None when there are none to give), and `state` says why."""

    name: str
    modality: str
    problem_type: str
    metric: str
    rows: int | None
    columns: int | None
    md5: str | None  # DVC's md5 of the file; None when the file is missing
    pinned: str  # yes | changed | not pinned | unknown (cache lacks the pinned listing) | missing
    file: str
    state: str  # ok | missing (no file yet) | unreadable (the file cannot be read) | broken card
    error: str = ""  # the card's one-sentence error when it cannot be read


def _shape(path: Path) -> tuple[int, int] | None:
    """(rows, columns) of a CSV or Parquet file; None when it cannot be read."""
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq  # the footer only, not the data; pyarrow only where needed

            metadata = pq.ParquetFile(path).metadata
            return metadata.num_rows, metadata.num_columns
        header = pd.read_csv(path, nrows=0)
        rows = len(pd.read_csv(path, usecols=[0]))  # quoted newlines counted right, unlike a line count
        return rows, len(header.columns)
    except (ValueError, OSError, pd.errors.ParserError, pd.errors.EmptyDataError):
        return None


def catalog_rows() -> list[CatalogRow]:
    listing = pinning.pinned_listing()
    rows: list[CatalogRow] = []
    for card in sorted(paths.dataset_cards_dir().glob("*.yaml")):
        try:
            spec = load_dataset_spec(card)
        except UserError as exc:
            rows.append(CatalogRow(card.stem, "-", "-", "-", None, None, None, "-", "-", "broken card",
                                   error=str(exc)))
            continue
        shape: tuple[int, int] | None = None
        md5: str | None = None
        if spec.path.is_file():
            shape = _shape(spec.path)
            md5 = file_md5(spec.path)
            state = "ok" if shape is not None else "unreadable"
            if listing is None:
                pinned = "unknown"
            else:
                pinned = {None: "not pinned", md5: "yes"}.get(listing.get(spec.file), "changed")
        else:
            state, pinned = "missing", "missing"
        rows.append(
            CatalogRow(
                name=spec.name, modality=spec.modality, problem_type=spec.problem_type,
                metric=str(spec.metric), rows=shape[0] if shape else None,
                columns=shape[1] if shape else None, md5=md5, pinned=pinned, file=spec.file, state=state,
            )
        )
    return rows
