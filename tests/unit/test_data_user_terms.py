"""Data on the user's terms: their own folds (file, column, time, group), Parquet with typed labels,
a gate check accepted knowingly, names and paths that cannot lead outside the project, a catalog
that survives a broken card, and output that pipes (full-width tables, `--json`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from tasks.data import folds
from tasks.data.build import build
from tasks.data.load import read_parts
from tasks.data.validate import validate_dataset
from tasks.errors import UserError
from tasks.evaluations.registry import all_evaluations
from tasks.listing import few
from tasks.specs import check_plain_names, load_dataset_spec, load_suite


def _card(home: Path, name: str, **fields: object) -> Path:
    card = {
        "name": name,
        "source": {"package": "internal", "call": "export", "licence": "proprietary"},
        "target": "churned",
        "problem_type": "binary",
        "columns": {"tenure": "numeric", "plan": "categorical", "signup": "numeric", "customer": "id"},
        **fields,
    }
    path = home / "specs" / "datasets" / f"{name}.yaml"
    path.write_text(yaml.safe_dump(card, sort_keys=False))
    return path


def _churn(rows: int = 200, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    tenure = rng.uniform(1, 60, rows)  # continuous: no two rows alike
    return pd.DataFrame({
        "tenure": tenure,
        "plan": rng.choice([1, 2, 3], rows),  # integer-coded categories, as exports store them
        "signup": np.arange(rows, dtype=np.int64) // 2,  # a time: two sign-ups per day
        "customer": rng.integers(0, 40, rows),
        "churned": ((tenure + rng.normal(0, 10, rows)) < 25).astype(np.int64),  # integer labels
    })


@pytest.fixture
def home(data_home) -> Path:
    return data_home()


def test_parquet_with_integer_labels_reads_as_string_labels_and_categories(home: Path) -> None:
    _churn().to_parquet(home / "datasets" / "churn.parquet", index=False)
    spec = load_dataset_spec(_card(home, "churn", file="churn.parquet"))
    train, test = read_parts(spec, [np.arange(0, 150), np.arange(150, 200)], columns=["tenure", "plan"])
    assert list(train.columns) == ["tenure", "plan", "churned"]  # only what the job needs
    assert list(train["churned"].cat.categories) == ["0", "1"]
    assert list(train["plan"].cat.categories) == list(test["plan"].cat.categories) == ["1", "2", "3"]
    assert len(train) == 150 and len(test) == 50 and test.index[0] == 0


def test_parquet_parts_across_row_groups_equal_the_rows_of_the_whole_file(home: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    frame = _churn(rows=300)
    frame.loc[frame.index % 7 == 0, "tenure"] = np.nan
    frame["plan"] = frame["plan"].map({1: "basic", 2: "plus", 3: "pro"})
    # Row groups of 50 rows, each with its own dictionary of plans (the first holds only two).
    frame.loc[:49, "plan"] = frame.loc[:49, "plan"].replace("pro", "plus")
    with pq.ParquetWriter(home / "datasets" / "churn.parquet", pa.Table.from_pandas(
            frame.head(1).astype({"plan": "category"}), preserve_index=False).schema) as writer:
        for start in range(0, 300, 50):
            chunk = frame.iloc[start:start + 50].astype({"plan": "category"})
            writer.write_table(pa.Table.from_pandas(chunk, preserve_index=False))
    assert pq.ParquetFile(home / "datasets" / "churn.parquet").num_row_groups == 6
    spec = load_dataset_spec(_card(home, "churn", file="churn.parquet"))
    # The second part skips the first two row groups and the last one entirely.
    train = np.sort(np.r_[np.arange(0, 40), np.arange(60, 75), np.arange(260, 300)])
    test = np.arange(120, 200, 3)

    got_train, got_test = read_parts(spec, [train, test], columns=["tenure", "plan"])

    (whole,) = read_parts(spec, columns=["tenure", "plan"])
    for got, rows in ((got_train, train), (got_test, test)):
        expected = whole.iloc[rows].reset_index(drop=True)
        pd.testing.assert_series_equal(got["tenure"], expected["tenure"])
        assert got["plan"].astype(str).tolist() == expected["plan"].astype(str).tolist()
        assert got["churned"].astype(str).tolist() == expected["churned"].astype(str).tolist()
    assert list(got_train["plan"].cat.categories) == list(got_test["plan"].cat.categories)


def test_user_folds_file_is_kept_by_build_and_checked_by_the_gate(home: Path) -> None:
    _churn().to_parquet(home / "datasets" / "churn.parquet", index=False)
    own = "\n".join(["amlb_fold", *[str(i % 4) for i in range(200)]]) + "\n"
    (home / "datasets" / "churn.myfolds.csv").write_text(own)
    spec = load_dataset_spec(_card(home, "churn", file="churn.parquet", folds={"file": "churn.myfolds.csv"}))
    report = build(["churn"], use_dvc=False)
    assert not report.errors, report.errors
    assert (home / "datasets" / "churn.myfolds.csv").read_text() == own  # never overwritten
    assert not (home / "datasets" / "churn.folds.csv").exists()
    assert sorted(set(folds.load_folds(spec))) == [0, 1, 2, 3]
    assert validate_dataset(spec).ok

    (home / "datasets" / "churn.myfolds.csv").write_text(
        "\n".join(["fold", *[str((i % 4) * 2) for i in range(200)]]) + "\n"
    )  # ids 0, 2, 4, 6: not contiguous
    failures = validate_dataset(spec).failures
    assert any("expected contiguous ids 0..3" in f for f in failures), failures
    (home / "datasets" / "churn.myfolds.csv").write_text(own.rsplit("\n", 3)[0] + "\n")  # rows missing
    failures = validate_dataset(spec).failures
    assert any("assigns 198 rows but churn.parquet has 200" in f for f in failures), failures


def test_fold_column_of_the_data(home: Path) -> None:
    frame = _churn().assign(split=np.arange(200) % 3)
    frame.to_csv(home / "datasets" / "churn.csv", index=False)
    columns = {"tenure": "numeric", "plan": "categorical", "signup": "numeric", "customer": "id",
               "split": "ignore"}
    card = _card(home, "churn", file="churn.csv", columns=columns, folds={"column": "split"})
    spec = load_dataset_spec(card)
    build(["churn"], use_dvc=False)
    assert not folds.folds_path(spec).exists()
    train, test = folds.split(spec, 2)
    assert set(test % 3) == {2} and len(train) + len(test) == 200
    assert validate_dataset(spec).ok


def test_time_split_never_tests_before_training(home: Path) -> None:
    _churn().sample(frac=1.0, random_state=3).to_csv(home / "datasets" / "churn.csv", index=False)
    spec = load_dataset_spec(
        _card(home, "churn", file="churn.csv", folds={"strategy": "time", "column": "signup", "k": 4})
    )
    build(["churn"], use_dvc=False)
    frame = pd.read_csv(home / "datasets" / "churn.csv")
    assignment = folds.load_folds(spec)
    assert folds.fold_ids(assignment) == [0, 1, 2, 3]
    for fold in range(4):
        train, test = folds.split(spec, fold)
        assert len(train) and len(test)
        assert frame["signup"].iloc[test].min() > frame["signup"].iloc[train].max()
    outcome = validate_dataset(spec)
    assert outcome.ok, outcome.failures
    checks = {c["check"]: c for c in json.loads(outcome.json_path.read_text())["benchmark_checks"]}
    assert checks["time_order"]["success"] is True


def test_group_strategy_keeps_a_customer_in_one_fold(home: Path) -> None:
    _churn().to_csv(home / "datasets" / "churn.csv", index=False)
    spec = load_dataset_spec(
        _card(home, "churn", file="churn.csv", folds={"strategy": "group", "column": "customer", "k": 3})
    )
    build(["churn"], use_dvc=False)
    frame = pd.read_csv(home / "datasets" / "churn.csv")
    assert (pd.Series(folds.load_folds(spec)).groupby(frame["customer"]).nunique() == 1).all()


def test_an_accepted_gate_check_still_runs_and_shows_as_accepted(home: Path) -> None:
    frame = _churn()
    frame.iloc[1] = frame.iloc[0]  # a duplicate row ...
    frame.to_csv(home / "datasets" / "churn.csv", index=False)
    (home / "datasets" / "churn.myfolds.csv").write_text(
        "\n".join(["fold", *[str(i % 2) for i in range(200)]]) + "\n"
    )  # ... that the user's folds put on both sides
    _card(home, "churn", file="churn.csv", folds={"file": "churn.myfolds.csv"})
    refused = validate_dataset("churn")
    assert not refused.ok and "no_train_test_duplicates" in " ".join(refused.failures) + "allow"

    _card(home, "churn", file="churn.csv", folds={"file": "churn.myfolds.csv"},
          gate={"allow": ["no_train_test_duplicates"]})
    accepted = validate_dataset("churn")
    assert accepted.ok, accepted.failures
    assert len(accepted.accepted) == 1 and "accepted by the card" in accepted.accepted[0]
    report = json.loads(accepted.json_path.read_text())
    check = next(c for c in report["benchmark_checks"] if c["check"] == "no_train_test_duplicates")
    assert check["success"] is False and check["accepted"] is True
    with pytest.raises(UserError, match=r"field 'gate.allow.0'"):
        _card(home, "churn", file="churn.csv", gate={"allow": ["everything"]})
        load_dataset_spec("churn")


@pytest.mark.parametrize(
    ("fields", "field"),
    [({"name": "../../etc/passwd"}, "name"), ({"file": "/etc/passwd"}, "file"),
     ({"file": "../../etc/passwd"}, "file"), ({"folds": {"file": "../x.csv"}}, "folds")],
)
def test_a_card_cannot_lead_outside_the_project(home: Path, fields: dict, field: str) -> None:
    path = _card(home, "evil", file="evil.csv")
    card = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**card, **fields}))
    before = sorted(p for p in home.rglob("*"))
    with pytest.raises(UserError, match=rf"evil\.yaml: field '{field}"):
        load_dataset_spec("evil")
    outcome = CliRunner().invoke(_app(), ["datasets", "validate", "evil"])
    assert outcome.exit_code == 2 or isinstance(outcome.exception, UserError)
    assert sorted(p for p in home.rglob("*")) == before  # nothing written, not even a report


def test_names_and_folders_that_would_escape_are_refused(home: Path) -> None:
    with pytest.raises(UserError, match="dataset name '../../etc/passwd' is not a plain name"):
        load_dataset_spec("../../etc/passwd")
    with pytest.raises(UserError, match="suite name '../secret' is not a plain name"):
        load_suite("../secret", all_evaluations())
    with pytest.raises(UserError, match="manual form: field 'datasets': '../x' is not a plain name"):
        check_plain_names("manual form", suite="smoke", datasets=["penguins", "../x"])
    check_plain_names("manual form", suite="smoke", frameworks=["autogluon:best_quality"],
                      datasets=["daphnet[leg+trunk]"])
    from tasks.paths import inside_project

    with pytest.raises(UserError, match="--out: .* is outside the project"):
        inside_project(home.parent / "elsewhere", "--out")
    assert not (home.parent / "elsewhere").exists()


def _app():  # noqa: ANN202 - the typer app with every command group
    from flows import cli

    return cli.app


def test_datasets_list_survives_a_broken_card_and_json_matches_the_table(data_home) -> None:
    home = data_home("penguins", "wage")
    (home / "specs" / "datasets" / "broken.yaml").write_text("name: broken\ntarget: [oops\n")
    runner = CliRunner()
    table = runner.invoke(_app(), ["datasets", "list"])
    assert table.exit_code == 0, table.output
    assert "penguins" in table.output and "wage" in table.output
    assert "broken card" in table.output and "malformed YAML" in table.output
    listed = runner.invoke(_app(), ["datasets", "list", "--json"])
    rows = json.loads(listed.output)
    assert [row["name"] for row in rows] == ["broken", "penguins", "wage"]
    assert rows[0]["error"] and rows[0]["state"] == "broken card" and rows[0]["rows"] is None
    assert not rows[1]["error"]
    # For programs: counts are numbers, and each dataset says its modality, problem type and pin state.
    penguins, wage = rows[1], rows[2]
    assert (penguins["rows"], penguins["columns"]) == (344, 8) and wage["rows"] == 3000
    assert (penguins["modality"], penguins["problem_type"], wage["problem_type"]) == (
        "tabular", "multiclass", "regression")
    assert {row["pinned"] for row in rows[1:]} <= {"yes", "changed", "not pinned", "unknown"}
    assert all(row["state"] == "ok" for row in rows[1:])
    for row in rows[1:]:
        assert row["md5"] in table.output and f"{row['rows']:,}" in table.output


def test_a_list_in_a_message_shows_a_count_and_the_first_few() -> None:
    names = [f"images/cat_{index:03}.png" for index in range(200)]
    line = few(names)
    assert line.startswith("images/cat_000.png, images/cat_001.png") and "and 195 more (200 in all)" in line
    assert "cat_005" not in line and few(["a", "b"]) == "a, b"


def test_piped_tables_are_not_cut_and_frameworks_json_matches(home: Path) -> None:
    runner = CliRunner()
    wide = runner.invoke(_app(), ["frameworks", "list"], env={"COLUMNS": ""})
    assert wide.exit_code == 0, wide.output
    assert "…" not in wide.output and "autogluon" in wide.output
    frameworks = json.loads(runner.invoke(_app(), ["frameworks", "list", "--json"]).output)
    assert {row["framework"] for row in frameworks} >= {"constant", "hgb", "rf", "autogluon"}
    for row in frameworks:
        assert row["framework"] in wide.output


@pytest.mark.parametrize("framework", ["constant", "hgb"])
def test_jobs_on_parquet_with_integer_labels_and_own_folds(home: Path, framework: str) -> None:
    """The "Add your own dataset" path of docs/data.md for Parquet: integer labels, the user's folds."""
    from tasks.jobs import run_job
    from tasks.plan import Job
    from tasks.specs import Budget

    _churn().to_parquet(home / "datasets" / "churn.parquet", index=False, row_group_size=64)
    (home / "datasets" / "churn.myfolds.csv").write_text(
        "\n".join(["fold", *[str(i % 2) for i in range(200)]]) + "\n"
    )
    _card(home, "churn", file="churn.parquet", folds={"file": "churn.myfolds.csv"})
    (home / "pyproject.toml").write_text("")
    spec = load_dataset_spec("churn")
    assert validate_dataset(spec).ok
    budget = Budget(name="tiny", time_s=20, cores=1, memory_mb=2000)
    job = Job("own", "churn", "v0", framework, None, 1, 0, budget, {})
    result = run_job(job, spec, home / "runs" / framework)
    assert result.status == "ok", result.error
    assert result.info["classes"] == ["0", "1"]
    assert result.costs["test_rows"] == 100 and result.costs["data_load_rss_mb"] > 0
    predictions = pd.read_csv(home / "runs" / framework / "predictions.csv")
    assert list(predictions["row"]) == list(range(1, 200, 2))  # the user's fold 1, exactly


