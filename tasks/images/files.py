"""An image column as the frameworks get it: encoded image bytes, whether the dataset stores
them in a Parquet column or names image files in a labels table.

A labels table (`datasets/NAME/labels.csv`) names each image by a path relative to its own folder.
A path that leaves datasets/ (absolute, or `..` past it) or names no file is the user's mistake:
one sentence naming the table, the row and the fix.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from tasks.errors import UserError


def _inside(datasets_dir: Path, folder: Path, relative: str) -> bool:
    # Lexical, as for a card's `file`: a symlink the user placed in datasets/ (a DVC cache link) is
    # theirs to make; the table's text alone never leads outside.
    if Path(relative).is_absolute():
        return False
    normal = os.path.normpath(os.path.join(os.path.relpath(folder, datasets_dir), relative))
    return not (normal == ".." or normal.startswith(".." + os.sep))


def image_bytes(values: pd.Series, table: Path, datasets_dir: Path,
                positions: np.ndarray | None = None) -> pd.Series:
    """`values` as encoded image bytes: bytes stay as they are, text is a file path read from disk.

    `positions` (the rows' positions in the table, when only some rows were read) makes the row
    numbers in error sentences those of the file.
    """
    if values.empty or not isinstance(values.iloc[0], str):
        return values  # already encoded images (a Parquet binary column)
    folder = table.parent
    contents: list[bytes] = []
    for index, relative in enumerate(values.tolist()):
        row = int(positions[index]) + 1 if positions is not None else index + 1
        path = (folder / str(relative)) if isinstance(relative, str) else None
        if path is None or not _inside(datasets_dir, folder, str(relative)):
            raise UserError(f"{table}: row {row} names {relative!r}, a path leaving datasets/; give a path "
                            "relative to the labels table's folder, inside datasets/.")
        if not path.is_file():
            raise UserError(f"{table}: row {row} names {relative!r}, but {path} does not exist; add the "
                            "file or remove its row.")
        contents.append(path.read_bytes())
    return pd.Series(contents, index=values.index, dtype=object, name=values.name)
