"""Job time series: DTW recovers a known stretch and a higher peak; the watchdog's series is saved."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tasks.report.series import align, describe, stage_figures
from tasks.resources import SERIES_STAGE, SERIES_TIME, SampleSeries, series_frame

STEP_S = 0.25


def _job(fit_points: int, fit_peak: float, *, seed: int = 0) -> pd.DataFrame:
    """Resource samples of a job: load (flat), fit (RSS ramps to a peak, CPU busy), predict, save."""
    rng = np.random.default_rng(seed)
    phases = [
        ("loading data", np.full(16, 200.0), np.full(16, 90.0)),
        ("fitting", np.linspace(220.0, fit_peak, fit_points), np.full(fit_points, 380.0)),
        ("predicting", np.full(12, 260.0), np.full(12, 100.0)),
        ("saving", np.full(10, 240.0), np.full(10, 40.0)),
    ]
    rss = np.concatenate([p[1] for p in phases]) + rng.normal(0, 1.0, sum(len(p[1]) for p in phases))
    cpu = np.concatenate([p[2] for p in phases])
    stages = [name for name, values, _ in phases for _ in values]
    return pd.DataFrame(
        {SERIES_TIME: np.arange(len(rss)) * STEP_S, SERIES_STAGE: stages, "rss_mb": rss, "cpu_pct": cpu}
    )


def test_dtw_recovers_the_stretched_phase_and_the_higher_peak() -> None:
    base = _job(fit_points=40, fit_peak=500.0)
    # The candidate fits 1.6x longer and peaks 38% higher; its stage labels are not used.
    cand = _job(fit_points=64, fit_peak=690.0, seed=1).drop(columns=[SERIES_STAGE])
    alignment = align(base, cand, ("rss_mb", "cpu_pct"))
    assert alignment is not None
    stages = {s.stage: s for s in alignment.stages}
    assert stages["fitting"].stretch == pytest.approx(1.6, abs=0.1)
    for other in ("loading data", "predicting", "saving"):
        assert stages[other].stretch == pytest.approx(1.0, abs=0.25), other
    assert stages["fitting"].peak_ratio == pytest.approx(1.38, abs=0.03)
    text = describe(alignment)
    assert "peak RSS +38% during fitting" in text and "fitting 1.6x longer" in text and "DTW" in text


def test_alike_series_are_described_as_alike() -> None:
    alignment = align(_job(40, 500.0), _job(40, 500.0, seed=2), ("rss_mb", "cpu_pct"))
    assert alignment is not None
    assert all(s.stretch == pytest.approx(1.0, abs=0.2) for s in alignment.stages)
    assert "alike" in describe(alignment)


def test_stage_figures_give_each_stage_its_duration_and_peak() -> None:
    figures = stage_figures(_job(40, 500.0))
    assert figures["fitting: duration_s"] == pytest.approx(40 * STEP_S)
    assert figures["fitting: peak_rss_mb"] == pytest.approx(500.0, abs=5)
    assert figures["loading data: duration_s"] == pytest.approx(16 * STEP_S)


def test_series_frame_labels_samples_with_the_stage_they_fell_in() -> None:
    launched = 1000.0
    tree = [(launched + 0.5 * k, 100.0 + k, 0.4 * k) for k in range(1, 9)]  # CPU: 0.4 s per 0.5 s
    gpu = [(launched + 0.5 * k + 0.1, 50.0, 800.0) for k in range(1, 9)]
    stages = {"worker started": launched + 0.2, "fitting": launched + 2.0, "done": launched + 3.6}
    frame = series_frame(tree, gpu, stages, launched)
    gpu_columns = ["gpu_util_pct", "gpu_mem_mb"]
    assert list(frame.columns) == [SERIES_TIME, SERIES_STAGE, "rss_mb", "cpu_pct", *gpu_columns]
    assert frame[SERIES_TIME].tolist()[0] == pytest.approx(0.5)
    assert frame[SERIES_STAGE].tolist() == ["worker started"] * 3 + ["fitting"] * 4 + ["done"]
    assert frame["cpu_pct"].iloc[1:].tolist() == pytest.approx([80.0] * 7)
    without_gpu = series_frame(tree, [], stages, launched)
    assert "gpu_util_pct" not in without_gpu


def test_a_long_job_keeps_a_small_evenly_spaced_series(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tasks.resources.MAX_SERIES_SAMPLES", 100)
    series = SampleSeries()
    for k in range(1000):
        series.add((float(k), 0.0, 0.0))
    times = [sample[0] for sample in series.samples]
    assert len(times) <= 100
    assert len(set(np.diff(times))) == 1  # evenly spaced
