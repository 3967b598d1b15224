"""HistGradientBoosting that stops boosting when its fit's time is spent (the hgb baseline's model).

Its own module, importing scikit-learn at the top: the classes must be importable by name for a
saved model to load, while tasks/frameworks/hgb.py imports scikit-learn only when it fits.
"""

from __future__ import annotations

import time
from typing import Any

from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor


class _StopsWhenTimeIsUp:
    """HistGradientBoosting has no time limit of its own, and its time grows with the rows: at
    10 M rows the default 100 rounds take minutes. Its early-stopping check runs after every
    round (on a validation split, above 10 000 rows, where the time matters); the limit is
    checked there too, so the model keeps every round finished in time. (Those checks are
    private methods, the same from scikit-learn 0.21 to 1.9; tests/unit/test_hgb_adapter.py fails
    if a release renames them.)

    `fit_time_limit_s` is seconds from the start of `fit`; None means no limit."""

    fit_time_limit_s: float | None = None
    _deadline: float | None = None

    def fit(self, *args: Any, **kwargs: Any) -> Any:
        limit = self.fit_time_limit_s
        self._deadline = None if limit is None else time.monotonic() + limit
        self.stopped_by_time_ = False
        try:
            return super().fit(*args, **kwargs)  # type: ignore[misc]
        finally:
            self._deadline = None

    def stopped_by_time(self) -> bool:
        """Whether the last fit ended because its time was spent (not its rounds, nor early stopping)."""
        return bool(getattr(self, "stopped_by_time_", False))

    def _time_is_up(self) -> bool:
        up = self._deadline is not None and time.monotonic() >= self._deadline
        self.stopped_by_time_ = up
        return up

    def _check_early_stopping_loss(self, *args: Any, **kwargs: Any) -> bool:
        return super()._check_early_stopping_loss(*args, **kwargs) or self._time_is_up()  # type: ignore[misc]

    def _check_early_stopping_scorer(self, *args: Any, **kwargs: Any) -> bool:
        return super()._check_early_stopping_scorer(*args, **kwargs) or self._time_is_up()  # type: ignore[misc]


class TimedHistGradientBoostingClassifier(_StopsWhenTimeIsUp, HistGradientBoostingClassifier):
    pass


class TimedHistGradientBoostingRegressor(_StopsWhenTimeIsUp, HistGradientBoostingRegressor):
    pass
