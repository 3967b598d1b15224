"""The M4 benchmarks every forecast is measured against: seasonal naive and Naive2.

Both are functions of one series (its training values, oldest first); the `seasonal_naive` and
`naive2` adapters run them per series, and the harness runs Naive2 itself on each fold to make OWA
(tasks/forecasting/scoring.py), so OWA never depends on a Naive2 job having run.

Naive2 (Makridakis et al., the M4 competition guide, 2018): the series is seasonally adjusted with
a classical multiplicative decomposition when a seasonality test at 90% says it is seasonal, a
naive forecast (the last adjusted value) is made, and the seasonal indices are put back. The test:
a series of at least three seasons is seasonal when its autocorrelation at lag m exceeds
1.645 * sqrt((1 + 2 * sum_{k<m} r_k^2) / n).
"""

from __future__ import annotations

import numpy as np

# 1.645: the one-sided 95% (two-sided 90%) normal quantile of M4's seasonality test.
SEASONALITY_CRITICAL = 1.645


def seasonal_naive(history: np.ndarray, horizon: int, season_length: int) -> np.ndarray:
    """Each step repeats the value one season earlier (the last value when season_length is 1)."""
    m = min(season_length, len(history))
    last_season = history[-m:]
    return np.asarray([last_season[step % m] for step in range(horizon)], dtype=float)


def is_seasonal(history: np.ndarray, season_length: int) -> bool:
    """M4's 90% autocorrelation test; too short a series (under three seasons) is not seasonal."""
    from statsmodels.tsa.stattools import acf

    m, n = season_length, len(history)
    if m <= 1 or n < 3 * m or np.ptp(history) == 0:
        return False
    r = acf(history, nlags=m, fft=False)
    limit = SEASONALITY_CRITICAL * np.sqrt((1 + 2 * np.sum(r[1:m] ** 2)) / n)
    return bool(abs(r[m]) > limit)


def seasonal_indices(history: np.ndarray, season_length: int) -> np.ndarray:
    """Multiplicative seasonal index of every position in the cycle (position t % m), mean 1;
    all ones when the series is not seasonal."""
    from statsmodels.tsa.seasonal import seasonal_decompose

    m = season_length
    # A multiplicative decomposition needs positive values; such a series is left unadjusted.
    if not is_seasonal(history, m) or np.any(history <= 0):
        return np.ones(max(m, 1))
    seasonal = seasonal_decompose(history, model="multiplicative", period=m, two_sided=True).seasonal
    return np.asarray(seasonal[:m], dtype=float)  # periodic: seasonal[t] == index[t % m]


def naive2(history: np.ndarray, horizon: int, season_length: int) -> np.ndarray:
    """Seasonally adjusted naive: the last adjusted value, re-seasonalised for each step ahead."""
    index = seasonal_indices(history, season_length)
    m, n = len(index), len(history)
    last_adjusted = history[-1] / index[(n - 1) % m]
    return np.asarray([last_adjusted * index[(n + step) % m] for step in range(horizon)], dtype=float)
