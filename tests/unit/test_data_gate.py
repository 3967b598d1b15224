"""The Great Expectations gate: a clean copy passes; each deliberately broken copy fails exactly
the expectation it should, in one sentence naming column, expectation and observed value."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from tasks.data.folds import load_folds
from tasks.data.validate import (
    ValidationOutcome,
    summary_path,
    validate_all,
    validate_dataset,
    validation_dir,
)
from tasks.specs import load_dataset_spec


def _break(
    data_home,
    name: str,
    change: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
    card: tuple[str, str] | None = None,
) -> ValidationOutcome:
    home = data_home(name)
    if change is not None:
        csv = home / "datasets" / f"{name}.csv"
        change(pd.read_csv(csv)).to_csv(csv, index=False)
    if card is not None:
        path = home / "specs" / "datasets" / f"{name}.yaml"
        old, new = card
        assert old in path.read_text()
        path.write_text(path.read_text().replace(old, new))
    return validate_dataset(name)


def _only_failure(outcome: ValidationOutcome) -> str:
    assert not outcome.ok
    assert len(outcome.failures) == 1, outcome.failures
    return outcome.failures[0]


def test_clean_copy_passes_and_saves_json_and_data_docs(data_home) -> None:
    home = data_home("penguins", "wage")
    outcomes = validate_all()
    assert [o.ok for o in outcomes] == [True, True], [o.failures for o in outcomes]
    penguins = outcomes[0]
    assert penguins.expectations > 20
    report = json.loads(penguins.json_path.read_text())
    assert report["ok"] is True and report["great_expectations"]["success"] is True
    assert report["data_version"] == penguins.data_version and len(penguins.data_version) == 32
    assert penguins.html_path is not None and penguins.html_path.is_file()
    assert any((home / "reports" / "validation" / "penguins").rglob("*penguins*.html"))
    summary = json.loads(summary_path().read_text())
    assert set(summary) == {"penguins", "wage"} and summary["wage"]["ok"] is True


def test_constant_column(data_home) -> None:
    failure = _only_failure(_break(data_home, "penguins", lambda f: f.assign(year=2008)))
    assert "column 'year' failed expect_column_unique_value_count_to_be_between" in failure
    assert "observed 1" in failure


def test_null_target(data_home) -> None:
    def drop_label(frame: pd.DataFrame) -> pd.DataFrame:
        frame.loc[5, "species"] = None
        return frame

    failure = _only_failure(_break(data_home, "penguins", drop_label))
    assert "column 'species' failed expect_column_values_to_not_be_null" in failure
    assert "1 unexpected of 344" in failure


def test_single_class(data_home) -> None:
    failure = _only_failure(_break(data_home, "penguins", lambda f: f.assign(species="Adelie")))
    assert "column 'species' failed expect_column_unique_value_count_to_be_between" in failure


def test_class_smaller_than_the_number_of_folds(data_home) -> None:
    def shrink(frame: pd.DataFrame) -> pd.DataFrame:
        chinstrap = frame.index[frame["species"] == "Chinstrap"]
        frame.loc[chinstrap[3:], "species"] = "Gentoo"
        return frame

    failure = _only_failure(_break(data_home, "penguins", shrink))
    assert "class 'Chinstrap' has 3 rows, fewer than the 10 folds" in failure


def test_declared_row_count(data_home) -> None:
    failure = _only_failure(_break(data_home, "penguins", card=("rows: 344", "rows: 340")))
    assert "table failed expect_table_row_count_to_equal (value=340): observed 344" in failure


def test_missing_column(data_home) -> None:
    failure = _only_failure(_break(data_home, "penguins", lambda f: f.drop(columns="sex")))
    assert "column 'sex' failed expect_column_to_exist" in failure


def test_column_not_in_the_card(data_home) -> None:
    failure = _only_failure(_break(data_home, "penguins", lambda f: f.assign(notes=np.arange(len(f)))))
    assert "columns notes are in penguins.csv but not in the card" in failure


def test_duplicate_row_across_train_and_test_leaks(data_home) -> None:
    data_home("penguins")
    assignment = load_folds(load_dataset_spec("penguins"))
    source = int(np.flatnonzero(assignment != assignment[0])[0])  # a row of another fold

    def copy_row(frame: pd.DataFrame) -> pd.DataFrame:
        frame.iloc[0] = frame.iloc[source]
        return frame

    failure = _only_failure(_break(data_home, "penguins", copy_row))
    assert "duplicate rows shared between a fold's train and test part" in failure


def test_regression_target_not_finite(data_home) -> None:
    def infinite(frame: pd.DataFrame) -> pd.DataFrame:
        frame.loc[7, "wage"] = np.inf
        return frame

    failure = _only_failure(_break(data_home, "wage", infinite))
    assert "column 'wage' failed expect_column_values_to_be_between" in failure and "inf" in failure


def test_card_expectation(data_home) -> None:
    def heavy(frame: pd.DataFrame) -> pd.DataFrame:
        frame.loc[0, "body_mass_g"] = 9000.0
        return frame

    failure = _only_failure(_break(data_home, "penguins", heavy))
    assert "column 'body_mass_g' failed expect_column_values_to_be_between" in failure
    assert "max_value=7000" in failure and "9000.0" in failure


def test_unknown_card_expectation_is_bad_input(data_home) -> None:
    outcome = _break(
        data_home, "penguins", card=("ExpectColumnValuesToBeInSet", "ExpectColumnValuesToBeNice")
    )
    assert outcome.bad_input and not outcome.ok
    assert (
        "field 'expectations[0]': 'ExpectColumnValuesToBeNice' is not a Great Expectations expectation"
        in (outcome.failures[0])
    )


def test_one_failed_dataset_does_not_stop_the_others(data_home) -> None:
    home = data_home("penguins", "wage")
    csv = home / "datasets" / "penguins.csv"
    pd.read_csv(csv).assign(year=2008).to_csv(csv, index=False)
    outcomes = {o.dataset: o for o in validate_all()}
    assert not outcomes["penguins"].ok and outcomes["wage"].ok
    assert Path(outcomes["penguins"].json_path).is_file()



def test_a_dataset_being_validated_elsewhere_is_waited_for(data_home) -> None:
    """Two suites that start together gate the same dataset at once, and both write its data docs
    folder: the second waits for the first instead of deleting its files mid-build."""
    import multiprocessing

    from tasks.data.validate import _held

    data_home("penguins")
    context = multiprocessing.get_context("fork")
    with _held("penguins"):
        child = context.Process(target=validate_dataset, args=("penguins",))
        child.start()
        child.join(timeout=8)
        assert child.is_alive(), "validation went ahead while another process held the dataset"
    child.join(timeout=120)
    assert child.exitcode == 0
    assert json.loads((validation_dir() / "penguins.json").read_text())["ok"] is True


def test_a_verdict_is_reused_until_its_data_card_or_folds_change(data_home) -> None:
    home = data_home("penguins")
    first = validate_dataset("penguins")
    assert first.ok and not first.reused
    again = validate_dataset("penguins")
    assert again.reused and again.ok and again.expectations == first.expectations
    assert again.data_version == first.data_version

    # The card changes: the gate runs again, and its new expectation fails.
    card = home / "specs" / "datasets" / "penguins.yaml"
    card.write_text(card.read_text().replace("rows: 344", "rows: 345"))
    recomputed = validate_dataset("penguins")
    assert not recomputed.reused and not recomputed.ok
    assert validate_dataset("penguins").reused  # the failed verdict is reused just the same
    card.write_text(card.read_text().replace("rows: 345", "rows: 344"))
    assert validate_dataset("penguins").ok

    # The data changes (one row's island rewritten): a new data version, gated afresh.
    csv = home / "datasets" / "penguins.csv"
    frame = pd.read_csv(csv)
    frame.loc[0, "island"] = "Dream" if frame.loc[0, "island"] != "Dream" else "Biscoe"
    frame.to_csv(csv, index=False)
    changed = validate_dataset("penguins")
    assert not changed.reused and changed.data_version != first.data_version

    # The saved folds change: gated afresh, and the gate sees folds that no longer match the data.
    folds = home / "datasets" / "penguins.folds.csv"
    folds.write_text("\n".join(folds.read_text().splitlines()[:-1]) + "\n")
    refolded = validate_dataset("penguins")
    assert not refolded.reused and not refolded.ok