def test_hgb_takes_a_categorical_column_with_more_levels_than_its_bins(tmp_path: Path) -> None:
    """Large user tables have wide categoricals (400 levels here); HGB's native limit is 255."""
    from tasks.frameworks._sklearn import SklearnModel
    from tasks.frameworks.base import TaskInfo
    from tasks.frameworks.hgb import ADAPTER
    from tasks.specs import Budget

    rng = np.random.default_rng(0)
    X = pd.DataFrame({
        "x": rng.normal(size=2000),
        "wide": pd.Categorical([f"level{i}" for i in rng.integers(0, 400, 2000)]),
        "narrow": pd.Categorical(rng.choice(["a", "b"], 2000)),
    })
    y = pd.Series(np.where(X["x"] > 0, "1", "0"), dtype=object)
    task = TaskInfo("binary", "y", "auc", {"x": "numeric", "wide": "categorical", "narrow": "categorical"},
                    ("0", "1"))
    model = ADAPTER.fit(X, y, task=task, budget=Budget(name="b", time_s=10, cores=1, memory_mb=1000),
                        params={"max_iter": 5}, workdir=tmp_path, seed=0)
    model.save(tmp_path / "model")
    again = SklearnModel.load(tmp_path / "model", task)
    np.testing.assert_array_equal(again.predict(X.iloc[:50]), model.predict(X.iloc[:50]))
    assert (model.predict(X) == y).mean() > 0.9


