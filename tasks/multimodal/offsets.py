"""Clock offset of one stream against the reference, by cross-correlating a shared signal.

Both signals are interpolated onto one fine grid (the search step, 1 ms by default), normalised,
and cross-correlated with an FFT; the lag of the highest correlation within +-max_offset is the
offset. A stream whose clock reads `true time + offset` is corrected by subtracting it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tasks.multimodal.cards import SyncSpec
from tasks.multimodal.clock import TIME, CleanStream


@dataclass(frozen=True)
class OffsetEstimate:
    offset_s: float
    correlation: float  # normalised peak height, about a Pearson correlation


def sync_signal(stream: CleanStream, sync: SyncSpec) -> np.ndarray:
    """The stream's shared signal, one value per sample."""
    values = stream.frame[sync.columns].to_numpy(dtype=float)
    magnitude = np.linalg.norm(values, axis=1)
    if sync.signal == "magnitude":
        return magnitude
    # "change": how fast the magnitude moves; constant parts (gravity, sensor bias) drop out.
    return np.abs(np.gradient(magnitude, stream.frame[TIME].to_numpy()))


def _normalised(values: np.ndarray) -> np.ndarray:
    spread = values.std()
    return (values - values.mean()) / spread if spread > 0 else np.zeros_like(values)


def estimate_offset(
    ref_times: np.ndarray,
    ref_signal: np.ndarray,
    times: np.ndarray,
    signal: np.ndarray,
    *,
    max_offset_s: float,
    step_s: float,
) -> OffsetEstimate:
    """Lag (s) at which `signal` on its clock best matches `ref_signal` on the reference clock."""
    # Overlap of the two recordings allowing for the largest offset searched.
    start = max(ref_times[0], times[0] - max_offset_s)
    end = min(ref_times[-1], times[-1] + max_offset_s)
    if end - start <= 2 * step_s:
        return OffsetEstimate(0.0, 0.0)
    grid = np.arange(start - max_offset_s, end + max_offset_s, step_s)
    inside_ref = (grid >= ref_times[0]) & (grid <= ref_times[-1]) & (grid >= start) & (grid <= end)
    inside = (grid >= times[0]) & (grid <= times[-1])
    reference = np.where(inside_ref, np.interp(grid, ref_times, ref_signal), np.nan)
    other = np.where(inside, np.interp(grid, times, signal), np.nan)
    # Outside each recording the signal is unknown: zero after normalising, so it adds nothing.
    reference = np.nan_to_num(_normalised_known(reference))
    other = np.nan_to_num(_normalised_known(other))
    size = len(grid)
    nfft = 1 << int(np.ceil(np.log2(2 * size)))
    product = np.fft.rfft(other, nfft) * np.conj(np.fft.rfft(reference, nfft))
    correlation = np.fft.irfft(product, nfft)
    max_lag = min(int(round(max_offset_s / step_s)), size - 1)
    lags = np.concatenate([np.arange(0, max_lag + 1), np.arange(-max_lag, 0)])
    values = np.concatenate([correlation[: max_lag + 1], correlation[nfft - max_lag :]])
    best = int(np.argmax(values))
    overlap = max(int(np.count_nonzero(inside_ref)), 1)
    return OffsetEstimate(float(lags[best] * step_s), float(values[best] / overlap))


def _normalised_known(values: np.ndarray) -> np.ndarray:
    known = ~np.isnan(values)
    out = np.full_like(values, np.nan)
    if known.any():
        out[known] = _normalised(values[known])
    return out


def residual_skews(
    ref_times: np.ndarray,
    ref_signal: np.ndarray,
    corrected_times: np.ndarray,
    signal: np.ndarray,
    *,
    blocks: int,
    search_s: float,
    step_s: float,
    min_correlation: float,
) -> list[float]:
    """Lag left after correction, re-measured in `blocks` consecutive parts of the overlap (s).

    One offset cannot fix a clock that drifts or a wrong estimate; each block then shows its own
    lag. Blocks whose correlation is too weak to measure anything are left out.
    """
    start = max(ref_times[0], corrected_times[0])
    end = min(ref_times[-1], corrected_times[-1])
    edges = np.linspace(start, end, blocks + 1)
    residuals: list[float] = []
    for low, high in zip(edges[:-1], edges[1:], strict=True):
        in_ref = (ref_times >= low) & (ref_times <= high)
        in_stream = (corrected_times >= low - search_s) & (corrected_times <= high + search_s)
        if in_ref.sum() < 3 or in_stream.sum() < 3:
            continue
        estimate = estimate_offset(
            ref_times[in_ref],
            ref_signal[in_ref],
            corrected_times[in_stream],
            signal[in_stream],
            max_offset_s=search_s,
            step_s=step_s,
        )
        if estimate.correlation >= min_correlation:
            residuals.append(estimate.offset_s)
    return residuals
