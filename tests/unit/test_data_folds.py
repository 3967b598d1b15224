"""Saved outer folds: deterministic, stratified, duplicates kept together, identical for every reader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tasks.data.folds import FoldSettings, assign_folds, fold_settings, folds_path, load_folds, split
from tasks.data.load import load_frame
from tasks.data.materialize import materialize
from tasks.errors import UserError
from tasks.specs import DatasetSpec, load_dataset_spec


def _spec(problem_type: str = "binary") -> DatasetSpec:
    return DatasetSpec(
        name="toy",
        file="toy.csv",
        target="y",
        problem_type=problem_type,
        source={"package": "tests", "call": "synthetic"},
        columns={"x": "numeric", "row_id": "id"},
    )


def test_assignment_is_deterministic_and_seeded(built_catalog: Path) -> None:
    spec = load_dataset_spec("breast_cancer")
    frame = load_frame(spec)
    first = assign_folds(frame, spec, FoldSettings(k=10, seed=7))
    again = assign_folds(frame, spec, FoldSettings(k=10, seed=7))
    other_seed = assign_folds(frame, spec, FoldSettings(k=10, seed=8))
    assert np.array_equal(first, again)
    assert not np.array_equal(first, other_seed)


def test_saved_folds_match_params_and_rebuild_byte_identically(data_home) -> None:
    home = data_home("penguins")
    spec = load_dataset_spec("penguins")
    saved = folds_path(spec).read_bytes()
    folds_path(spec).unlink()
    (home / "datasets" / "penguins.csv").unlink()
    result = materialize(spec)  # from the package again
    assert result.written and result.rows == 344
    assert folds_path(spec).read_bytes() == saved
    assert sorted(set(load_folds(spec))) == list(range(fold_settings(spec).k))


@pytest.mark.parametrize("name", ["breast_cancer", "penguins", "hpc_data"])
def test_classification_folds_are_stratified(name: str, built_catalog: Path) -> None:
    spec = load_dataset_spec(name)
    frame, assignment = load_frame(spec), load_folds(spec)
    k = fold_settings(spec).k
    counts = pd.crosstab(assignment, frame[spec.target])
    expected = frame[spec.target].value_counts() / k
    # Round-robin dealing: every fold holds its share of every class, give or take one row.
    assert ((counts - expected).abs() <= 1).all().all(), counts


def test_regression_folds_are_shuffled_and_balanced(built_catalog: Path) -> None:
    spec = load_dataset_spec("ames")
    assignment = load_folds(spec)
    sizes = np.bincount(assignment)
    assert sizes.max() - sizes.min() <= 1
    assert not np.array_equal(assignment[:20], np.sort(assignment[:20])), (
        "folds must not be contiguous blocks"
    )


def test_duplicate_rows_share_a_fold_so_nothing_leaks() -> None:
    spec = _spec("regression")
    x = np.repeat(np.arange(40.0), 3)  # every row three times
    frame = pd.DataFrame({"x": x, "row_id": np.arange(len(x)), "y": x * 2})
    assignment = assign_folds(frame, spec, FoldSettings(k=5, seed=1))
    per_value = pd.Series(assignment).groupby(x).nunique()
    assert (per_value == 1).all()  # the id column does not make copies look different
    assert set(assignment) == set(range(5))


def test_split_is_a_partition_and_rejects_unknown_folds(built_catalog: Path) -> None:
    spec = load_dataset_spec("wage")
    k = fold_settings(spec).k
    seen = []
    for fold in range(k):
        train, test = split(spec, fold)
        assert len(np.intersect1d(train, test)) == 0
        assert len(train) + len(test) == spec.rows
        seen.append(test)
    assert np.array_equal(np.sort(np.concatenate(seen)), np.arange(spec.rows))
    with pytest.raises(UserError, match=f"fold {k} does not exist"):
        split(spec, k)


def test_card_may_set_its_own_number_of_folds(data_home) -> None:
    home = data_home("penguins")
    card = home / "specs" / "datasets" / "penguins.yaml"
    card.write_text(card.read_text() + "folds: 5\n")
    spec = load_dataset_spec("penguins")
    assert fold_settings(spec).k == 5
    materialize(spec)
    assert sorted(set(load_folds(spec))) == [0, 1, 2, 3, 4]


def test_bad_fold_parameters_name_the_file(data_home) -> None:
    home = data_home("penguins")
    (home / "params.yaml").write_text("folds:\n  k: 1\n  seed: 3\n")
    with pytest.raises(UserError, match=r"params\.yaml: field 'folds.k' must be an integer \(k >= 2\)"):
        fold_settings(load_dataset_spec("penguins"))


def test_declared_groups_share_a_fold_and_keep_duplicates_together() -> None:
    spec = _spec("binary").model_copy(update={"columns": {"x": "numeric", "rec": "id"}})
    spec = DatasetSpec(**{**spec.model_dump(), "fold_groups": "rec"})
    rec = np.repeat(np.arange(30), 4)  # 30 recordings, 4 windows each
    x = np.arange(len(rec), dtype=float)
    x[5] = x[0]  # a window of recording 1 repeats one of recording 0: both recordings join
    frame = pd.DataFrame({"x": x, "rec": rec, "y": (rec // 2) % 2})
    assignment = assign_folds(frame, spec, FoldSettings(k=5, seed=1))
    assert (pd.Series(assignment).groupby(rec).nunique() == 1).all()
    assert assignment[0] == assignment[4]
    assert set(assignment) == set(range(5))
    with pytest.raises(UserError, match="field 'fold_groups' must name one of the card's columns"):
        assign_folds(frame, DatasetSpec(**{**spec.model_dump(), "fold_groups": "nope"}), FoldSettings(5, 1))


def test_windows_of_one_recording_never_straddle_a_split(built_catalog: Path) -> None:
    spec = load_dataset_spec("basic_motions")
    frame, assignment = load_frame(spec), load_folds(spec)
    assert (pd.Series(assignment).groupby(frame["segment"].to_numpy()).nunique() == 1).all()
    assert set(assignment) == set(range(fold_settings(spec).k))
