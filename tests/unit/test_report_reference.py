"""`report --reference`: this run beside a results.csv in AMLB's format; and the TabArena long format."""

from __future__ import annotations

import csv
import statistics
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ holds the synthetic-run helper; it is not an installed package
    sys.path.insert(0, str(ROOT))

from bench.synthetic_runs import SyntheticSuite, synthetic_jobs  # noqa: E402
from tasks.errors import UserError  # noqa: E402
from tasks.report import amlb, jobs  # noqa: E402
from tasks.report.build import build_report  # noqa: E402
from tasks.report.reference import read_reference  # noqa: E402
from tasks.report.tabarena import TABARENA_COLUMNS, tabarena_frame  # noqa: E402

AMLB_NAMES = {"rf": "RandomForest", "constant": "constantpredictor"}
# Rows of a real AMLB run (tests/fixtures/README.md names the source): AMLB's `id`, task names,
# framework names and `neg_` metrics as AMLB writes them.
AMLB_SAMPLE = ROOT / "tests" / "fixtures" / "amlb_results_sample.csv"
# The synthetic datasets, each given a card naming the OpenML task of one published AMLB task with
# the same metric (kc2: auc, iris: neg_logloss, cholesterol: neg_rmse). Their names share nothing
# with AMLB's task names, so a row can only be matched through AMLB's `id` (openml.org/t/N).
OPENML_TASK_OF = {"ds00_binary": 3913, "ds01_multiclass": 59, "ds02_regression": 2295}


def _published(runs: pd.DataFrame, tmp_path: Path) -> tuple[Path, pd.DataFrame]:
    """A results.csv in AMLB's format for the same tasks and folds, with AMLB's framework names and
    results moved by a known amount per fold: this project's own results.csv as the reference, its
    `id` being `dataset@version`, so rows match by task name (AMLB's own ids: the test below)."""
    ours = amlb.results_frame(jobs.prepare(runs))
    published = ours[ours["framework"].isin(AMLB_NAMES)].copy()
    published["framework"] = published["framework"].map(AMLB_NAMES)
    published["result"] = published["result"] + np.where(published["fold"] % 2 == 0, 0.01, -0.03)
    path = tmp_path / "amlb-results.csv"
    published.to_csv(path, index=False)
    return path, ours


def test_the_report_sets_each_fold_beside_the_published_result(tmp_path: Path) -> None:
    runs = synthetic_jobs(SyntheticSuite(datasets=3, folds=4, seeds=(0,)))
    path, ours = _published(runs, tmp_path)
    report = build_report(
        runs,
        tmp_path / "report",
        title="ref",
        bootstrap_rounds=5,
        reference=(path.name, read_reference(path)),
    )
    every = pd.read_csv(tmp_path / "report" / "reference.csv")
    assert len(every) == len(ours)  # every row of this run, published or not
    rows = every[every["reference"] == "published"]
    assert set(rows["framework"]) == {"rf", "constant"}  # AMLB's names mapped to the adapters
    assert set(rows["reference_framework"]) == {"RandomForest", "constantpredictor"}
    in_amlb = ours["framework"].isin(AMLB_NAMES)
    assert len(rows) == (in_amlb & ours["result"].notna()).sum()
    assert set(every.loc[~every["framework"].isin(AMLB_NAMES), "reference"]) == {"not published"}
    assert every.loc[~every["framework"].isin(AMLB_NAMES), "reference_result"].isna().all()
    # The published result was moved by +0.01 on even folds and -0.03 on odd ones.
    expected = np.where(rows["fold"] % 2 == 0, -0.01, 0.03)
    np.testing.assert_allclose(rows["difference"], expected, atol=1e-9)
    one = rows[(rows["task"] == rows["task"].iloc[0]) & (rows["framework"] == "rf")]
    spread = one["reference_result"].std()
    np.testing.assert_allclose(one["z"], one["difference"] / spread)
    assert "## Against the published results" in report.markdown
    assert "AMLB published no result for some or all folds of: " in report.markdown  # the others, named
    assert (tmp_path / "report" / "reference.png").is_file()


def _openml_cards(home: Path) -> None:
    """Cards for the synthetic datasets as `datasets build` writes them from an OpenML task."""
    folder = home / "specs" / "datasets"
    folder.mkdir(parents=True)
    problems = {"ds00_binary": "binary", "ds01_multiclass": "multiclass", "ds02_regression": "regression"}
    for name, task_id in OPENML_TASK_OF.items():
        card = {
            "name": name,
            "source": {
                "package": "openml",
                "call": f"openml.tasks.get_task({task_id})",
                "openml_task": task_id,
            },
            "file": f"{name}.csv",
            "target": "y",
            "problem_type": problems[name],
        }
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(card))


