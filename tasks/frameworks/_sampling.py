"""How many training rows a framework is fitted on: all of them unless its budget cannot hold them.

A framework given more rows than it can take within the budget's time or memory trains nothing
(FLAML at 9 M rows: "No estimator is trained") or is killed over memory. The adapter then fits a
random, seeded sample of the training rows instead, records how many (`fit_rows`) and says so in
the job's info; the harness still scores the whole test part. Each framework has its own rates:
rows x columns it gets through per core and minute, and its peak memory per byte of data given;
a framework whose predicting is slow (rf) also has the test rows it predicts per core and minute,
so that the fit leaves the time predicting the job's test part takes.
A suite's `_max_train_rows: N` sets the cap itself, `_max_train_rows: all` lifts it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tasks.specs import Budget
from tasks.task_info import TaskInfo

ALL_ROWS = "all"
PARAM = "max_train_rows"  # the adapter param, `_max_train_rows` in a suite
# The fit keeps at least this share of time_s however long predicting will take.
MIN_FIT_SHARE = 0.1


@dataclass(frozen=True)
class RowCap:
    """A framework's rates, which turn a budget into the most rows it is fitted on."""

    framework: str
    # Rows x columns fitted per core and minute of the budget's time_s.
    cells_per_core_minute: float
    # The framework's peak memory, as a multiple of the in-memory size of the rows it is given.
    peak_memory_per_data: float
    # Test rows predicted per core and minute (one pass); None: predicting is quick beside fitting.
    predict_rows_per_core_minute: float | None = None

    def check(self, setting: Any) -> None:
        """Refuse a suite's `_max_train_rows` that is neither a positive number of rows nor 'all'."""
        if setting is None or setting == ALL_ROWS:
            return
        if isinstance(setting, bool) or not isinstance(setting, int) or setting <= 0:
            raise ValueError(f"{self.framework}'s param _{PARAM} is {setting!r}: give a positive number of "
                             f"rows, or '{ALL_ROWS}' for no cap")

    def fit_minutes(self, budget: Budget, task: TaskInfo | None) -> float:
        """Minutes of time_s the fit may take: what predicting the task's test part leaves of it
        (the worker asks a classifier for labels, then probabilities: two passes), never less
        than MIN_FIT_SHARE of it."""
        minutes = budget.time_s / 60
        if self.predict_rows_per_core_minute is None or task is None or not task.predict_rows:
            return minutes
        passes = 2 if task.is_classification else 1
        predicting = passes * task.predict_rows / (self.predict_rows_per_core_minute * budget.cores)
        return max(MIN_FIT_SHARE * minutes, minutes - predicting)

    def rows(self, X: pd.DataFrame, budget: Budget, setting: Any = None, task: TaskInfo | None = None
             ) -> int | None:
        """The most training rows the framework is fitted on within `budget`; None when all of X fits.

        `setting` is the suite's `_max_train_rows`: a positive number of rows, or 'all' for no cap.
        `task` says how many test rows the job predicts after the fit (fit_minutes).
        """
        self.check(setting)
        if setting == ALL_ROWS:
            return None
        if setting is not None:
            return setting if setting < len(X) else None
        cells_per_row = max(1, X.shape[1])
        by_time = self.cells_per_core_minute * budget.cores * self.fit_minutes(budget, task) / cells_per_row
        sample = X.head(1000)
        sample_bytes = float(sample.memory_usage(index=False, deep=True).sum())
        bytes_per_row = max(1.0, sample_bytes / max(1, len(sample)))
        by_memory = budget.memory_mb * 2**20 / (self.peak_memory_per_data * bytes_per_row)
        cap = int(min(by_time, by_memory))
        return cap if cap < len(X) else None

    def sample(
        self, X: pd.DataFrame, y: pd.Series, budget: Budget, params: dict[str, Any], seed: int,
        *, stratify: bool, task: TaskInfo | None = None,
    ) -> tuple[pd.DataFrame, pd.Series, Sampled | None]:
        """X and y as the framework is fitted on them: all rows, or a seeded sample within the cap.

        `params` are the adapter's params (split_params' first part). The sample's rows are copied,
        the whole X is not.
        """
        cap = self.rows(X, budget, params.get(PARAM), task)
        if cap is None:
            return X, y, None
        keep = sample_rows(y, cap, seed, stratify=stratify)
        return X.take(keep), y.take(keep), Sampled(len(keep), len(X), PARAM in params)


@dataclass(frozen=True)
class Sampled:
    """A fit on a sample: how many rows it used of how many it was given, and who chose the cap."""

    rows: int
    given: int
    by_suite: bool = False

    def sentence(self) -> str:
        """What the job's info says (its `sampled` entry), and the report's Notes repeat."""
        why = ("as the suite's _max_train_rows sets" if self.by_suite
               else "the most the budget allows (suite param _max_train_rows)")
        return (f"fitted on a random sample of {self.rows:,} of the {self.given:,} training rows, {why}; "
                "scored on the whole test part")


def sample_rows(y: pd.Series, rows: int, seed: int, *, stratify: bool) -> np.ndarray:
    """Sorted positions of `rows` rows drawn at random (seeded). Stratified: each class keeps its
    share, and at least one row, so no class the fold holds is unknown to the model."""
    rng = np.random.default_rng(seed)
    if not stratify:
        return np.sort(rng.choice(len(y), size=rows, replace=False))
    codes, _ = pd.factorize(y, sort=True)
    # Rows grouped by class, in random order within each class: take the first quota of each.
    order = np.lexsort((rng.random(len(y)), codes))
    counts = np.bincount(codes[codes >= 0])
    quotas = np.maximum(1, np.round(counts * rows / len(y)).astype(np.int64))
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    missing_label = int((codes < 0).sum())  # a missing label sorts first: never drawn
    chosen = [order[missing_label + start : missing_label + start + quota]
              for start, quota in zip(starts, quotas, strict=True)]
    return np.sort(np.concatenate(chosen))
