"""Put a multimodal dataset's streams on one clock and window them into the table frameworks use.

Steps, each counted in the alignment report (datasets/NAME.alignment.json):
1. read each stream on its own clock; drop duplicated samples, count gaps;
2. estimate each stream's clock offset against the reference stream by cross-correlating a
   shared signal, and subtract it;
3. measure the residual skew that is left, block by block, against the tolerance (+-10 ms);
4. join all streams on a common grid, nearest sample within an explicit join tolerance; grid rows
   where a stream has no sample close enough are dropped and counted against that stream;
5. cut windows, compute per-window features per stream column, label each window from the
   label track; windows without enough rows or one clear label are dropped and counted;
6. save the table as the card's `file`, plus its folds.

A residual over the tolerance, a shared signal too weak to estimate an offset, or too little
coverage fails the gate: the report says why and no table is written, like a failed data gate.
This module is plain Python; the benchmark flow wraps `align_dataset` as a Prefect task.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.data import load
from tasks.data.materialize import canonical_csv, save_folds, write_if_changed
from tasks.errors import UserError
from tasks.multimodal.cards import FEATURE_SEPARATOR, MultimodalCard, labels_path, multimodal_card
from tasks.multimodal.clock import TIME, CleanStream, read_stream
from tasks.multimodal.combinations import split_name
from tasks.multimodal.offsets import estimate_offset, residual_skews, sync_signal
from tasks.multimodal.windows import SEGMENT, WINDOW_START, window_table
from tasks.specs import DatasetSpec, load_dataset_spec

REPORT_SUFFIX = ".alignment.json"
# The residual is re-measured within this many tolerances either side of zero (and >= 100 ms).
_RESIDUAL_SEARCH_TOLERANCES = 20


@dataclass
class StreamAlignment:
    modality: str
    rate_hz: float
    raw_samples: int
    duplicates_dropped: int  # same timestamp written twice
    missing_samples: int  # implied by gaps in the stream's clock
    offset_ms: float  # estimated clock offset, subtracted (0 for the reference)
    correlation: float  # strength of the shared-signal match behind the estimate
    residual_mean_ms: float  # mean |lag| left after correction, over the measured blocks
    residual_max_ms: float
    residual_blocks: int  # blocks where the residual could be measured
    outside_span_dropped: int  # samples before/after the span all streams cover
    unmatched_grid_rows: int  # grid rows with no sample of this stream within the join tolerance
    coverage: float  # share of the common grid this stream has a sample for
    dropped_share: float  # share of this stream's raw samples that reach no aligned row
    join_distance_mean_ms: float  # |grid time - matched sample time| of the joined rows
    join_distance_max_ms: float


@dataclass
class AlignmentReport:
    dataset: str
    reference: str
    tolerance_ms: float
    join_tolerance_ms: float
    grid_rate_hz: float
    grid_rows: int
    aligned_rows: int
    windows: int
    windows_kept: int
    windows_sparse: int
    windows_unlabelled: int
    streams: dict[str, StreamAlignment] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    table: str = ""

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed}

    def metrics(self) -> dict[str, float]:
        """Flat figures for MLflow: align_* for the dataset, align_STREAM_* per stream."""
        figures: dict[str, float] = {
            "align_passed": float(self.passed),
            "align_tolerance_ms": self.tolerance_ms,
            "align_residual_max_ms": max((s.residual_max_ms for s in self.streams.values()), default=0.0),
            "align_grid_rows": float(self.grid_rows),
            "align_aligned_rows": float(self.aligned_rows),
            "align_windows_kept": float(self.windows_kept),
            "align_windows_dropped": float(self.windows - self.windows_kept),
        }
        for name, stream in self.streams.items():
            for key in (
                "offset_ms",
                "residual_mean_ms",
                "residual_max_ms",
                "coverage",
                "dropped_share",
                "correlation",
                "duplicates_dropped",
                "missing_samples",
                "unmatched_grid_rows",
            ):
                figures[f"align_{name}_{key}"] = float(getattr(stream, key))
        return figures


def report_path(spec: DatasetSpec) -> Path:
    """Next to the aligned table: datasets/NAME.alignment.json."""
    return spec.path.with_name(f"{spec.name}{REPORT_SUFFIX}")


def load_report(spec: DatasetSpec) -> dict[str, Any]:
    return json.loads(report_path(spec).read_text())


def alignment_metrics(dataset: str) -> dict[str, float]:
    """The alignment figures of a dataset (or of one of its modality combinations) for MLflow.

    Flat `align_*` names (see AlignmentReport.metrics); empty for a dataset that has no streams or
    has not been aligned yet. Reads datasets/NAME.alignment.json, so any process can log them.
    """
    spec = load_dataset_spec(split_name(dataset)[0])
    path = report_path(spec)
    if spec.modality != "multimodal" or not path.is_file():
        return {}
    data = json.loads(path.read_text())
    streams = {name: StreamAlignment(**fields) for name, fields in data.pop("streams").items()}
    data.pop("passed", None)
    return AlignmentReport(**data, streams=streams).metrics()


def align_dataset(spec: DatasetSpec) -> AlignmentReport:
    """Align, gate, window and save one multimodal dataset; the report says whether it passed.

    A modality combination (`NAME[STREAMS]`) aligns its whole dataset: they share one table.
    """
    if split_name(spec.name)[1] is not None:
        spec = load_dataset_spec(split_name(spec.name)[0])
    card = multimodal_card(spec)
    where = spec.card_path or spec.name
    alignment = card.alignment
    streams = {name: read_stream(name, stream, where) for name, stream in card.streams.items()}
    failures: list[str] = []
    corrected: dict[str, pd.DataFrame] = {}
    figures: dict[str, dict[str, float]] = {}
    for name in streams:
        corrected[name], figures[name] = _correct_clock(card, streams, name, failures)

    grid_rate = alignment.rate_hz or min(s.rate_hz for s in streams.values())
    grid_period = 1.0 / grid_rate
    join_tolerance = (
        (alignment.join_tolerance_ms / 1000.0) if alignment.join_tolerance_ms else 0.6 * grid_period
    )
    grid, aligned = _join(card, corrected, grid_period, join_tolerance, figures)
    for name, frame in corrected.items():
        stream = streams[name]
        distance = np.abs(aligned[TIME].to_numpy() - aligned[f"_{name}_t"].to_numpy()) * 1000.0
        # A sample is dropped when no aligned row lies within the join tolerance of it: it was a
        # duplicate, outside the common span, or beside a row another stream could not fill.
        # (A stream denser than the grid is thinned by the join; those samples are not dropped.)
        kept = _near(frame[TIME].to_numpy(), aligned[TIME].to_numpy(), join_tolerance)
        lost = stream.duplicates + int(np.count_nonzero(~kept))
        figures[name]["dropped_share"] = float(lost / stream.raw_samples)
        figures[name]["join_distance_mean_ms"] = float(distance.mean()) if len(distance) else float("nan")
        figures[name]["join_distance_max_ms"] = float(distance.max()) if len(distance) else float("nan")
        if figures[name]["coverage"] < alignment.min_coverage:
            failures.append(
                f"stream '{name}': covers {figures[name]['coverage']:.0%} of the common clock, "
                f"below min_coverage {alignment.min_coverage:.0%}"
            )

    segments = read_segments(card, where)
    value_columns = [f"{name}{FEATURE_SEPARATOR}{c}" for name, s in card.streams.items() for c in s.columns]
    table, counts = window_table(aligned, value_columns, segments, alignment, grid_period, spec.target)
    if counts.kept == 0:
        failures.append("no window has enough aligned rows and one clear label")

    report = AlignmentReport(
        dataset=spec.name,
        reference=alignment.reference,
        tolerance_ms=alignment.tolerance_ms,
        join_tolerance_ms=join_tolerance * 1000.0,
        grid_rate_hz=grid_rate,
        grid_rows=len(grid),
        aligned_rows=len(aligned),
        windows=counts.windows,
        windows_kept=counts.kept,
        windows_sparse=counts.sparse,
        windows_unlabelled=counts.unlabelled,
        streams={
            name: _stream_alignment(card.streams[name].modality, streams[name], figures[name])
            for name in streams
        },
        failures=failures,
    )
    if report.passed:
        table = table[[WINDOW_START, SEGMENT, *card.feature_columns(), spec.target]]
        save_table(spec, table)
        report.table = spec.file  # relative: the report is data, identical on every clone

    # Only rewritten when the figures change, so DVC re-hashes nothing on an unchanged dataset.
    content = json.dumps(report.to_dict(), indent=2, sort_keys=True, default=float) + "\n"
    write_if_changed(report_path(spec), content.encode("utf-8"))
    return report


def _stream_alignment(modality: str, stream: CleanStream, figures: dict[str, float]) -> StreamAlignment:
    """A stream's record: its clean-up counts and the figures its clock correction and join measured."""
    return StreamAlignment(
        modality=modality, rate_hz=stream.rate_hz, raw_samples=stream.raw_samples,
        duplicates_dropped=stream.duplicates, missing_samples=stream.missing,
        offset_ms=figures["offset_ms"], correlation=figures["correlation"],
        residual_mean_ms=figures["residual_mean_ms"], residual_max_ms=figures["residual_max_ms"],
        residual_blocks=int(figures["residual_blocks"]),
        outside_span_dropped=int(figures["outside_span_dropped"]),
        unmatched_grid_rows=int(figures["unmatched_grid_rows"]), coverage=figures["coverage"],
        dropped_share=figures["dropped_share"], join_distance_mean_ms=figures["join_distance_mean_ms"],
        join_distance_max_ms=figures["join_distance_max_ms"],
    )


