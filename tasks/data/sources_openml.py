"""The `openml.task` source: a card generated from an OpenML task (tasks/data/openml_cards.py).

It reads the task through the `openml` client (its cache first) and writes OpenML's own split as
the card's folds file, then returns the table for the materializer to write like any other.
"""

from __future__ import annotations

import pandas as pd

from tasks.data import openml_tasks
from tasks.data.folds import folds_csv_bytes, folds_path
from tasks.data.materialize import write_if_changed
from tasks.data.sources import source
from tasks.errors import UserError
from tasks.specs import DatasetSpec


@source("openml.task")
def openml_task(spec: DatasetSpec) -> pd.DataFrame:
    task_id = spec.source.openml_task
    if task_id is None:
        raise UserError(
            f"{spec.card_path}: field 'source.openml_task' is required by loader "
            "'openml.task'; give the OpenML task id."
        )
    data = openml_tasks.fetch_task(task_id)
    # The card names this file as its own folds (`folds: {file: ...}`): never recomputed, only OpenML's.
    write_if_changed(folds_path(spec), folds_csv_bytes(data.folds))
    return data.frame
