"""FeatureSchema: the typed view of the fold an adapter fits on, without a copy of the data."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tasks.frameworks._tabular import FeatureSchema, text_as_strings
from tasks.frameworks.base import TaskInfo


def _fold() -> tuple[pd.DataFrame, TaskInfo]:
    X = pd.DataFrame({
        "amount": np.linspace(0.0, 1.0, 6),
        "city": pd.Categorical(["a", "b", "a", "c", "b", "a"]),
        "note": ["x", None, "y", "z", "x", "y"],
        "row_id": np.arange(6),
    })
    task = TaskInfo(problem_type="binary", target="label", metric="auc",
                    column_roles={"amount": "numeric", "city": "categorical", "note": "text",
                                  "row_id": "id"},
                    classes=("no", "yes"))
    return X, task


def test_apply_shares_the_numbers_and_leaves_the_callers_frame_as_it_was() -> None:
    X, task = _fold()
    before = X.copy()
    schema = FeatureSchema.learn(X, task, keep_text=True)
    frame = text_as_strings(schema.apply(X), task)
    # What adapters do with the result: retype columns, add the target.
    frame["city"] = frame["city"].cat.add_categories(["d"])
    frame["label"] = ["no", "yes"] * 3

    assert list(frame.columns) == ["amount", "city", "note", "label"]
    assert np.shares_memory(frame["amount"].to_numpy(), X["amount"].to_numpy())
    pd.testing.assert_frame_equal(X, before)


def test_apply_types_new_rows_as_at_fit_time() -> None:
    X, task = _fold()
    schema = FeatureSchema.learn(X, task)
    one_row = pd.DataFrame({"amount": [0.5], "city": ["c"], "row_id": [9]})

    typed = schema.apply(one_row)

    assert list(typed.columns) == ["amount", "city"]
    assert list(typed["city"].cat.categories) == ["a", "b", "c"]
    assert typed["city"].cat.codes.tolist() == [2]


def test_apply_keeps_every_row_even_with_no_column_or_a_repeated_index() -> None:
    X, task = _fold()
    X.index = [3, 3, 1, 1, 0, 0]  # rows of a resampled copy
    schema = FeatureSchema.learn(X, task)
    assert schema.apply(X).index.tolist() == X.index.tolist()
    assert FeatureSchema([], {}).apply(X).shape == (6, 0)

