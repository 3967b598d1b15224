"""Multimodal sources: real sensor recordings written as separate streams, each on its own clock.

The packages ship each recording already synchronised. Real rigs are not: every device has its
own clock, starts at its own moment, jitters, drops and repeats samples. So each source writes
the streams as separate files through `desynchronize`, with a known clock offset (kept in
truth.json next to them, which alignment never reads, so its error can be measured), then runs the
alignment that produces the dataset's windowed table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tasks import paths
from tasks.align import align_dataset
from tasks.data.sources import source
from tasks.errors import UserError
from tasks.specs import DatasetSpec

TRUTH_FILE = "truth.json"


@dataclass(frozen=True)
class ClockFaults:
    """What a device's clock does to a recording; all zero is a perfect clock."""

    offset_s: float = 0.0  # the device clock reads true time + offset
    jitter_s: float = 0.0  # each timestamp off by up to +- this (uniform)
    drop_share: float = 0.0  # samples lost
    duplicate_share: float = 0.0  # samples written twice
    keep_every: int = 1  # 2 = the device samples at half the rate
    drift_ppm: float = 0.0  # clock runs fast by this many parts per million


def desynchronize(
    times: np.ndarray, values: pd.DataFrame, faults: ClockFaults, rng: np.random.Generator
) -> pd.DataFrame:
    """The recording as the device would write it: column `t` on its own clock, then `values`."""
    picked = np.arange(0, len(times), faults.keep_every)
    true_times = times[picked]
    frame = values.iloc[picked].reset_index(drop=True)
    clock = true_times * (1 + faults.drift_ppm * 1e-6) + faults.offset_s
    if faults.jitter_s:
        clock = clock + rng.uniform(-faults.jitter_s, faults.jitter_s, len(clock))
    frame.insert(0, "t", np.round(clock, 6))
    keep = rng.random(len(frame)) >= faults.drop_share
    frame = frame.loc[keep]
    repeat = np.where(rng.random(len(frame)) < faults.duplicate_share, 2, 1)
    return frame.loc[frame.index.repeat(repeat)].reset_index(drop=True)


def write_streams(folder: Path, streams: dict[str, pd.DataFrame], truth: dict[str, ClockFaults]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, frame in streams.items():
        frame.to_csv(folder / f"{name}.csv", index=False)
    described = {name: faults.__dict__ for name, faults in truth.items()}
    (folder / TRUTH_FILE).write_text(json.dumps(described, indent=2, sort_keys=True))


def _align(spec: DatasetSpec) -> None:
    report = align_dataset(spec)
    if not report.passed:
        raise UserError(f"{spec.card_path}: the streams did not align: {'; '.join(report.failures)}.")


@source("aeon.basic_motions_streams")
def basic_motions_streams(spec: DatasetSpec) -> None:
    """BasicMotions (80 recordings x 10 s of a wrist-worn smartwatch at 10 Hz, 4 activities).

    The 80 recordings are laid end to end as one 800 s session; the accelerometer keeps the true
    clock (rate and start), the gyroscope gets its own timestamps: +137 ms offset, +-3 ms jitter,
    2% dropped and 1% duplicated samples.
    """
    from aeon.datasets import load_basic_motions

    parts = [load_basic_motions(split=split) for split in ("train", "test")]
    cases = np.concatenate([x for x, _ in parts])  # (80, 6, 100)
    labels = np.concatenate([y for _, y in parts])
    rate_hz, steps = 10.0, cases.shape[2]
    acc = pd.DataFrame(np.concatenate(list(cases[:, 0:3, :]), axis=1).T, columns=["x", "y", "z"])
    gyro = pd.DataFrame(np.concatenate(list(cases[:, 3:6, :]), axis=1).T, columns=["x", "y", "z"])
    times = np.arange(len(acc)) / rate_hz
    rng = np.random.default_rng(6)
    faults = ClockFaults(offset_s=0.137, jitter_s=0.003, drop_share=0.02, duplicate_share=0.01)
    folder = paths.datasets_dir() / spec.name / "streams"
    write_streams(folder, {"acc": acc.round(6), "gyro": desynchronize(times, gyro.round(6), faults, rng)},
                  {"acc": ClockFaults(), "gyro": faults})
    length = steps / rate_hz
    segments = pd.DataFrame({
        "start_s": np.arange(len(labels)) * length,
        "end_s": (np.arange(len(labels)) + 1) * length,
        "activity": labels,
    })
    segments.to_csv(folder / "labels.csv", index=False)
    _align(spec)


@source("aeon.daphnet_streams")
def daphnet_streams(spec: DatasetSpec) -> None:
    """Daphnet S06R02E0 (aeon): thigh ("leg") and trunk accelerometers at 64 Hz, 110 s of walking.

    The thigh sensor keeps the recording's own timestamps; the trunk sensor samples at half the
    rate (32 Hz) and starts 412 ms early on its clock (rate + start). The shipped excerpt has no
    freeze-of-gait episode, so the label track is the ankle sensor's motion per second (standard
    deviation of its vertical acceleration, mg): a regression of ankle motion from thigh + trunk.
    """
    import aeon

    csv = Path(aeon.__file__).parent / "datasets" / "data" / "Daphnet_S06R02E0" / "S06R02E0.csv"
    raw = pd.read_csv(csv)
    stamps = pd.to_datetime(raw["timestamp"])
    seconds = (stamps - pd.Timestamp(0)).dt.total_seconds().to_numpy()
    axes = {"fwd": "horiz_fwd", "vert": "vert", "lat": "horiz_lateral"}
    leg = raw[[f"leg_{a}" for a in axes.values()]].set_axis(list(axes), axis=1).astype(float)
    trunk = raw[[f"trunk_{a}" for a in axes.values()]].set_axis(list(axes), axis=1).astype(float)
    leg.insert(0, "timestamp", raw["timestamp"])
    rng = np.random.default_rng(6)
    faults = ClockFaults(offset_s=-0.412, keep_every=2)
    trunk_stream = desynchronize(seconds, trunk, faults, rng)
    folder = paths.datasets_dir() / spec.name / "streams"
    write_streams(folder, {"leg": leg, "trunk": trunk_stream.drop(columns="t")},
                  {"leg": ClockFaults(), "trunk": faults})
    start = float(np.ceil(seconds[0]))
    edges = np.arange(start, seconds[-1], 1.0)
    ankle = raw["ankle_vert"].to_numpy(dtype=float)
    rows = []
    for low in edges[:-1]:
        inside = (seconds >= low) & (seconds < low + 1.0)
        motion_mg = round(float(ankle[inside].std()), 3)
        rows.append({"start_s": low, "end_s": low + 1.0, "ankle_motion_mg": motion_mg})
    pd.DataFrame(rows).to_csv(folder / "labels.csv", index=False)
    _align(spec)
