"""The forecasting track's arithmetic and gate: M4's metrics against values worked out by hand,
Naive2 against its definition, the folds' windows, and the gate's refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from jobs_support.tiny_project import FORECAST_HORIZON, forecasting_frame, make_forecasting_project

from tasks.data.folds import load_folds, split
from tasks.data.validate import validate_dataset
from tasks.forecasting.baselines import is_seasonal, naive2, seasonal_naive
from tasks.metrics import score_forecasts
from tasks.vocabulary import RESULT


def test_metrics_equal_hand_computed_values() -> None:
    # Series a: history 1..4 (m = 1: the in-sample naive error is 1); truth 5, 6; forecast 4, 8.
    # Series b: history 10, 12, 10, 12 (in-sample naive error 2); truth 10, 10; forecast 10, 11.
    # Naive2 with m = 1 is the last value: 4, 4 and 12, 12.
    series = ["a", "a", "b", "b"]
    actual = np.array([5.0, 6.0, 10.0, 10.0])
    forecast = np.array([4.0, 8.0, 10.0, 11.0])
    reference = np.array([4.0, 4.0, 12.0, 12.0])
    histories = {"a": np.array([1.0, 2, 3, 4]), "b": np.array([10.0, 12, 10, 12])}
    quantiles = pd.DataFrame({"q0.1": [4.5, 5.0, 9.0, 10.5], "q0.9": [5.5, 7.0, 11.0, 12.0]})

    scores = score_forecasts("owa", series, actual, forecast, reference, histories, 1, quantiles)

    smape_a, smape_b = 200 / 2 * (1 / 9 + 2 / 14), 200 / 2 * (0 / 20 + 1 / 21)
    mase_a, mase_b = ((1 + 2) / 2) / 1, ((0 + 1) / 2) / 2
    smape_n2 = (200 / 2 * (1 / 9 + 2 / 10) + 200 / 2 * (2 / 22 + 2 / 22)) / 2
    mase_n2 = ((1 + 2) / 2 / 1 + (2 + 2) / 2 / 2) / 2
    smape_mean, mase_mean = (smape_a + smape_b) / 2, (mase_a + mase_b) / 2
    assert scores["smape"] == pytest.approx(smape_mean)
    assert scores["mase"] == pytest.approx(mase_mean)
    assert scores["smape_naive2"] == pytest.approx(smape_n2)
    assert scores["mase_naive2"] == pytest.approx(mase_n2)
    assert scores["owa"] == pytest.approx(0.5 * (smape_mean / smape_n2 + mase_mean / mase_n2))
    assert scores[RESULT] == -scores["owa"]
    # Inside [q0.1, q0.9]: 5 in [4.5, 5.5], 6 in [5, 7], 10 in [9, 11]; 10 is below [10.5, 12].
    assert scores["coverage"] == pytest.approx(3 / 4)
    # Pinball: level 0.1 errors (y - q) 0.5, 1, 1, -0.5 -> 0.05 + 0.1 + 0.1 + 0.45 = 0.7;
    # level 0.9 errors -0.5, -1, -1, -2 -> 0.05 + 0.1 + 0.1 + 0.2 = 0.45; sum |y| = 31.
    assert scores["quantile_loss"] == pytest.approx((2 * 0.7 / 31 + 2 * 0.45 / 31) / 2)


def test_smape_of_zero_truth_and_forecast_is_zero_and_seasonal_mase_uses_the_period() -> None:
    scores = score_forecasts("owa", ["a", "a"], np.array([0.0, 4.0]), np.array([0.0, 2.0]),
                             np.array([1.0, 1.0]), {"a": np.array([1.0, 3.0, 2.0, 5.0])}, 2)
    assert scores["smape"] == pytest.approx(200 / 2 * (0 + 2 / 6))
    assert scores["mase"] == pytest.approx(((0 + 2) / 2) / ((1 + 2) / 2))  # |2-1|, |5-3|


def test_naive2_follows_m4s_definition() -> None:
    index = np.array([0.8, 1.2, 1.1, 0.9])
    seasonal = 100 * np.tile(index, 6)  # a constant level times a multiplicative season, 6 years
    assert is_seasonal(seasonal, 4)
    # The decomposition recovers the season exactly: Naive2 repeats the last season's shape.
    np.testing.assert_allclose(naive2(seasonal, 6, 4), seasonal_naive(seasonal, 6, 4))
    noise = np.random.default_rng(0).normal(100, 1, size=24)
    assert not is_seasonal(noise, 4)  # no seasonality: Naive2 is the naive forecast
    np.testing.assert_allclose(naive2(noise, 3, 4), [noise[-1]] * 3)
    assert not is_seasonal(seasonal[:11], 4)  # under three seasons: never called seasonal


def test_folds_are_the_last_horizons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path))
    spec = make_forecasting_project(tmp_path, windows=2)
    frame = pd.read_csv(spec.path)
    assignment = load_folds(spec)
    for fold in (0, 1):
        train, test = split(spec, fold)
        assert len(test) == 3 * FORECAST_HORIZON
        for _, rows in frame.iloc[test].groupby("series"):
            # Fold k tests the k-th horizon from the end; it trains on everything before it, only.
            series = frame[frame["series"] == rows["series"].iloc[0]]
            end = len(series) - fold * FORECAST_HORIZON
            assert list(rows["month"]) == list(series["month"].iloc[end - FORECAST_HORIZON:end])
        assert frame.iloc[train].groupby("series")["month"].max().max() < frame.iloc[test]["month"].min()
    assert sorted(set(assignment)) == [-1, 0, 1]


def _broken(kind: str) -> pd.DataFrame:
    frame = forecasting_frame()
    if kind == "irregular":
        return frame.drop(index=frame.index[(frame["series"] == "s1")][10])  # a month missing
    if kind == "short":
        return frame.drop(index=frame.index[(frame["series"] == "s2")][10:])  # 10 < 6 + 12
    return pd.concat([frame, frame.iloc[[5]]]).sort_values(["series", "month"], kind="stable")


@pytest.mark.parametrize(("kind", "words"), [
    ("irregular", ["column 'month' is not regular at frequency MS", "'s1' has 2015-12-01 where 2015-11-01"]),
    ("short", ["column 'series' has 1 series shorter than 18", "'s2' has 10"]),
    ("duplicate", ["column 'month' repeats 1 (series, timestamp) pairs", "'s0' at 2015-06-01"]),
])
def test_gate_refuses_irregular_short_and_duplicated_series(
    kind: str, words: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path))
    spec = make_forecasting_project(tmp_path, frame=_broken(kind))
    outcome = validate_dataset(spec)
    assert not outcome.ok
    matching = [sentence for sentence in outcome.failures if words[0] in sentence]
    assert len(matching) == 1 and all(word in matching[0] for word in words), outcome.failures
    assert matching[0].startswith("tiny_forecasting: ")


def test_gate_passes_a_clean_collection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path))
    outcome = validate_dataset(make_forecasting_project(tmp_path))
    assert outcome.ok, outcome.failures