def test_published_amlb_rows_are_matched_by_their_openml_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "project"
    _openml_cards(home)
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(home))
    runs = synthetic_jobs(SyntheticSuite(datasets=3, folds=2, seeds=(0,)))
    report = build_report(
        runs,
        tmp_path / "report",
        title="ref",
        bootstrap_rounds=5,
        reference=(AMLB_SAMPLE.name, read_reference(AMLB_SAMPLE)),
    )
    every = pd.read_csv(tmp_path / "report" / "reference.csv")
    rows = every[every["reference"] == "published"]

    # The expectation, by hand from the fixture's text: the published result per (task id, fold).
    with AMLB_SAMPLE.open(newline="") as handle:
        published = [row for row in csv.DictReader(handle) if row["framework"] == "RandomForest"]
    result_of = {(row["id"], int(row["fold"])): float(row["result"]) for row in published}
    metric_of = {row["id"]: row["metric"] for row in published}
    ours = amlb.results_frame(jobs.prepare(runs)).set_index(["task", "framework", "fold"])["result"]
    # Every (dataset, fold) of rf, the only framework here that the published RandomForest maps to.
    assert sorted(zip(rows["task"], rows["framework"], rows["fold"], strict=True)) == [
        (name, "rf", fold) for name in sorted(OPENML_TASK_OF) for fold in (0, 1)
    ]
    for row in rows.itertuples(index=False):
        amlb_id = f"openml.org/t/{OPENML_TASK_OF[row.task]}"
        assert row.metric == metric_of[amlb_id]  # neg_logloss beside neg_logloss, neg_rmse beside neg_rmse
        expected = ours[(row.task, "rf", row.fold)] - result_of[(amlb_id, row.fold)]
        assert row.reference_result == pytest.approx(result_of[(amlb_id, row.fold)])
        assert row.difference == pytest.approx(expected) and row.difference != 0
        spread = statistics.stdev([result_of[(amlb_id, 0)], result_of[(amlb_id, 1)]])
        assert row.reference_spread == pytest.approx(spread)
        assert row.z == pytest.approx(expected / spread)
    # This run's other frameworks have no published row (AMLB's flaml row is on eucalyptus, which
    # this run lacks): they are named, not matched.
    assert "AMLB published no result for some or all folds of: " in report.markdown
    assert "ds00_binary x flaml" in report.markdown
    assert set(every.loc[every["framework"] != "rf", "reference"]) == {"not published"}


def test_a_reference_without_amlb_columns_is_one_sentence(tmp_path: Path) -> None:
    path = tmp_path / "other.csv"
    pd.DataFrame({"task": ["a"], "framework": ["rf"], "fold": [0], "score": [0.5]}).to_csv(path, index=False)
    with pytest.raises(UserError, match=r"other\.csv has no column 'result'; an AMLB results\.csv has"):
        read_reference(path)
    with pytest.raises(UserError, match=r"missing\.csv does not exist"):
        read_reference(tmp_path / "missing.csv")


def test_tabarena_rows_are_errors_lower_is_better_one_per_finished_split() -> None:
    table = jobs.prepare(
        synthetic_jobs(SyntheticSuite(datasets=3, folds=2, seeds=(0,), fail=[("ds00_binary", "rf")]))
    )
    frame = tabarena_frame(table)
    assert list(frame.columns) == list(TABARENA_COLUMNS)
    assert len(frame) == int(table["ok"].sum())
    assert not ((frame["dataset"] == "ds00_binary") & (frame["method"] == "rf")).any()
    done = table[table["ok"]].set_index(["dataset", "framework", "fold", "seed"])
    for row in frame.itertuples(index=False):
        job = done.loc[(row.dataset, row.method, row.fold, row.seed)]
        if row.problem_type == "binary":
            assert row.metric == "roc_auc" and row.metric_error == pytest.approx(1 - job["auc"])
        elif row.problem_type == "regression":
            assert row.metric == "root_mean_squared_error" and row.metric_error == pytest.approx(job["rmse"])
        else:
            assert row.metric == "log_loss" and row.metric_error == pytest.approx(job["logloss"])
        assert row.time_train_s == pytest.approx(job["fit_s"])
