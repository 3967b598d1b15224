"""A seeded large tabular dataset for the data benchmark: N rows x 30 columns, binary target, Parquet.

25 numeric columns (a few with missing values), 4 categorical string columns, an integer 0/1
target that depends on some of them. Written chunk by chunk (one Parquet row group per million
rows), so generating 10 million rows never holds more than one chunk. Not part of the catalog or CI.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

NUMERIC = [f"num_{i:02d}" for i in range(25)]
CATEGORICAL = [f"cat_{i}" for i in range(4)]
TARGET = "label"
CHUNK_ROWS = 1_000_000
_SIZES = (3, 12, 50, 400)
_LEVELS = [
    [f"{name}_{level}" for level in range(size)] for name, size in zip(CATEGORICAL, _SIZES, strict=True)
]


def card(name: str, file: str, rows: int) -> dict[str, Any]:
    """The dataset card of the generated file."""
    return {
        "name": name,
        "description": f"Synthetic benchmark table, {rows:,} rows (bench/synthetic_data.py).",
        "source": {"package": "numpy", "call": "bench/synthetic_data.py write_parquet", "licence": "CC0"},
        "file": file,
        "target": TARGET,
        "problem_type": "binary",
        "rows": rows,
        "columns": {**{c: "numeric" for c in NUMERIC}, **{c: "categorical" for c in CATEGORICAL}},
    }


def _chunk(rng: np.random.Generator, rows: int) -> dict[str, Any]:
    import pyarrow as pa

    numeric = rng.standard_normal((len(NUMERIC), rows))
    columns: dict[str, Any] = {}
    for index, name in enumerate(NUMERIC):
        values = numeric[index]
        if index % 8 == 7:
            values = np.where(rng.random(rows) < 0.02, np.nan, values)
        columns[name] = values
    codes = [rng.integers(0, len(levels), rows) for levels in _LEVELS]
    for name, levels, code in zip(CATEGORICAL, _LEVELS, codes, strict=True):
        columns[name] = pa.DictionaryArray.from_arrays(pa.array(code.astype(np.int32)), pa.array(levels))
    signal = numeric[0] + 0.5 * numeric[1] - 0.7 * numeric[2] + (codes[0] == 1) * 0.8
    columns[TARGET] = (signal + rng.normal(scale=1.0, size=rows) > 0.2).astype(np.int64)
    return columns


def write_parquet(path: Path, rows: int, seed: int = 0) -> Path:
    """Write `rows` rows to `path`; the same rows and seed give the same bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = None
    try:
        for start in range(0, rows, CHUNK_ROWS):
            table = pa.table(_chunk(rng, min(CHUNK_ROWS, rows - start)))
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema, compression="snappy")
            writer.write_table(table, row_group_size=CHUNK_ROWS)
    finally:
        if writer is not None:
            writer.close()
    return path
