"""The multimodal part of a dataset card: streams with their own clocks, a label track, alignment.

A multimodal card is an ordinary DatasetSpec (its `file` is the aligned, windowed table every
framework trains on) plus three extra fields validated here:

    streams:            one entry per recording, each on its own clock
      acc: {file: ..., modality: accelerometer, clock: {timestamp: t, unit: s}, columns: [x, y, z],
            sync: {columns: [x, y, z], signal: change}}
    labels:             segments on the reference stream's clock
      {file: ..., start: start_s, end: end_s, label: activity}
    alignment:          how to put the streams on one clock and cut windows
      {reference: acc, tolerance_ms: 10, window_s: 2.0, ...}
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tasks import paths
from tasks.errors import UserError
from tasks.multimodal.combinations import FEATURE_SEPARATOR as FEATURE_SEPARATOR  # a stream's prefix
from tasks.specs import DatasetSpec

WindowStat = Literal["mean", "std", "min", "max", "median", "rms"]
DEFAULT_WINDOW_STATS: tuple[WindowStat, ...] = ("mean", "std", "min", "max")
# How a stream's shared signal is made from its sync columns: the magnitude itself, or how fast
# it changes (|d magnitude / dt|), which removes constant parts such as gravity.
SyncSignal = Literal["magnitude", "change"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClockSpec(_Strict):
    """A stream's own clock: a timestamp column, or a sample rate and a start time."""

    timestamp: str | None = None  # column holding each sample's time on the stream's clock
    unit: Literal["s", "ms", "datetime"] = "s"
    rate_hz: float | None = Field(default=None, gt=0)
    start_s: float = 0.0

    @model_validator(mode="after")
    def _one_kind(self) -> ClockSpec:
        if (self.timestamp is None) == (self.rate_hz is None):
            raise ValueError("give either 'timestamp' (a column) or 'rate_hz' (with 'start_s'), not both")
        return self


class SyncSpec(_Strict):
    """The shared signal used to estimate this stream's clock offset against the reference."""

    columns: list[str] = Field(min_length=1)
    signal: SyncSignal = "change"


class StreamSpec(_Strict):
    file: str  # relative to datasets/
    modality: str  # accelerometer, gyroscope, audio, video-features, ...
    clock: ClockSpec
    columns: list[str] = Field(min_length=1)
    sync: SyncSpec | None = None  # default: all columns, signal "change"

    @property
    def sync_spec(self) -> SyncSpec:
        return self.sync or SyncSpec(columns=self.columns)


class LabelTrackSpec(_Strict):
    """Labelled segments (start, end, label) on the reference stream's clock, in seconds."""

    file: str
    start: str = "start_s"
    end: str = "end_s"
    label: str = "label"


class AlignmentSpec(_Strict):
    reference: str  # the stream whose clock is the common clock
    tolerance_ms: float = Field(default=10.0, gt=0)  # residual skew allowed after correction
    max_offset_s: float = Field(default=2.0, gt=0)  # largest clock offset searched
    search_step_ms: float = Field(default=1.0, gt=0)  # resolution of the offset search
    rate_hz: float | None = Field(default=None, gt=0)  # common grid; default: slowest stream
    join_tolerance_ms: float | None = Field(default=None, gt=0)  # default: 0.6 grid period
    # The residual skew is re-measured independently in this many consecutive blocks (2: each half).
    # Each block must hold enough shared motion to measure a lag on its own; more blocks resolve
    # drift better but, with weak shared signals, measure noise.
    residual_blocks: int = Field(default=2, ge=1)
    min_correlation: float = Field(default=0.2, gt=0, le=1)  # weaker: the offset is unknowable
    min_coverage: float = Field(default=0.5, gt=0, le=1)
    window_s: float = Field(gt=0)
    step_s: float | None = Field(default=None, gt=0)  # default: window_s (no overlap)
    min_fill: float = Field(default=0.8, gt=0, le=1)  # share of a window's grid rows required
    label_purity: float = Field(default=0.9, gt=0, le=1)  # share of a window one label must cover
    features: list[WindowStat] = Field(default_factory=lambda: list(DEFAULT_WINDOW_STATS))


class MultimodalCard(_Strict):
    streams: dict[str, StreamSpec] = Field(min_length=1)
    labels: LabelTrackSpec
    alignment: AlignmentSpec

    def feature_columns(self) -> list[str]:
        """The aligned table's feature columns, in order: STREAM__COLUMN__STAT."""
        return [
            FEATURE_SEPARATOR.join((stream, column, stat))
            for stream, spec in self.streams.items()
            for column in spec.columns
            for stat in self.alignment.features
        ]


def multimodal_card(spec: DatasetSpec) -> MultimodalCard:
    """The card's streams/labels/alignment fields, checked; one sentence naming the field if wrong."""
    where = spec.card_path or f"dataset '{spec.name}'"
    if spec.modality != "multimodal":
        raise UserError(
            f"{where}: modality is '{spec.modality}'; set 'modality: multimodal' to align streams."
        )
    try:
        card = MultimodalCard.model_validate(
            {"streams": spec.streams or {}, "labels": spec.labels or {}, "alignment": spec.alignment or {}}
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "streams"
        if first["type"] == "missing":
            raise UserError(f"{where}: field '{field}' is required for a multimodal card; add it.") from None
        raise UserError(f"{where}: field '{field}': {first['msg']}.") from None
    if card.alignment.reference not in card.streams:
        raise UserError(
            f"{where}: field 'alignment.reference': '{card.alignment.reference}' is not one of the "
            f"streams ({', '.join(card.streams)}); name the stream whose clock the others follow."
        )
    for name in card.streams:
        if FEATURE_SEPARATOR in name:
            raise UserError(f"{where}: field 'streams': rename '{name}' without '{FEATURE_SEPARATOR}'.")
    declared = {c for c, role in spec.columns.items() if role in ("numeric", "categorical")}
    expected = set(card.feature_columns())
    if declared != expected:
        missing = sorted(expected - declared)[:3]
        unknown = sorted(declared - expected)[:3]
        raise UserError(
            f"{where}: field 'columns' must list STREAM__COLUMN__STAT as numeric "
            f"for every stream column and alignment.features stat "
            f"(missing {missing}, not produced {unknown})."
        )
    return card


def stream_path(stream: StreamSpec) -> Path:
    return paths.datasets_dir() / stream.file


def labels_path(card: MultimodalCard) -> Path:
    return paths.datasets_dir() / card.labels.file
