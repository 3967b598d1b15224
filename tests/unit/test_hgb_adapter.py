"""The hgb baseline: it stops boosting when its time is spent, and wide categories go in as codes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier

from tasks.frameworks._hgb_timed import TimedHistGradientBoostingClassifier
from tasks.frameworks._tabular import FeatureSchema
from tasks.frameworks.base import TaskInfo
from tasks.frameworks.hgb import ADAPTER, MAX_NATIVE_CATEGORIES, category_codes
from tasks.specs import Budget

TASK = TaskInfo(problem_type="binary", target="label", metric="auc",
                column_roles={"x": "numeric", "shop": "categorical"}, classes=("no", "yes"))
BUDGET = Budget(name="test", time_s=60, cores=1, memory_mb=1024, gpus=0)


def _data(rows: int, shops: int = 3) -> tuple[pd.DataFrame, pd.Series]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(rows)
    shop = rng.integers(0, shops, rows)
    X = pd.DataFrame({"x": x, "shop": pd.Categorical([f"s{i}" for i in shop])})
    y = pd.Series(np.where(x + (shop % 2) + rng.normal(size=rows) > 0.5, "yes", "no"), dtype=object)
    return X, y


@pytest.mark.parametrize("rows", [20_000, 2_000])  # early stopping on (above 10 000 rows) and off
@pytest.mark.parametrize(("limit_s", "stops_by_time"), [(0.0, True), (None, False)])
def test_boosting_stops_after_the_round_in_which_its_time_ran_out(
    tmp_path, limit_s: float | None, stops_by_time: bool, rows: int  # noqa: ANN001
) -> None:
    X, y = _data(rows)
    model = ADAPTER.fit(X, y, task=TASK, budget=BUDGET, params={"max_iter": 15, "n_iter_no_change": 15},
                        workdir=tmp_path, seed=0)
    model.estimator.fit_time_limit_s = limit_s  # refit under the limit of this case
    model.estimator.fit(model.schema.apply(X), y)

    info = model.info()
    assert info["stopped_by_time"] is stops_by_time
    assert model.stopped_by_time() is stops_by_time  # the capability the Scaling report reads
    assert ADAPTER.fixed_work  # its params fix the rounds; the budget's time only caps them
    assert info["boosting_rounds"] == (1 if stops_by_time else 15)
    assert info["max_rounds"] == 15
    assert set(model.predict(X.head(3))) <= {"no", "yes"}
    assert model.estimator.get_params()["early_stopping"] == "auto"  # its params as given, after the fit


def test_the_time_check_on_fewer_rows_leaves_the_model_as_plain_hgb_fits_it() -> None:
    rng = np.random.default_rng(1)
    X = rng.standard_normal((600, 5))
    y = np.where(X[:, 0] + X[:, 1] * X[:, 2] + rng.normal(size=600) > 0, "yes", "no")
    timed = TimedHistGradientBoostingClassifier(max_iter=20, random_state=0)
    timed.fit_time_limit_s = 3600.0
    plain = HistGradientBoostingClassifier(max_iter=20, random_state=0)
    timed.fit(X, y)
    plain.fit(X, y)
    assert timed.n_iter_ == plain.n_iter_ == 20 and len(timed.train_score_) == 21  # checked each round
    np.testing.assert_array_equal(timed.predict_proba(X), plain.predict_proba(X))


def test_a_fit_gets_the_budgets_time_less_a_reserve(tmp_path) -> None:  # noqa: ANN001
    X, y = _data(500)
    model = ADAPTER.fit(X, y, task=TASK, budget=BUDGET,
                        params={"max_iter": 5}, workdir=tmp_path, seed=0)
    assert 50 <= model.estimator.fit_time_limit_s < 60
    assert model.info()["stopped_by_time"] is False


def test_a_column_with_more_levels_than_native_categories_goes_in_as_codes(tmp_path) -> None:  # noqa: ANN001
    X, y = _data(3_000, shops=MAX_NATIVE_CATEGORIES + 45)
    model = ADAPTER.fit(X, y, task=TASK, budget=BUDGET,
                        params={"max_iter": 5}, workdir=tmp_path, seed=0)
    unseen = pd.DataFrame({"x": [0.1, 0.2, 0.3], "shop": ["s1", "never seen", None]})

    coded = category_codes(model.schema.apply(unseen), ["shop"])
    assert coded["shop"].iloc[0] == model.schema.levels["shop"].index("s1")
    assert coded["shop"].iloc[1:].isna().all()  # unknown and missing alike
    assert np.shares_memory(coded["x"].to_numpy(), unseen["x"].to_numpy())
    assert model.predict_proba(unseen).shape == (3, 2)


def test_the_schema_levels_fix_the_codes_of_a_wide_column() -> None:
    X, _ = _data(2_000, shops=MAX_NATIVE_CATEGORIES + 5)
    schema = FeatureSchema.learn(X, TASK)
    shuffled = X.sample(frac=1.0, random_state=1)
    first = category_codes(schema.apply(X), ["shop"])["shop"]
    second = category_codes(schema.apply(shuffled), ["shop"])["shop"]
    pd.testing.assert_series_equal(first.loc[shuffled.index], second)


def test_labels_and_probabilities_of_one_call_are_those_of_predict_and_predict_proba(tmp_path) -> None:  # noqa: ANN001
    # What a served classifier answers per request, from one pass through the pipeline and the trees.
    X, y = _data(400, shops=5)
    X.loc[::7, "x"] = np.nan
    model = ADAPTER.fit(X, y, task=TASK, budget=BUDGET, params={"max_iter": 20}, workdir=tmp_path, seed=0)
    labels, proba = model.predict_with_proba(X)
    assert labels.tolist() == model.predict(X).tolist() and set(labels) == {"no", "yes"}
    pd.testing.assert_frame_equal(proba, model.predict_proba(X))