def test_large_tables_check_distinct_values_on_a_labelled_sample(
    data_home, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tasks.data import validate

    home = data_home("penguins")
    monkeypatch.setattr(validate, "SAMPLE_ROWS", 100)  # penguins' 344 rows count as large
    outcome = validate_dataset("penguins")
    assert outcome.ok, outcome.failures
    report = json.loads(outcome.json_path.read_text())
    assert set(report["great_expectations"]) == {"whole", "sampled"}
    assert any("column 'island'" in s and "sample of 100 of 344 rows" in s for s in report["sampled_checks"])

    csv = home / "datasets" / "penguins.csv"
    frame = pd.read_csv(csv)
    frame["year"] = 2008
    frame.loc[343, "year"] = 2009  # constant in nearly every row: a sample may not see the other value
    frame.to_csv(csv, index=False)
    assert validate_dataset("penguins").ok  # every row is checked where the sample shows one value
    frame.loc[343, "year"] = 2008
    frame.to_csv(csv, index=False)
    failures = validate_dataset("penguins").failures
    assert len(failures) == 1 and "column 'year' failed expect_column_unique_value_count" in failures[0]


def test_build_format_parquet_is_byte_reproducible_and_reads_like_the_csv(data_home) -> None:
    home = data_home("penguins")
    first = build(["penguins"], use_dvc=False, file_format="parquet")
    assert not first.errors, first.errors
    parquet = home / "datasets" / "penguins.parquet"
    content = parquet.read_bytes()
    parquet.unlink()
    build(["penguins"], use_dvc=False, file_format="parquet")
    assert parquet.read_bytes() == content
    card = home / "specs" / "datasets" / "penguins.yaml"
    card.write_text(card.read_text().replace("file: penguins.csv", "file: penguins.parquet"))
    as_csv = pd.read_csv(home / "datasets" / "penguins.csv")
    (from_parquet,) = read_parts(load_dataset_spec("penguins"))
    assert list(from_parquet["species"].astype(str)) == list(as_csv["species"])
    assert from_parquet["species"].cat.categories.tolist() == sorted(as_csv["species"].unique())
