"""Report statistics against independent references: scipy, hand-computed cases, known strengths."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ holds the synthetic-run helper; it is not an installed package
    sys.path.insert(0, str(ROOT))

from bench.synthetic_runs import SyntheticSuite, synthetic_jobs  # noqa: E402
from tasks.report import aggregate, amlb, elo, jobs, leaderboard, pareto, plots, ranking, stability  # noqa: E402


def test_friedman_matches_scipy_with_ties() -> None:
    rng = np.random.default_rng(7)
    scores = pd.DataFrame(rng.integers(0, 4, size=(12, 5)).astype(float), columns=list("abcde"))
    ours = ranking.friedman(scores)
    reference = stats.friedmanchisquare(*[scores[c] for c in scores.columns])
    assert ours is not None
    assert ours.statistic == pytest.approx(reference.statistic, rel=1e-9)
    assert ours.p_value == pytest.approx(reference.pvalue, rel=1e-9)


def test_friedman_needs_three_frameworks_and_two_datasets() -> None:
    assert ranking.friedman(pd.DataFrame({"a": [1.0, 2.0], "b": [2.0, 1.0]})) is None
    assert ranking.friedman(pd.DataFrame({"a": [1.0], "b": [2.0], "c": [3.0]})) is None


def test_nemenyi_critical_difference_by_hand() -> None:
    # Demšar (2006), table 5(a): q_0.05 = 2.569 for k = 4; CD = 2.569 * sqrt(4 * 5 / (6 * 10)).
    assert ranking.nemenyi_critical_difference(4, 10, 0.05) == pytest.approx(
        2.569 * np.sqrt(20 / 60), abs=1e-3
    )
    # k = 2: q_0.05 = 1.960 (the normal quantile), N = 6: CD = 1.960 * sqrt(2 * 3 / 36).
    assert ranking.nemenyi_critical_difference(2, 6, 0.05) == pytest.approx(1.960 * np.sqrt(6 / 36), abs=1e-3)


def test_cliques_join_frameworks_within_the_critical_difference() -> None:
    average = pd.Series({"a": 1.2, "b": 2.0, "c": 3.1, "d": 3.7})
    # a-b 0.8, b-c 1.1, c-d 0.6 are within 1.483; a-c 1.9 and b-d 1.7 are not.
    assert ranking.cliques(average, 1.483) == [["a", "b"], ["b", "c"], ["c", "d"]]


def test_ranks_average_ties() -> None:
    scores = pd.DataFrame({"a": [0.9, 0.5], "b": [0.9, 0.7], "c": [0.1, 0.7]})
    assert ranking.ranks(scores).to_numpy().tolist() == [[1.5, 1.5, 3.0], [3.0, 1.5, 1.5]]


def test_bradley_terry_recovers_known_strengths() -> None:
    true_elo = np.array([1000.0, 1150.0, 1300.0, 1500.0])
    strength = 10 ** (true_elo / 400)
    rng = np.random.default_rng(3)
    games = 4000
    wins = np.zeros((4, 4))
    for i in range(4):
        for j in range(i + 1, 4):
            won = rng.binomial(games, strength[i] / (strength[i] + strength[j]))
            wins[i, j], wins[j, i] = won, games - won
    estimate = elo.to_elo(elo.bradley_terry(wins), anchor_index=0)
    assert list(np.argsort(estimate)) == [0, 1, 2, 3]
    assert estimate == pytest.approx(true_elo, abs=25)


def test_elo_from_a_synthetic_tournament_orders_frameworks_and_anchors_the_baseline() -> None:
    # Each framework's score per instance is its strength plus noise: the order must come back.
    strengths = {"constant": 0.0, "weak": 0.5, "mid": 1.0, "strong": 1.6}
    rng = np.random.default_rng(11)
    rows = [
        {
            "dataset": f"d{d}",
            "fold": f,
            "seed": 0,
            "framework": name,
            "score": s + rng.gumbel(0, 0.6),
            "imputed": False,
        }
        for d in range(15)
        for f in range(3)
        for name, s in strengths.items()
    ]
    table = elo.elo_ratings(pd.DataFrame(rows), anchor="constant", rounds=50).ratings.set_index("framework")
    assert list(table.sort_values("elo").index) == ["constant", "weak", "mid", "strong"]
    assert table.loc["constant", "elo"] == pytest.approx(1000.0)
    assert (table["ci_low"] <= table["elo"] + 1e-9).all() and (table["elo"] <= table["ci_high"] + 1e-9).all()


def test_the_elo_figure_draws_an_interval_that_leaves_out_its_rating(tmp_path: Path) -> None:
    # Five bootstrap rounds over three datasets: a percentile interval may miss the rating it
    # brackets (here f2's), which the figure must draw as it is instead of failing.
    rng = np.random.default_rng(0)
    frameworks = ["constant", "f0", "f1", "f2"]
    rows = [{"dataset": f"d{d}", "fold": f, "seed": 0, "framework": name, "score": rng.normal() + 0.3 * i}
            for d in range(3) for f in range(2) for i, name in enumerate(frameworks)]
    ratings = elo.elo_ratings(pd.DataFrame(rows), anchor="constant", rounds=5).ratings
    assert ((ratings["elo"] < ratings["ci_low"]) | (ratings["elo"] > ratings["ci_high"])).any()
    assert plots.elo(ratings, "constant", tmp_path / "elo.png").is_file()


def _synthetic(**kwargs) -> pd.DataFrame:  # noqa: ANN003
    return jobs.prepare(synthetic_jobs(SyntheticSuite(**kwargs)))


def test_failed_jobs_score_as_the_constant_predictor_and_are_marked() -> None:
    table = _synthetic(datasets=3, fail=[("ds01_multiclass", "hgb")])
    cells = jobs.with_imputation(table)
    failed = cells[(cells["dataset"] == "ds01_multiclass") & (cells["framework"] == "hgb")]
    constant = table[(table["dataset"] == "ds01_multiclass") & (table["framework"] == "constant")]
    assert failed["imputed"].all()
    for row in failed.itertuples():
        same_fold = constant[constant["fold"] == row.fold]["result"].mean()
        assert row.score == pytest.approx(same_fold)
    assert not cells.loc[cells["framework"] != "hgb", "imputed"].any()
    board = leaderboard.leaderboard(table).set_index(["dataset", "framework"])
    assert board.loc[("ds01_multiclass", "hgb"), "failed"] == 9
    assert board.loc[("ds01_multiclass", "hgb"), "ok"] == 0
    assert board.loc[("ds01_multiclass", "hgb"), "rank"] == 5


def test_jobs_fitted_on_a_sample_are_named_with_their_rows() -> None:
    runs = synthetic_jobs(SyntheticSuite(datasets=2))
    runs["fit_rows"] = runs["train_rows"]
    sampled = (runs["framework"] == "autogluon") & (runs["dataset"] == runs["dataset"].iloc[0])
    runs.loc[sampled, "fit_rows"] = runs.loc[sampled, "train_rows"] // 2
    runs.loc[~sampled & (runs["framework"] == "hgb"), "fit_rows"] = None  # recorded before fit_rows

    notes = jobs.sampled_fits(jobs.prepare(runs))

    train = runs.loc[sampled, "train_rows"].min()
    assert notes == [f"autogluon on {runs['dataset'].iloc[0]}: {train // 2:,.0f} of {train:,.0f} rows"]
    assert jobs.sampled_fits(jobs.prepare(synthetic_jobs(SyntheticSuite(datasets=2)))) == []


def test_aggregate_weights_by_dataset_rows() -> None:
    normalized = pd.DataFrame({"a": [1.0, 0.0], "b": [0.0, 1.0]}, index=["small", "big"])
    rows = pd.Series({"small": 100.0, "big": 300.0})
    table = aggregate.aggregate(
        normalized,
        ranking.ranks(normalized),
        rows,
        pd.DataFrame(False, index=normalized.index, columns=normalized.columns),
    )
    table = table.set_index("framework")
    assert table.loc["a", "score"] == pytest.approx(0.5) and table.loc["b", "score"] == pytest.approx(0.5)
    assert table.loc["a", "score_weighted"] == pytest.approx(0.25)
    assert table.loc["b", "score_weighted"] == pytest.approx(0.75)


def test_pareto_front_by_hand() -> None:
    quality = np.array([0.9, 0.8, 0.85, 0.7, 0.9])
    cost = np.array([10.0, 1.0, 12.0, 2.0, 10.0])
    # 0.85 @ 12 is dominated by 0.9 @ 10; 0.7 @ 2 by 0.8 @ 1; the two equal points dominate nobody.
    assert pareto.on_front(quality, cost).tolist() == [True, True, False, False, True]


def test_stability_flags_the_noisy_framework() -> None:
    table = _synthetic(datasets=2, seed_noise=0.002)
    noisy = table["framework"] == "rf"
    table.loc[noisy, "result"] += np.random.default_rng(0).normal(0, 0.2, noisy.sum())
    scores, _ = jobs.task_scores(jobs.with_imputation(table))
    steady = stability.per_dataset(table, jobs.spans(scores), threshold=0.10)
    summary = stability.per_framework(steady, pd.DataFrame(), threshold=0.10)
    assert summary.loc[summary["flagged"], "framework"].tolist() == ["rf"]
    # Spread is std over the baseline-to-best span, whatever the sign or size of `result`.
    row = steady[(steady["dataset"] == "ds00_binary") & (steady["framework"] == "hgb")].iloc[0]
    assert row["spread"] == pytest.approx(row["std"] / jobs.spans(scores)["ds00_binary"])


def test_amlb_results_csv_has_exactly_the_documented_columns(tmp_path: Path) -> None:
    documented = [
        "id",
        "task",
        "framework",
        "constraint",
        "fold",
        "type",
        "result",
        "metric",
        "mode",
        "version",
        "params",
        "app_version",
        "utc",
        "duration",
        "training_duration",
        "predict_duration",
        "models_count",
        "seed",
        "info",
        "acc",
        "auc",
        "balacc",
        "brier",
        "coverage",
        "ece",
        "f1",
        "logloss",
        "macro_f1",
        "mae",
        "mase",
        "mase_naive2",
        "owa",
        "quantile_loss",
        "r2",
        "rmse",
        "smape",
        "smape_naive2",
        "top5_acc",
    ]
    table = _synthetic(datasets=3, fail=[("ds00_binary", "rf")])
    path = tmp_path / "results.csv"
    amlb.write_results_csv(table, path)
    written = pd.read_csv(path)
    assert list(written.columns) == documented
    assert len(written) == len(table)
    failed = written[(written["task"] == "ds00_binary") & (written["framework"] == "rf")]
    assert failed["result"].isna().all() and failed["info"].str.contains("synthetic failure").all()
    assert set(written.loc[written["type"] == "multiclass", "metric"]) == {"neg_logloss"}
    regression = written[written["type"] == "regression"]
    assert (regression["result"] == -regression["rmse"]).all()


def test_report_of_modality_combinations_has_their_table(tmp_path: Path) -> None:
    from tasks.report.build import build_report

    runs = synthetic_jobs(SyntheticSuite(datasets=2, folds=2, seeds=(0,)))
    names = {name: f"rig[{streams}]" for name, streams in zip(sorted(runs["dataset"].unique()),
                                                                 ("acc", "acc+gyro"), strict=True)}
    runs["dataset"] = runs["dataset"].map(names)
    report = build_report(runs, tmp_path / "report", title="mm", bootstrap_rounds=5)

    table = pd.read_csv(tmp_path / "report" / "modality.csv", keep_default_na=False)
    assert set(table["combination"]) == {"acc", "acc+gyro"}
    assert set(table["framework"]) == set(runs.loc[runs["status"] == "ok", "framework"])
    assert "## Modality combinations" in report.markdown and "| rig | acc+gyro |" in report.markdown
