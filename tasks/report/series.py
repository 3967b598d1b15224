"""A job's time series (resource samples, training curves): per-stage figures and DTW alignment.

Two jobs of the same cell rarely run in lockstep: one loads data a little slower, the next fits
1.6x longer. Dynamic time warping (aeon.distances) aligns the baseline's series with the
candidate's, and the warping path says where they part: for each stage of the baseline's job
(loading data, fitting, predicting, saving), how many candidate samples it took (the stretch) and
how high the candidate went (the peak). The candidate's own stage labels are not needed for that,
so the same alignment serves series without a timeline (a framework's validation curve).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tasks.resources import SERIES_STAGE, SERIES_TIME

MAX_POINTS = 400  # DTW is O(n * m): longer series are resampled onto a coarser common grid
WHOLE_RUN = "the whole run"  # the stage of series that have no timeline
# Labels for the description ("peak RSS +38% during fitting").
LABELS = {
    "rss_mb": "RSS",
    "cpu_pct": "CPU",
    "gpu_util_pct": "GPU utilisation",
    "gpu_mem_mb": "GPU memory",
    "validation_loss": "validation loss",
}


@dataclass(frozen=True)
class StageDivergence:
    """How the candidate's series differs from the baseline's over one stage of the baseline's job."""

    stage: str
    stretch: float  # candidate samples aligned to the stage / baseline samples in it (1.6 = 1.6x longer)
    peak_ratio: float  # candidate's peak over the aligned samples / the baseline's peak in the stage
    cost_share: float  # share of the DTW cost spent in this stage


@dataclass(frozen=True)
class Alignment:
    """A DTW alignment of one baseline series with one candidate series on a common time grid."""

    column: str  # the series the peaks are read from (the first of the aligned columns)
    distance: float  # aeon's DTW distance of the two series, each column scaled by the baseline's mean
    path: list[tuple[int, int]]
    base: np.ndarray
    cand: np.ndarray
    base_stages: list[str]
    step_s: float  # seconds per grid point (or evaluations per point for a curve)
    stages: list[StageDivergence]

    @property
    def label(self) -> str:
        return LABELS.get(self.column, self.column)


# ---------------------------------------------------------------- per-stage figures of one run


def stage_figures(samples: pd.DataFrame) -> dict[str, float]:
    """`STAGE: duration_s` and `STAGE: peak_rss_mb` for each stage of one job's resource samples.

    A stage lasts from its first sample to the next stage's first sample (the sampling interval
    is the resolution); the last stage ends at the last sample.
    """
    if samples.empty or SERIES_STAGE not in samples or SERIES_TIME not in samples:
        return {}
    times = samples[SERIES_TIME].to_numpy(dtype=float)
    stages = samples[SERIES_STAGE].astype(str).to_numpy()
    starts = [0] + [i for i in range(1, len(stages)) if stages[i] != stages[i - 1]]
    figures: dict[str, float] = {}
    for position, start in enumerate(starts):
        end = starts[position + 1] if position + 1 < len(starts) else len(stages)
        stop_time = times[end] if end < len(times) else times[-1]
        stage = stages[start]
        figures[f"{stage}: duration_s"] = figures.get(f"{stage}: duration_s", 0.0) + float(
            stop_time - times[start]
        )
        if "rss_mb" in samples:
            peak = float(samples["rss_mb"].iloc[start:end].max())
            figures[f"{stage}: peak_rss_mb"] = max(figures.get(f"{stage}: peak_rss_mb", 0.0), peak)
    return figures


# ---------------------------------------------------------------- alignment


def _on_grid(samples: pd.DataFrame, column: str, step: float) -> tuple[np.ndarray, list[str]]:
    """The column resampled every `step` seconds, and the stage of each grid point."""
    times = samples[SERIES_TIME].to_numpy(dtype=float)
    values = samples[column].to_numpy(dtype=float)
    grid = np.arange(times[0], times[-1] + step / 2, step)
    stages = (
        samples[SERIES_STAGE].astype(str).to_numpy()
        if SERIES_STAGE in samples
        else np.full(len(times), WHOLE_RUN)
    )
    previous = np.clip(np.searchsorted(times, grid, side="right") - 1, 0, len(times) - 1)
    return np.interp(grid, times, values), [str(stages[i]) for i in previous]


def usable(samples: pd.DataFrame | None, column: str) -> bool:
    if samples is None or column not in samples or SERIES_TIME not in samples:
        return False
    finite = samples[[SERIES_TIME, column]].dropna()
    return len(finite) >= 2 and finite[SERIES_TIME].is_monotonic_increasing


