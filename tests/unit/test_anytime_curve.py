"""tasks/anytime.py on hand-made candidates: the pick by validation over time, scored by the harness
on the test fold, the last point the returned model at the end of the fit, and t95/t99."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tasks.anytime import series, time_to_share
from tasks.frameworks.capabilities import AnytimeCandidate
from tasks.vocabulary import RESULT

X = pd.DataFrame({"x": np.arange(10.0)})
Y = pd.Series(np.arange(10.0))


def _candidate(name: str, ready_s: float, validation: float | None, error: float,
               final: bool = False) -> AnytimeCandidate:
    return AnytimeCandidate(name, ready_s, validation, lambda X_: X_["x"].to_numpy() + error, None, final)


def test_the_pick_changes_only_on_a_better_validation_and_ends_at_the_returned_model() -> None:
    candidates = [
        _candidate("c", 5.0, 0.5, error=0.5),  # worse by validation than b: never picked
        _candidate("a", 1.0, 0.1, error=4.0),
        _candidate("b", 3.0, 0.9, error=1.0),
        _candidate("ens", 6.0, 0.95, error=0.25, final=True),
        _candidate("unknown", 2.0, None, error=0.0),  # no validation: the framework could not pick it
    ]
    curve = series(candidates, 8.0, X, Y, "regression", "rmse", [])
    assert list(curve["model"]) == ["a", "b", "ens", "ens"]
    assert list(curve["elapsed_s"]) == [1.0, 3.0, 6.0, 8.0]
    assert list(curve[RESULT]) == pytest.approx([-4.0, -1.0, -0.25, -0.25])  # -RMSE, higher is better
    # Gain -4 -> -0.25 = 3.75; 95% of it is reached at -0.4375 or better: only by "ens" at 6 s.
    assert time_to_share(curve) == {"anytime_t95_s": 6.0, "anytime_t99_s": 6.0}


def test_a_flat_curve_reaches_its_share_at_the_first_point() -> None:
    curve = pd.DataFrame({"elapsed_s": [2.0, 9.0], "model": ["m", "m"], RESULT: [0.8, 0.8]})
    assert time_to_share(curve) == {"anytime_t95_s": 2.0, "anytime_t99_s": 2.0}
    assert time_to_share(curve.iloc[0:0]) == {}


def test_scoring_stops_before_a_candidate_whose_refit_would_overrun_and_ends_at_the_returned_model() -> None:
    asked: list[str] = []

    def candidate(name: str, ready_s: float, validation: float, cost_s: float,
                  final: bool = False) -> AnytimeCandidate:
        def predict(X_: pd.DataFrame) -> np.ndarray:
            asked.append(name)
            return X_["x"].to_numpy() + ready_s
        return AnytimeCandidate(name, ready_s, validation, predict, None, final, source=f"from {name}",
                                cost_s=cost_s)

    candidates = [candidate("cheap", 1.0, 0.1, 0.0), candidate("slow refit", 2.0, 0.5, 100.0),
                  candidate("returned", 3.0, 0.9, 0.0, final=True)]
    curve = series(candidates, 5.0, X, Y, "regression", "rmse", [], max_s=10.0)
    assert list(curve["model"]) == ["cheap", "returned"] and "slow refit" not in asked
    assert list(curve["elapsed_s"]) == [1.0, 5.0]
    assert list(curve["source"]) == ["from cheap", "from returned"]