def _correct_clock(
    card: MultimodalCard, streams: dict[str, CleanStream], name: str, failures: list[str]
) -> tuple[pd.DataFrame, dict[str, float]]:
    """One stream on the reference clock (offset subtracted) and its offset/residual figures."""
    alignment = card.alignment
    stream = streams[name]
    times = stream.frame[TIME].to_numpy()
    if name == alignment.reference:
        offset, correlation, residuals = 0.0, 1.0, [0.0]
    else:
        reference = streams[alignment.reference]
        ref_times = reference.frame[TIME].to_numpy()
        ref_signal = sync_signal(reference, card.streams[alignment.reference].sync_spec)
        signal = sync_signal(stream, card.streams[name].sync_spec)
        step_s = alignment.search_step_ms / 1000.0
        estimate = estimate_offset(
            ref_times, ref_signal, times, signal, max_offset_s=alignment.max_offset_s, step_s=step_s
        )
        offset, correlation = estimate.offset_s, estimate.correlation
        residuals = residual_skews(
            ref_times,
            ref_signal,
            times - offset,
            signal,
            blocks=alignment.residual_blocks,
            search_s=max(0.1, _RESIDUAL_SEARCH_TOLERANCES * alignment.tolerance_ms / 1000.0),
            step_s=step_s,
            min_correlation=alignment.min_correlation,
        )
        if correlation < alignment.min_correlation:
            failures.append(
                f"stream '{name}': its shared signal matches the reference too weakly "
                f"(correlation {correlation:.2f} < {alignment.min_correlation}) "
                "to estimate its clock offset"
            )
        elif not residuals:
            failures.append(f"stream '{name}': the residual skew could not be measured in any block")
    frame = stream.frame.copy()
    frame[TIME] = frame[TIME] - offset
    magnitudes = np.abs(np.asarray(residuals)) * 1000.0
    figures = {
        "offset_ms": offset * 1000.0,
        "correlation": correlation,
        "residual_mean_ms": float(magnitudes.mean()) if len(residuals) else float("nan"),
        "residual_max_ms": float(magnitudes.max()) if len(residuals) else float("nan"),
        "residual_blocks": len(residuals),
    }
    if len(residuals) and figures["residual_max_ms"] > alignment.tolerance_ms:
        failures.append(
            f"stream '{name}': residual skew after correction up to {figures['residual_max_ms']:.1f} ms "
            f"exceeds the tolerance of +-{alignment.tolerance_ms:g} ms (does its clock drift?)"
        )
    return frame, figures