def align(
    base_samples: pd.DataFrame, cand_samples: pd.DataFrame, columns: tuple[str, ...]
) -> Alignment | None:
    """Align two runs' series with DTW over `columns` together (RSS and CPU: a phase flat in one is
    rarely flat in both); None when the first column has too few samples on either side."""
    from aeon.distances import dtw_alignment_path

    column = columns[0]
    if not (usable(base_samples, column) and usable(cand_samples, column)):
        return None
    columns = tuple(c for c in columns if usable(base_samples, c) and usable(cand_samples, c))
    base_samples = base_samples.dropna(subset=[SERIES_TIME, *columns])
    cand_samples = cand_samples.dropna(subset=[SERIES_TIME, *columns])
    span = max(
        float(frame[SERIES_TIME].iloc[-1] - frame[SERIES_TIME].iloc[0])
        for frame in (base_samples, cand_samples)
    )
    natural = float(np.median(np.diff(base_samples[SERIES_TIME].to_numpy(dtype=float))))
    step = max(natural, span / MAX_POINTS) if natural > 0 else max(span / MAX_POINTS, 1e-9)
    base_channels, cand_channels = [], []
    for name in columns:
        base_values, base_stages = _on_grid(base_samples, name, step)
        cand_values, _ = _on_grid(cand_samples, name, step)
        channel_scale = float(np.mean(np.abs(base_values))) or 1.0  # unitless: MB and % weigh alike
        base_channels.append(base_values / channel_scale)
        cand_channels.append(cand_values / channel_scale)
    base, base_stages = _on_grid(base_samples, column, step)
    cand, _ = _on_grid(cand_samples, column, step)
    scale = float(np.mean(np.abs(base))) or 1.0
    path, distance = dtw_alignment_path(np.vstack(base_channels), np.vstack(cand_channels))
    return Alignment(
        column=column,
        distance=float(distance),
        path=[(int(i), int(j)) for i, j in path],
        base=base,
        cand=cand,
        base_stages=base_stages,
        step_s=step,
        stages=_divergences(base, cand, base_stages, path, scale),
    )


def _divergences(
    base: np.ndarray, cand: np.ndarray, base_stages: list[str], path: list[tuple[int, int]], scale: float
) -> list[StageDivergence]:
    order = list(dict.fromkeys(base_stages))  # stages in the order the job went through them
    matched: dict[str, set[int]] = {stage: set() for stage in order}
    cost: dict[str, float] = dict.fromkeys(order, 0.0)
    for i, j in path:
        stage = base_stages[i]
        matched[stage].add(j)
        cost[stage] += ((base[i] - cand[j]) / scale) ** 2
    total = sum(cost.values())
    stages = []
    for stage in order:
        own = [i for i, s in enumerate(base_stages) if s == stage]
        base_peak = float(base[own].max())
        cand_peak = float(cand[sorted(matched[stage])].max())
        stages.append(
            StageDivergence(
                stage=stage,
                stretch=len(matched[stage]) / len(own),
                peak_ratio=cand_peak / base_peak if base_peak else float("nan"),
                cost_share=cost[stage] / total if total else 0.0,
            )
        )
    return stages


def describe(alignment: Alignment, notable: float = 0.25) -> str:
    """'peak RSS +38% during fitting; fitting 1.6x longer (DTW 0.42)': changes beyond `notable`."""
    parts = []
    peaks = [s for s in alignment.stages if np.isfinite(s.peak_ratio) and abs(s.peak_ratio - 1) >= notable]
    if peaks:
        top = max(peaks, key=lambda s: abs(s.peak_ratio - 1))
        parts.append(f"peak {alignment.label} {100 * (top.peak_ratio - 1):+.0f}% during {top.stage}")
    # A stage of one or two grid points cannot say it got longer: its stretch is mostly the warping.
    stretched = [
        s
        for s in alignment.stages
        if alignment.base_stages.count(s.stage) >= 3 and abs(np.log(s.stretch)) >= np.log1p(notable)
    ]
    if stretched:
        top = max(stretched, key=lambda s: abs(np.log(s.stretch)))
        how = f"{top.stretch:.1f}x longer" if top.stretch > 1 else f"{1 / top.stretch:.1f}x shorter"
        parts.append(f"{top.stage} {how}")
    if not parts:
        worst = max(alignment.stages, key=lambda s: s.cost_share)
        parts.append(f"{alignment.label} alike (most of the difference during {worst.stage})")
    return "; ".join(parts) + f" (DTW {alignment.distance:.3g})"
