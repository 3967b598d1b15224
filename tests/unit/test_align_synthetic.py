"""Alignment on synthetic streams whose truth is known: offsets, rates, jitter, gaps, drift."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from tasks.align import align_dataset, alignment_metrics, load_report, report_path
from tasks.errors import UserError
from tasks.modalities.base import modality_of
from tasks.multimodal.cards import multimodal_card
from tasks.specs import load_dataset_spec

DURATION_S = 120.0
SEGMENT_S = 10.0
TOLERANCE_MS = 10.0


@dataclass(frozen=True)
class Faults:
    offset_s: float = 0.0
    rate_hz: float = 100.0
    jitter_s: float = 0.0
    drop_every: int = 0  # drop one sample in every N (never the first or last)
    duplicate_every: int = 0  # write one sample in every N twice
    gap: tuple[float, float] | None = None  # a stretch of true time with no samples at all
    drift_ppm: float = 0.0
    motion_seed: int = 0  # another seed: a device that recorded something else entirely


def motion(times: np.ndarray, seed: int = 0) -> np.ndarray:
    """A shared, non-periodic motion signal: random bursts on a slow wander."""
    rng = np.random.default_rng(seed)
    burst_times = np.sort(rng.uniform(0, DURATION_S, 80))
    widths = rng.uniform(0.05, 0.4, 80)
    heights = rng.uniform(0.5, 3.0, 80)
    bursts = (heights * np.exp(-0.5 * ((times[:, None] - burst_times) / widths) ** 2)).sum(axis=1)
    return bursts + 0.3 * np.sin(2 * np.pi * times / 37.0 + rng.uniform(0, 2 * np.pi))


def write_stream(folder: Path, name: str, faults: Faults, seed: int, *, noise_seed: int) -> dict[str, int]:
    """Sample the shared motion as a device with these faults would; return what it did."""
    rng = np.random.default_rng(noise_seed)
    true_times = np.arange(0.0, DURATION_S, 1.0 / faults.rate_hz)
    signal = motion(true_times, seed)
    values = pd.DataFrame(
        {
            "a": signal + rng.normal(0, 0.05, len(true_times)),
            "b": 0.5 * signal + rng.normal(0, 0.05, len(true_times)),
        }
    )
    clock = true_times * (1 + faults.drift_ppm * 1e-6) + faults.offset_s
    clock = clock + rng.uniform(-faults.jitter_s, faults.jitter_s, len(clock)) if faults.jitter_s else clock
    frame = values.assign(t=np.round(clock, 6))[["t", "a", "b"]]
    keep = np.ones(len(frame), dtype=bool)
    if faults.drop_every:
        keep[np.arange(faults.drop_every // 2, len(frame) - 1, faults.drop_every)] = False
    if faults.gap:
        keep &= ~((true_times >= faults.gap[0]) & (true_times < faults.gap[1]))
    dropped_inside = int(np.count_nonzero(~keep))
    frame = frame.loc[keep]
    repeat = np.ones(len(frame), dtype=int)
    if faults.duplicate_every:
        repeat[:: faults.duplicate_every] = 2
    frame = frame.loc[frame.index.repeat(repeat)]
    frame.to_csv(folder / f"{name}.csv", index=False)
    return {"dropped": dropped_inside, "duplicates": int((repeat == 2).sum()), "written": len(frame)}


def make_dataset(home: Path, streams: dict[str, Faults], **alignment: Any) -> dict[str, dict[str, int]]:
    """A project folder holding a multimodal card and its stream files; returns what was injected."""
    folder = home / "datasets" / "synthetic" / "streams"
    folder.mkdir(parents=True, exist_ok=True)
    (home / "specs" / "datasets").mkdir(parents=True, exist_ok=True)
    (home / "specs" / "budgets.yaml").write_text("test: {time_s: 5, cores: 1, memory_mb: 1024}\n")
    (home / "pyproject.toml").write_text("")
    injected = {}
    for index, (name, faults) in enumerate(streams.items()):
        injected[name] = write_stream(folder, name, faults, faults.motion_seed, noise_seed=index + 1)
    starts = np.arange(0.0, DURATION_S, SEGMENT_S)
    pd.DataFrame(
        {
            "start_s": starts,
            "end_s": starts + SEGMENT_S,
            "label": ["rest", "move"] * (len(starts) // 2),
        }
    ).to_csv(folder / "labels.csv", index=False)
    stats = ["mean", "std"]
    card = {
        "name": "synthetic",
        "source": {"package": "numpy", "call": "synthetic"},
        "modality": "multimodal",
        "file": "synthetic.csv",
        "target": "label",
        "problem_type": "binary",
        "columns": {
            "window_start_s": "id",
            "segment": "id",
            **{f"{s}__{c}__{stat}": "numeric" for s in streams for c in ("a", "b") for stat in stats},
        },
        "streams": {
            name: {
                "file": f"synthetic/streams/{name}.csv",
                "modality": "sensor",
                "clock": {"timestamp": "t", "unit": "s"},
                "columns": ["a", "b"],
                "sync": {"columns": ["a"], "signal": "magnitude"},
            }
            for name in streams
        },
        "labels": {"file": "synthetic/streams/labels.csv"},
        "folds": 3,
        "alignment": {"reference": next(iter(streams)), "window_s": 2.0, "features": stats, **alignment},
    }
    (home / "specs" / "datasets" / "synthetic.yaml").write_text(yaml.safe_dump(card, sort_keys=False))
    return injected


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("offset_s", [0.137, -0.4215, 1.003])
def test_offset_recovered_within_tolerance_despite_jitter_drops_duplicates_and_rates(
    home: Path, offset_s: float
) -> None:
    injected = make_dataset(
        home,
        {
            "ref": Faults(rate_hz=100.0, jitter_s=0.001),
            "slow": Faults(
                offset_s=offset_s, rate_hz=40.0, jitter_s=0.003, drop_every=50, duplicate_every=97
            ),
        },
    )
    report = align_dataset(load_dataset_spec("synthetic"))

    assert report.passed, report.failures
    slow = report.streams["slow"]
    assert abs(slow.offset_ms - offset_s * 1000) <= TOLERANCE_MS
    assert slow.residual_max_ms <= TOLERANCE_MS
    assert slow.duplicates_dropped == injected["slow"]["duplicates"]
    assert slow.missing_samples == injected["slow"]["dropped"]
    assert slow.raw_samples == injected["slow"]["written"]
    assert report.grid_rate_hz == pytest.approx(40.0, rel=1e-3)  # the slowest stream sets the grid
    # Every row kept is a grid row both streams could fill; the rest are counted, not hidden.
    assert report.aligned_rows == report.grid_rows - slow.unmatched_grid_rows
    assert report.streams["ref"].unmatched_grid_rows == 0


def test_table_and_folds_are_written_with_one_row_per_labelled_window(home: Path) -> None:
    make_dataset(home, {"ref": Faults(), "other": Faults(offset_s=0.25, rate_hz=50.0)})
    spec = load_dataset_spec("synthetic")
    report = align_dataset(spec)

    table = pd.read_csv(spec.path)
    folds = pd.read_csv(spec.path.with_name("synthetic.folds.csv"))
    assert report.passed and len(table) == len(folds) == report.windows_kept
    assert list(table.columns[2:-1]) == multimodal_card(spec).feature_columns()
    # Windows of 2 s on a 10 s label grid never straddle a label: none dropped as unlabelled.
    assert report.windows_unlabelled == 0
    assert set(table["label"]) == {"rest", "move"}
    assert sorted(folds["fold"].unique()) == [0, 1, 2]
    assert report_path(spec).is_file() and load_report(spec)["passed"] is True
    figures = alignment_metrics("synthetic[other]")  # what MLflow gets, for the dataset or a combination
    assert figures["align_other_offset_ms"] == pytest.approx(250.0, abs=TOLERANCE_MS)
    assert figures["align_passed"] == 1.0 and figures["align_ref_offset_ms"] == 0.0


def test_a_gap_drops_its_grid_rows_and_windows_and_counts_them(home: Path) -> None:
    make_dataset(home, {"ref": Faults(), "gappy": Faults(offset_s=-0.3, rate_hz=50.0, gap=(40.0, 46.0))})
    report = align_dataset(load_dataset_spec("synthetic"))

    gappy = report.streams["gappy"]
    assert report.passed, report.failures
    assert gappy.missing_samples == 6 * 50
    assert gappy.unmatched_grid_rows == pytest.approx(6 * 50, abs=2)
    assert gappy.coverage < 1.0
    # The 6 s gap empties windows 40-42, 42-44, 44-46 entirely (min_fill 0.8).
    assert report.windows_sparse == 3
    assert report.streams["ref"].dropped_share > 0  # reference samples beside the gap reach no row


def test_a_drifting_clock_fails_the_gate_and_writes_no_table(home: Path) -> None:
    make_dataset(home, {"ref": Faults(), "drifting": Faults(offset_s=0.1, rate_hz=50.0, drift_ppm=2000)})
    spec = load_dataset_spec("synthetic")
    report = align_dataset(spec)

    assert not report.passed
    assert report.streams["drifting"].residual_max_ms > TOLERANCE_MS
    assert any("exceeds the tolerance" in failure for failure in report.failures)
    assert not spec.path.exists()
    assert load_report(spec)["passed"] is False


def test_the_step_before_the_gate_is_the_multimodal_plugins_alignment(home: Path) -> None:
    # What the benchmark flow runs before the gate (flows/benchmark.py prepare_dataset).
    make_dataset(home, {"ref": Faults(), "drifting": Faults(offset_s=0.1, rate_hz=50.0, drift_ppm=2000)})
    spec = load_dataset_spec("synthetic")
    plugin = modality_of(spec)
    assert plugin.prepares and not plugin.verdict_reusable
    reasons = plugin.before_gate(spec)
    assert len(reasons) == 1 and reasons[0].startswith("alignment: stream 'drifting'")
    assert plugin.run_artifacts(spec) == [report_path(spec)]  # the report of the failed alignment
    make_dataset(home, {"ref": Faults(), "other": Faults(offset_s=0.25, rate_hz=50.0)})
    spec = load_dataset_spec("synthetic")
    assert plugin.before_gate(spec) == []
    table = spec.model_copy(update={"modality": "tabular"})
    assert not modality_of(table).prepares and modality_of(table).before_gate(table) == []


def test_unrelated_streams_fail_the_gate_on_correlation(home: Path) -> None:
    make_dataset(home, {"ref": Faults(), "unrelated": Faults(rate_hz=50.0, motion_seed=7)})
    report = align_dataset(load_dataset_spec("synthetic"))

    assert not report.passed
    assert any("too weakly" in failure for failure in report.failures), report.failures


def test_rate_and_start_clock_is_read_without_a_timestamp_column(home: Path) -> None:
    make_dataset(home, {"ref": Faults(), "other": Faults(offset_s=0.5, rate_hz=50.0)})
    card_path = home / "specs" / "datasets" / "synthetic.yaml"
    card = yaml.safe_load(card_path.read_text())
    card["streams"]["other"]["clock"] = {"rate_hz": 50.0, "start_s": 0.5}
    card_path.write_text(yaml.safe_dump(card, sort_keys=False))
    report = align_dataset(load_dataset_spec("synthetic"))

    assert report.passed, report.failures
    assert abs(report.streams["other"].offset_ms - 500.0) <= TOLERANCE_MS


def test_card_errors_are_one_sentence_naming_the_field(home: Path) -> None:
    make_dataset(home, {"ref": Faults(), "other": Faults(rate_hz=50.0)}, reference="nope")
    with pytest.raises(UserError, match=r"synthetic\.yaml: field 'alignment\.reference': 'nope'"):
        align_dataset(load_dataset_spec("synthetic"))
    make_dataset(home, {"ref": Faults(), "other": Faults(rate_hz=50.0)})
    card_path = home / "specs" / "datasets" / "synthetic.yaml"
    card = yaml.safe_load(card_path.read_text())
    card["streams"]["other"]["clock"] = {"rate_hz": 50.0, "timestamp": "t"}
    card_path.write_text(yaml.safe_dump(card, sort_keys=False))
    with pytest.raises(UserError, match=r"field 'streams\.other\.clock'.*either"):
        align_dataset(load_dataset_spec("synthetic"))
