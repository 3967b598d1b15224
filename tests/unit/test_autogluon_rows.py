"""How many training rows AutoGluon is fitted on: all of them unless the budget cannot hold them.

The cap and the sample are tasks/frameworks/_sampling.py's, which FLAML, H2O and rf share with
their own rates; AutoGluon's rates are the example here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tasks.frameworks._sampling import Sampled, sample_rows
from tasks.frameworks.ag_tabular import CELLS_PER_CORE_MINUTE, ROW_CAP
from tasks.specs import Budget

max_train_rows = ROW_CAP.rows
ONE_MINUTE_TWO_CORES = Budget(name="1m2c", time_s=60, cores=2, memory_mb=8192, gpus=0)


def _frame(rows: int, columns: int = 30) -> pd.DataFrame:
    return pd.DataFrame(np.zeros((rows, columns)), columns=[f"c{i}" for i in range(columns)])


def test_a_catalog_sized_fold_is_fitted_whole() -> None:
    assert max_train_rows(_frame(50_000), ONE_MINUTE_TWO_CORES) is None


def test_rows_beyond_what_the_budgets_time_allows_are_capped() -> None:
    X = _frame(3_000_000)
    cap = max_train_rows(X, ONE_MINUTE_TWO_CORES)
    assert cap == CELLS_PER_CORE_MINUTE * 2 // 30
    longer = Budget(name="10m2c", time_s=600, cores=2, memory_mb=65536, gpus=0)
    assert max_train_rows(X, longer) is None


def test_rows_beyond_what_the_budgets_memory_holds_are_capped() -> None:
    X = _frame(3_000_000)
    small_memory = Budget(name="tight", time_s=3600, cores=8, memory_mb=1024, gpus=0)
    cap = max_train_rows(X, small_memory)
    assert cap is not None and cap * 30 * 8 * 6 <= 1024 * 2**20 < (cap + 1000) * 30 * 8 * 6


def test_the_suite_sets_or_lifts_the_cap() -> None:
    X = _frame(3_000_000)
    assert max_train_rows(X, ONE_MINUTE_TWO_CORES, 1000) == 1000
    assert max_train_rows(X, ONE_MINUTE_TWO_CORES, "all") is None
    assert max_train_rows(_frame(10), ONE_MINUTE_TWO_CORES, 1000) is None
    for wrong in (0, -5, "many", 2.5, True):
        with pytest.raises(ValueError, match="_max_train_rows"):
            max_train_rows(X, ONE_MINUTE_TWO_CORES, wrong)


def test_a_stratified_sample_keeps_every_class_and_its_share() -> None:
    y = pd.Series(["common"] * 9_000 + ["rare"] * 3 + ["middle"] * 997, dtype=object)
    positions = sample_rows(y, 1_000, seed=0, stratify=True)

    drawn = y.iloc[positions].value_counts()
    assert positions.tolist() == sorted(set(positions.tolist()))
    assert drawn["rare"] == 1 and abs(drawn["common"] - 900) <= 1 and abs(drawn["middle"] - 100) <= 1
    assert np.array_equal(positions, sample_rows(y, 1_000, seed=0, stratify=True))
    assert not np.array_equal(positions, sample_rows(y, 1_000, seed=1, stratify=True))


def test_an_unstratified_sample_draws_distinct_rows() -> None:
    y = pd.Series(np.arange(10_000, dtype=float))
    positions = sample_rows(y, 500, seed=3, stratify=False)
    assert len(positions) == len(set(positions.tolist())) == 500


def test_the_sample_is_said_with_who_chose_its_size() -> None:
    by_budget = Sampled(2_805_418, 9_000_000).sentence()
    assert "2,805,418 of the 9,000,000 training rows" in by_budget and "budget allows" in by_budget
    assert "suite's _max_train_rows" in Sampled(50, 80, by_suite=True).sentence()
    for sentence in (by_budget, Sampled(1, 2, by_suite=True).sentence()):
        assert sentence.endswith("scored on the whole test part")
