"""`report --reference`: this run beside a results.csv in AMLB's format; and the TabArena long format."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

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


def _published(runs: pd.DataFrame, tmp_path: Path) -> tuple[Path, pd.DataFrame]:
    """A results.csv in AMLB's format for the same tasks and folds, with AMLB's framework names and
    results moved by a known amount per fold."""
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
    rows = pd.read_csv(tmp_path / "report" / "reference.csv")
    assert set(rows["framework"]) == {"rf", "constant"}  # AMLB's names mapped to the adapters
    assert len(rows) == ours["framework"].isin(AMLB_NAMES).sum() - ours["result"].isna().sum()
    # The published result was moved by +0.01 on even folds and -0.03 on odd ones.
    expected = np.where(rows["fold"] % 2 == 0, -0.01, 0.03)
    np.testing.assert_allclose(rows["difference"], expected, atol=1e-9)
    one = rows[(rows["task"] == rows["task"].iloc[0]) & (rows["framework"] == "rf")]
    spread = one["reference_result"].std()
    np.testing.assert_allclose(one["z"], one["difference"] / spread)
    assert "## Against the published results" in report.markdown
    assert "no published result for: " in report.markdown  # the other frameworks, named
    assert (tmp_path / "report" / "reference.png").is_file()


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
