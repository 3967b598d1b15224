"""What `automl-eval datasets list` shows: every card with its file's size and DVC hash.

A card that cannot be read is listed with its one-sentence error; the others are listed as usual.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from tasks import paths
from tasks.data import pinning
from tasks.data.versions import file_md5
from tasks.errors import UserError
from tasks.specs import load_dataset_spec


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
    error: str = ""  # the card's one-sentence error when it cannot be read


def _shape(path) -> tuple[str, str]:  # noqa: ANN001 - a Path
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            metadata = pq.ParquetFile(path).metadata  # the footer only, not the data
            return f"{metadata.num_rows:,}", str(metadata.num_columns)
        header = pd.read_csv(path, nrows=0)
        rows = len(pd.read_csv(path, usecols=[0]))  # quoted newlines counted right, unlike a line count
        return f"{rows:,}", str(len(header.columns))
    except (ValueError, OSError, pd.errors.ParserError, pd.errors.EmptyDataError):
        return "unreadable", "-"


def catalog_rows() -> list[CatalogRow]:
    listing = pinning.pinned_listing()
    rows: list[CatalogRow] = []
    for card in sorted(paths.dataset_cards_dir().glob("*.yaml")):
        try:
            spec = load_dataset_spec(card)
        except UserError as exc:
            rows.append(CatalogRow(card.stem, "-", "-", "-", "-", "-", "-", "-", error=str(exc)))
            continue
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