def _join(
    card: MultimodalCard,
    corrected: dict[str, pd.DataFrame],
    grid_period: float,
    join_tolerance: float,
    figures: dict[str, dict[str, float]],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(every grid row, the rows every stream filled): nearest sample within the join tolerance."""
    span_start = max(f[TIME].iloc[0] for f in corrected.values())
    span_end = min(f[TIME].iloc[-1] for f in corrected.values())
    # The grid sits on the reference clock's multiples of the grid period.
    grid_times = np.arange(np.ceil(span_start / grid_period) * grid_period, span_end + 1e-9, grid_period)
    grid = pd.DataFrame({TIME: grid_times})
    matched_all = np.ones(len(grid), dtype=bool)
    for name, frame in corrected.items():
        renamed = frame.rename(
            columns={c: f"{name}{FEATURE_SEPARATOR}{c}" for c in card.streams[name].columns}
        )
        renamed[f"_{name}_t"] = renamed[TIME]  # the matched sample's own time, for the join distance
        grid = pd.merge_asof(grid, renamed, on=TIME, direction="nearest", tolerance=join_tolerance)
        matched = grid[f"_{name}_t"].notna().to_numpy()
        matched_all &= matched
        times = frame[TIME].to_numpy()
        outside = (times < span_start - join_tolerance) | (times > span_end + join_tolerance)
        figures[name]["outside_span_dropped"] = int(np.count_nonzero(outside))
        figures[name]["unmatched_grid_rows"] = int(np.count_nonzero(~matched))
        figures[name]["coverage"] = float(matched.mean()) if len(grid) else 0.0
    return grid, grid.loc[matched_all].reset_index(drop=True)


def _near(times: np.ndarray, grid: np.ndarray, tolerance: float) -> np.ndarray:
    """For each time, whether some grid time lies within the tolerance."""
    if len(grid) == 0:
        return np.zeros(len(times), dtype=bool)
    right = np.clip(np.searchsorted(grid, times), 0, len(grid) - 1)
    left = np.clip(right - 1, 0, len(grid) - 1)
    distance = np.minimum(np.abs(grid[right] - times), np.abs(grid[left] - times))
    return distance <= tolerance


def read_segments(card: MultimodalCard, where: str) -> pd.DataFrame:
    """The label track as columns start, end, label (seconds on the reference clock)."""
    path = labels_path(card)
    if not path.is_file():
        raise UserError(f"{where}: labels.file {path} not found; run `automl-eval datasets build`.")
    raw = pd.read_csv(path)
    spec = card.labels
    absent = [c for c in (spec.start, spec.end, spec.label) if c not in raw.columns]
    if absent:
        raise UserError(f"{where}: labels columns {absent} are not in {path}.")
    segments = pd.DataFrame({"start": raw[spec.start], "end": raw[spec.end], "label": raw[spec.label]})
    if (segments["end"] <= segments["start"]).any():
        raise UserError(f"{where}: labels in {path} have segments whose end is not after their start.")
    return segments.sort_values("start", kind="stable").reset_index(drop=True)


def save_table(spec: DatasetSpec, table: pd.DataFrame) -> None:
    """The windowed table as the card's file and its saved folds, written as the catalog writes them.

    Folds come from the same function `automl-eval datasets build` uses, so the table has one
    assignment whichever step wrote it last.
    """

    write_if_changed(spec.path, canonical_csv(table, spec))
    # Every modality combination gets the same folds file: scored on the same rows and folds.
    save_folds(spec, load.load_frame(spec))


def main(argv: list[str]) -> int:
    """`python -m tasks.align NAME`: align one dataset and print its report."""
    if len(argv) != 1:
        print("usage: python -m tasks.align DATASET", file=sys.stderr)
        return 2
    try:
        report = align_dataset(load_dataset_spec(argv[0]))
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report.to_dict(), indent=2, sort_keys=True, default=float))
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
