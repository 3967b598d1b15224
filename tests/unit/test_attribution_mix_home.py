"""A mix of explain-regression runs on the data version it names, with that version's own folds and
gate verdict; a mix whose jobs did not end ok is named with the reason. (The user's case: labels
flipped in credit_data, whose duplicate rows then fall into other folds; the old file beside the new
folds put duplicates on both sides of a fold, the gate skipped every job and no share was given.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flows.explain_regression import _in_home, _mix_home, _problems
from tasks.data.folds import assign_folds, fold_settings, folds_path, load_folds
from tasks.data.load import load_frame
from tasks.data.materialize import save_folds
from tasks.data.restore import keep_in_cache
from tasks.data.validate import validate_dataset
from tasks.data.versions import file_md5
from tasks.specs import load_dataset_spec


def _flip(csv: Path, target: str, share: float) -> None:
    frame = pd.read_csv(csv, dtype={target: str})
    rows = np.random.default_rng(0).choice(len(frame), size=int(share * len(frame)), replace=False)
    classes = sorted(frame[target].unique())
    frame.loc[rows, target] = [classes[1] if v == classes[0] else classes[0] for v in frame.loc[rows, target]]
    frame.to_csv(csv, index=False)


def test_a_restored_version_gets_its_own_folds_and_passes_the_gate(data_home, tmp_path: Path) -> None:
    home = data_home("penguins")
    spec = load_dataset_spec("penguins")
    csv = home / "datasets" / "penguins.csv"
    # Duplicate rows, as credit_data has: identical rows share a fold, so which fold depends on labels.
    frame = pd.read_csv(csv)
    pd.concat([frame, frame.head(40)], ignore_index=True).to_csv(csv, index=False)
    card = home / "specs" / "datasets" / "penguins.yaml"
    card.write_text(card.read_text().replace("rows: 344", "rows: 384"))
    spec = load_dataset_spec("penguins")
    save_folds(spec, load_frame(spec))
    old_md5, old_folds = file_md5(csv), load_folds(spec).copy()
    keep_in_cache(csv, home)  # as `datasets build --pin` keeps it
    # The data changes (30% of the labels), and `datasets build` gives it folds of its own.
    _flip(csv, spec.target, 0.3)
    save_folds(spec, load_frame(spec))
    assert not np.array_equal(load_folds(spec), old_folds)

    mix = _mix_home(tmp_path / "mix", {"datasets": ["penguins"], "frameworks": ["constant"], "folds": 2},
                    "planted", {"penguins": old_md5}, home)
    with _in_home(mix):
        restored = load_dataset_spec("penguins")
        assert file_md5(restored.path) == old_md5
        assert np.array_equal(load_folds(restored), old_folds)  # the old version's own folds
        expected = assign_folds(load_frame(restored), restored, fold_settings(restored))
        assert np.array_equal(load_folds(restored), expected)
        verdict = validate_dataset(restored)
        assert verdict.ok, verdict.failures
        assert verdict.data_version == old_md5 and not verdict.reused
        assert folds_path(restored).is_relative_to(mix)


def test_a_mix_whose_jobs_did_not_end_ok_is_named_with_each_reason() -> None:
    skipped = "the gate failed: duplicate rows shared between a fold's train and test part"
    runs = pd.DataFrame({
        "status": ["skipped", "skipped", "ok", "failed"],
        "error": [skipped, skipped, "", "xgboost: boom\nTraceback ..."],
    })
    assert _problems(runs) == [f"2 jobs skipped: {skipped}", "1 job failed: xgboost: boom"]
    assert _problems(runs[runs["status"] == "ok"]) == []


@pytest.fixture(autouse=True)
def _no_tracking_uri(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
