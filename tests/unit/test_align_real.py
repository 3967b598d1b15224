"""Alignment of the catalog's real recordings, written desynchronised with known clock faults."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tasks.align import align_dataset, load_report
from tasks.data.folds import folds_path
from tasks.multimodal.combinations import all_combinations
from tasks.specs import load_dataset_spec


@pytest.mark.parametrize(
    ("name", "stream", "windows"), [("basic_motions", "gyro", 398), ("daphnet", "trunk", 109)]
)
def test_real_streams_align_within_tolerance(
    built_catalog: Path, name: str, stream: str, windows: int
) -> None:
    spec = load_dataset_spec(name)
    align_dataset(spec)  # as the flow does before its jobs; rewrites nothing that is unchanged
    report = load_report(spec)
    truth = json.loads((built_catalog / name / "streams" / "truth.json").read_text())

    assert report["passed"] is True, report["failures"]
    error_ms = report["streams"][stream]["offset_ms"] - truth[stream]["offset_s"] * 1000
    assert abs(error_ms) <= report["tolerance_ms"] == 10.0
    assert report["streams"][stream]["residual_max_ms"] <= 10.0
    assert report["windows_kept"] == windows == len(pd.read_csv(spec.path))
    # Every modality combination has the very same folds as the whole table.
    whole = folds_path(spec).read_bytes()
    for combination in all_combinations(spec):
        assert folds_path(load_dataset_spec(combination)).read_bytes() == whole


def test_basic_motions_counts_what_its_gyroscope_lost(built_catalog: Path) -> None:
    gyro = load_report(load_dataset_spec("basic_motions"))["streams"]["gyro"]
    written = pd.read_csv(built_catalog / "basic_motions" / "streams" / "gyro.csv")
    assert gyro["raw_samples"] == len(written)
    assert gyro["duplicates_dropped"] == int(written["t"].duplicated().sum()) > 0
    # 8,000 samples were recorded at 10 Hz; what is neither written nor duplicated went missing.
    assert gyro["missing_samples"] == 8000 - (len(written) - gyro["duplicates_dropped"])
