"""The in-process single-row latency is bounded: at most `calls` calls, or `max_s` seconds."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from tasks.errors import UserError
from tasks.jobs import LATENCY_MAX_S_ENV, _latency_setting
from tasks.worker import _latencies_ms


class _Model:
    def __init__(self, sleep_s: float) -> None:
        self.sleep_s = sleep_s
        self.rows: list[int] = []

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        self.rows.append(len(X))
        time.sleep(self.sleep_s)
        return np.zeros(len(X))


def test_a_fast_model_gets_every_call_on_single_rows() -> None:
    model = _Model(0.0)
    latencies = _latencies_ms(model, pd.DataFrame({"x": range(7)}), calls=100, max_s=60)
    assert len(latencies) == 100 and set(model.rows) == {1}


def test_a_slow_model_stops_at_the_time_bound() -> None:
    model = _Model(0.05)
    latencies = _latencies_ms(model, pd.DataFrame({"x": range(7)}), calls=100, max_s=0.2)
    assert 1 <= len(latencies) < 100  # stopped by time, not by the call count
    assert len(_latencies_ms(_Model(0.05), pd.DataFrame({"x": [1]}), calls=100, max_s=0)) == 1


def test_the_bounds_are_configurable_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _latency_setting(LATENCY_MAX_S_ENV, 3.0) == 3.0
    monkeypatch.setenv(LATENCY_MAX_S_ENV, "10")
    assert _latency_setting(LATENCY_MAX_S_ENV, 3.0) == 10.0
    monkeypatch.setenv(LATENCY_MAX_S_ENV, "soon")
    with pytest.raises(UserError, match="AUTOML_EVAL_LATENCY_MAX_S='soon' is not a positive number"):
        _latency_setting(LATENCY_MAX_S_ENV, 3.0)
