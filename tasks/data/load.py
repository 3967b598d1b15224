"""Load a dataset as the card describes it. (Interim: the data work replaces the body, keeps the API.)"""

from __future__ import annotations

import pandas as pd

from tasks.specs import DatasetSpec


def load_frame(spec: DatasetSpec) -> pd.DataFrame:
    """The whole dataset, columns typed by their card roles (categorical as 'category', text as str)."""
    frame = pd.read_csv(spec.path)
    for column, role in spec.columns.items():
        if role == "categorical":
            frame[column] = frame[column].astype("category")
    return frame
