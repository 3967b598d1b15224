"""`report --reference` on AMLB's published per-fold results (tests/fixtures/amlb_per_fold_8c4h.csv, a
real slice of it) beside synthetic results of this project; AMLB's framework names; bad files refused."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tasks.data.amlb_frameworks import AMLB_FRAMEWORKS, compared_adapter
from tasks.errors import UserError
from tasks.frameworks.registry import find_environment, get_adapter
from tasks.report.reference import compare, read_reference, summary

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "tests" / "fixtures" / "amlb_per_fold_8c4h.csv"
# This project's datasets as cards generated from the OpenML tasks AMLB ran: credit-g (binary, auc),
# car and cnae-9 (multiclass, neg_logloss).
OPENML_TASK_OF = {"credit": 31, "cars": 146821, "cnae": 9981}
SLICE_TASKS = {"credit-g", "car", "cnae-9"}
SLICE_FRAMEWORKS = {"RandomForest", "TunedRandomForest", "constantpredictor_enc", "autosklearn"}


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "project" / "specs" / "datasets"
    folder.mkdir(parents=True)
    problems = {"credit": "binary", "cars": "multiclass", "cnae": "multiclass"}
    for name, task_id in OPENML_TASK_OF.items():
        card = {"name": name, "source": {"package": "openml", "call": f"openml.tasks.get_task({task_id})",
                                         "openml_task": task_id},
                "file": f"{name}.csv", "target": "y", "problem_type": problems[name]}
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(card))
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    return tmp_path


def _slice(path: Path) -> list[dict[str, str]]:
    """Folds 0 to 2 of three tasks and four frameworks, as the published file holds them (text)."""
    with PUBLISHED.open(newline="") as handle:
        rows = [row for row in csv.DictReader(handle)
                if row["task"] in SLICE_TASKS and row["framework"] in SLICE_FRAMEWORKS
                and int(row["fold"]) < 3]
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return rows


def _ours() -> pd.DataFrame:
    """Synthetic results of this project in its results.csv's columns: rf, constant and hgb on the three
    datasets, folds 0 to 3 (AMLB's slice stops at fold 2), one rf job failed."""
    metric = {"credit": "auc", "cars": "neg_logloss", "cnae": "neg_logloss"}
    rows = []
    for task in OPENML_TASK_OF:
        for index, framework in enumerate(("rf", "constant", "hgb")):
            for fold in range(4):
                value = 0.8 + 0.01 * fold + 0.001 * index if task == "credit" else -0.5 - 0.02 * fold - index
                failed = (task, framework, fold) == ("credit", "rf", 1)
                rows.append({"task": task, "framework": framework, "fold": fold, "metric": metric[task],
                             "result": None if failed else value})
    return pd.DataFrame(rows)


def test_the_published_slice_sits_beside_this_run_per_task_framework_and_fold(home: Path) -> None:
    published = _slice(home / "slice.csv")
    rows, notes = compare(_ours(), read_reference(home / "slice.csv"))
    assert len(rows) == len(_ours())  # every row of this run

    # By hand from the file's text: AMLB's rows per (OpenML task, framework, fold), means where repeated.
    values: dict[tuple[str, str, int], list[float]] = {}
    for row in published:
        values.setdefault((row["id"], row["framework"], int(row["fold"])), []).append(float(row["result"]))
    amlb_name = {"rf": "RandomForest", "constant": "constantpredictor_enc"}
    for row in rows.itertuples(index=False):
        key = (f"openml.org/t/{OPENML_TASK_OF[row.task]}", amlb_name.get(row.framework, ""), row.fold)
        if row.framework == "hgb" or row.fold == 3:
            assert row.reference == "not published" and pd.isna(row.reference_result)
            continue
        assert row.reference == "published" and row.reference_framework == amlb_name[row.framework]
        expected = sum(values[key]) / len(values[key])
        assert row.reference_result == pytest.approx(expected)
        assert row.difference == pytest.approx(row.result - expected, nan_ok=True)
    assert not any("published more than once" in note for note in notes)
    # TunedRandomForest imports as rf but is not rf; autosklearn has no adapter here: one sentence, both.
    (left_out,) = [note for note in notes if note.startswith("published frameworks left out")]
    assert "TunedRandomForest (TunedRandomForest runs as rf" in left_out and "autosklearn" in left_out
    assert not rows["reference_framework"].fillna("").str.contains("Tuned").any()

    table = summary(rows).set_index(["task", "framework"])
    assert table.loc[("cars", "rf"), "published"] == "3 of 4"
    assert table.loc[("cars", "hgb"), "published"] == "not published"
    assert table.loc[("credit", "rf"), "published"] == "3 of 4"  # fold 1 failed here, published there
    credit = rows[(rows["task"] == "credit") & (rows["framework"] == "rf") & rows["fold"].isin([0, 2])]
    assert table.loc[("credit", "rf"), "reference_result"] == pytest.approx(credit["reference_result"].mean())
    assert table.loc[("credit", "rf"), "result"] == pytest.approx(credit["result"].mean())
    cars = rows[(rows["task"] == "cars") & (rows["framework"] == "rf") & (rows["fold"] < 3)]
    assert table.loc[("cars", "rf"), "reference_result"] == pytest.approx(cars["reference_result"].mean())


def test_a_raw_lower_is_better_metric_is_negated_and_another_metric_is_not_compared(home: Path) -> None:
    _slice(home / "slice.csv")
    neg = compare(_ours(), read_reference(home / "slice.csv"))[0]
    raw = pd.read_csv(home / "slice.csv")
    multiclass = raw["metric"] == "neg_logloss"
    raw.loc[multiclass, "result"] = -raw.loc[multiclass, "result"]  # logloss as older AMLB files write it
    raw.loc[multiclass, "metric"] = "logloss"
    raw.to_csv(home / "raw.csv", index=False)
    rows, notes = compare(_ours(), read_reference(home / "raw.csv"))
    pd.testing.assert_frame_equal(rows, neg)
    assert any("negated to AMLB's neg_ form" in note and "(logloss)" in note for note in notes)

    ours = _ours()
    ours.loc[ours["task"] == "credit", "metric"] = "acc"
    rows, notes = compare(ours, read_reference(home / "slice.csv"))
    credit_rf = rows[(rows["task"] == "credit") & (rows["framework"] == "rf") & (rows["fold"] < 3)]
    assert set(credit_rf["reference"]) == {"other metric there"}
    assert credit_rf["reference_result"].isna().all()
    assert any("credit (acc here, auc there)" in note for note in notes)


def test_one_fold_published_twice_is_their_mean(home: Path) -> None:
    """A file joining two AMLB runs: car's constant predictor under AMLB's 2019 name and its later one
    (both map to `constant`), the later one 0.02 higher on each fold."""
    _slice(home / "slice.csv")
    table = pd.read_csv(home / "slice.csv")
    again = table[(table["task"] == "car") & (table["framework"] == "constantpredictor_enc")].assign(
        framework="constantpredictor", constraint="later")
    pd.concat([table, again.assign(result=again["result"] + 0.02)]).to_csv(home / "twice.csv", index=False)
    rows, notes = compare(_ours(), read_reference(home / "twice.csv"))
    first = compare(_ours(), read_reference(home / "slice.csv"))[0]
    cell = (rows["task"] == "cars") & (rows["framework"] == "constant") & (rows["fold"] < 3)
    assert (rows.loc[cell, "reference_result"] - first.loc[cell, "reference_result"]).round(9).eq(0.01).all()
    assert set(rows.loc[cell, "reference_framework"]) == {"constantpredictor/constantpredictor_enc"}
    assert any("3 (task, framework, fold) are published more than once (constraints later, small-8c4h)" in n
               for n in notes)


def test_a_fold_amlb_ran_and_failed_is_marked_so(home: Path) -> None:
    _slice(home / "slice.csv")
    table = pd.read_csv(home / "slice.csv")
    table.loc[(table["task"] == "car") & (table["framework"] == "RandomForest") & (table["fold"] == 0),
              "result"] = None
    table.to_csv(home / "failed.csv", index=False)
    rows, _ = compare(_ours(), read_reference(home / "failed.csv"))
    one = rows[(rows["task"] == "cars") & (rows["framework"] == "rf")].set_index("fold")
    assert one.loc[0, "reference"] == "failed there" and pd.isna(one.loc[0, "reference_result"])
    assert one.loc[1, "reference"] == "published"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("task,framework,fold,result\ncar,RandomForest,0,-0.5\n", r"bad\.csv has no column 'metric'"),
        ("task,framework,fold,result,metric\n",
         r"bad\.csv has no rows; give a results\.csv in AMLB's format"),
        ("task,framework,fold,result,metric\ncar,RandomForest,first,-0.5,neg_logloss\n",
         r"bad\.csv, line 2, column 'fold' holds 'first'"),
        ("task,framework,fold,result,metric\ncar,RandomForest,0,n/a?,neg_logloss\n",
         r"bad\.csv, line 2, column 'result' holds 'n/a\?'"),
        ("task,framework,fold,result,metric\ncar,RandomForest,0.5,-0.5,neg_logloss\n",
         r"column 'fold' holds '0\.5'"),
        ("", r"bad\.csv is not a CSV file; give a results\.csv in AMLB's format"),
    ],
)
def test_a_malformed_reference_is_one_sentence_naming_the_file(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(UserError, match=message):
        read_reference(path)


def test_the_published_file_reads_as_a_reference() -> None:
    table = read_reference(PUBLISHED)
    assert set(table["metric"]) == {"auc", "neg_logloss"}
    assert table["id"].str.startswith("openml.org/t/").all()


def test_every_amlb_name_maps_to_a_registered_adapter_or_environment() -> None:
    for name, entry in AMLB_FRAMEWORKS.items():
        adapter, _, version = entry.adapter.partition("@")
        assert get_adapter(adapter).name == adapter, name
        if version:
            assert find_environment(adapter, version).version == version, name
    assert compared_adapter("TPOT") == "tpot" and compared_adapter("TunedRandomForest") is None
    assert compared_adapter("autosklearn") is None and compared_adapter("randomforest") == "rf"
