"""A job run's dataset as an MLflow dataset input: what MLflow's Dataset column and filter read.

The digest is the dataset's DVC md5 (the job's `data_version`), so two runs on the same bytes
show the same digest in every team's store; the source names the card, the data file it points
to, and the outer fold the job trained and scored on.
"""

from __future__ import annotations

import json
from contextlib import suppress

from mlflow.entities import Dataset, DatasetInput, InputTag
from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

from tasks.errors import UserError
from tasks.multimodal.combinations import split_name
from tasks.specs import load_dataset_spec

SOURCE_TYPE = "automl_eval_card"
CONTEXT = "train"  # MLflow's usual context; the source's fold says which part was trained and scored
MISSING_VERSION = "missing"  # the data version of a dataset whose file was absent


def dataset_source(dataset: str, fold: int) -> dict[str, str | int]:
    """Where the job's data came from: its card, the card's file under datasets/, the fold."""
    base = split_name(dataset)[0]
    source: dict[str, str | int] = {"card": f"specs/datasets/{base}.yaml", "fold": fold}
    with suppress(UserError):  # a card removed since the run: the record still names it
        source["file"] = f"datasets/{load_dataset_spec(base).file}"
    return source


def dataset_input(dataset: str, data_version: str, fold: int) -> DatasetInput | None:
    """The job's dataset input, or None when its data was missing (nothing to digest)."""
    if not data_version or data_version == MISSING_VERSION:
        return None
    entity = Dataset(
        name=dataset,
        digest=data_version,
        source_type=SOURCE_TYPE,
        source=json.dumps(dataset_source(dataset, fold), sort_keys=True),
    )
    return DatasetInput(dataset=entity, tags=[InputTag(key=MLFLOW_DATASET_CONTEXT, value=CONTEXT)])
