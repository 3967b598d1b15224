"""HistGradientBoosting that stops boosting when its fit's time is spent (the hgb baseline's model).

Its own module, importing scikit-learn at the top: the classes must be importable by name for a
saved model to load, while tasks/frameworks/hgb.py imports scikit-learn only when it fits.
"""

from __future__ import annotations

import time
from typing import Any

from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

# The mixin's base: what both HGB estimators share, so that its calls of get_params, set_params, fit and
# the early-stopping checks resolve (to the next class in each estimator's MRO, as before).
from sklearn.ensemble._hist_gradient_boosting.gradient_boosting import BaseHistGradientBoosting

AUTO_EARLY_STOPPING_ROWS = 10_000  # HGB's early_stopping="auto" turns it on above this many rows


class _StopsWhenTimeIsUp(BaseHistGradientBoosting):
    """HistGradientBoosting has no time limit of its own, and its time grows with the rows: at
    10 M rows the default 100 rounds take minutes. Its early-stopping check runs after every
    round (on a validation split, above 10 000 rows); the limit is checked there too, so the
    model keeps every round finished in time. A fit without early stopping has those checks
    turned on with nothing else changed (see fit): wide data (pixels) is slow at fewer rows too.
    (Those checks are private methods, the same from scikit-learn 0.21 to 1.9;
    tests/unit/test_hgb_adapter.py fails if a release renames them.)

    `fit_time_limit_s` is seconds from the start of `fit`; None means no limit."""

    fit_time_limit_s: float | None = None
    _deadline: float | None = None

    def fit(self, X: Any, *args: Any, **kwargs: Any) -> Any:
        limit = self.fit_time_limit_s
        self._deadline = None if limit is None else time.monotonic() + limit
        self.stopped_by_time_ = False
        given = self.get_params(deep=False)
        if limit is not None and not self._checks_every_round(X):
            # Without early stopping (at most 10 000 rows by default) HGB calls no check at all and
            # the limit would never be looked at. Turn the checks on with the same model: scored on
            # the training loss (no validation split taken), never stopping for want of improvement.
            self.set_params(
                early_stopping=True, validation_fraction=None, scoring="loss",
                n_iter_no_change=int(given["max_iter"]) + 1)
        try:
            return super().fit(X, *args, **kwargs)
        finally:
            self._deadline = None
            self.set_params(**given)

    def _checks_every_round(self, X: Any) -> bool:
        """Whether this fit runs HGB's early-stopping check after each round, as its fit decides."""
        early_stopping = getattr(self, "early_stopping", "auto")
        return len(X) > AUTO_EARLY_STOPPING_ROWS if early_stopping == "auto" else bool(early_stopping)

    def stopped_by_time(self) -> bool:
        """Whether the last fit ended because its time was spent (not its rounds, nor early stopping)."""
        return bool(getattr(self, "stopped_by_time_", False))

    def _time_is_up(self) -> bool:
        up = self._deadline is not None and time.monotonic() >= self._deadline
        self.stopped_by_time_ = up
        return up

    def _check_early_stopping_loss(self, *args: Any, **kwargs: Any) -> bool:
        return super()._check_early_stopping_loss(*args, **kwargs) or self._time_is_up()

    def _check_early_stopping_scorer(self, *args: Any, **kwargs: Any) -> bool:
        return super()._check_early_stopping_scorer(*args, **kwargs) or self._time_is_up()


class TimedHistGradientBoostingClassifier(_StopsWhenTimeIsUp, HistGradientBoostingClassifier):
    pass


class TimedHistGradientBoostingRegressor(_StopsWhenTimeIsUp, HistGradientBoostingRegressor):
    pass
