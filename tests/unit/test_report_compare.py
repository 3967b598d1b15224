"""compare: a real regression is flagged and explained; seed noise is not."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ holds the synthetic-run helper; it is not an installed package
    sys.path.insert(0, str(ROOT))

from bench.synthetic_runs import SyntheticSuite, synthetic_jobs  # noqa: E402
from tasks.report.compare import compare  # noqa: E402
from tasks.report.compare_attribution import shapley  # noqa: E402
from tasks.report.compare_markdown import diagnostic_rows, markdown  # noqa: E402

CELL = ("ds00_binary", "hgb")
FIVE_POINTS = 0.05 / 0.45  # the synthetic AUC is 0.5 + 0.45 * quality


def _runs(seeds: tuple[int, ...], **kwargs) -> pd.DataFrame:  # noqa: ANN003
    return synthetic_jobs(SyntheticSuite(datasets=3, seeds=seeds, **kwargs))


def test_seed_noise_is_not_a_regression() -> None:
    result = compare(_runs((0, 1, 2)), _runs((3, 4, 5)))
    assert not result.regressed
    assert result.table["differing factors"].eq("").all()


def test_an_injected_five_point_drop_is_flagged_and_attributed() -> None:
    candidate = _runs((3, 4, 5), shift={CELL: -FIVE_POINTS}, overrides={"framework_version": "2.0.0"})
    result = compare(_runs((0, 1, 2)), candidate)
    flagged = result.regressions
    assert flagged[["dataset", "framework", "metric"]].values.tolist() == [[*CELL, "result"]]
    row = flagged.iloc[0]
    assert row["change"] == pytest.approx(-0.05, abs=0.005)
    assert row["z"] < -3
    assert row["main factor"] == "framework_version"
    table = diagnostic_rows(result)
    assert {"metric", "current", "baseline", "change", "main factor"} <= set(table.columns)
    assert "REGRESSION" in markdown(result, "base", "cand")


def test_a_small_drop_within_the_threshold_is_not_flagged() -> None:
    candidate = _runs((3, 4, 5), shift={CELL: -0.005 / 0.45})
    assert not compare(_runs((0, 1, 2)), candidate).regressed


def test_cost_regression_needs_the_cost_threshold() -> None:
    base = _runs((0, 1, 2))
    slower = base.copy()
    mask = (slower["dataset"] == CELL[0]) & (slower["framework"] == CELL[1])
    slower.loc[mask, "fit_s"] *= 1.6
    flagged = compare(base, slower).regressions
    assert flagged[["framework", "metric"]].values.tolist() == [["hgb", "fit_s"]]


def test_single_runs_have_no_noise_estimate_and_the_page_says_the_threshold_alone_decided() -> None:
    def single(seed: int) -> pd.DataFrame:
        return synthetic_jobs(SyntheticSuite(datasets=3, folds=1, seeds=(seed,)))

    base = single(0)
    slower = single(1)
    slower.loc[(slower["dataset"] == CELL[0]) & (slower["framework"] == CELL[1]), "fit_s"] *= 1.6
    result = compare(base, slower)

    assert result.table["z"].isna().all()
    assert ["hgb", "fit_s"] in result.regressions[["framework", "metric"]].values.tolist()
    assert "No noise estimate for" in markdown(result, "base", "cand")
    assert "No noise estimate" not in markdown(compare(_runs((0, 1, 2)), _runs((3, 4, 5))), "base", "cand")


def test_candidate_failures_are_a_regression() -> None:
    result = compare(_runs((0, 1, 2)), _runs((0, 1, 2), fail=[CELL]))
    assert result.regressions[["dataset", "framework", "metric"]].values.tolist() == [[*CELL, "result"]]


def test_shapley_values_of_a_known_game() -> None:
    # v(S): additive 3 for a, 1 for b, plus 2 when both: Shapley gives a 4, b 2 (the synergy halves).
    values = {frozenset(): 0.0, frozenset("a"): 3.0, frozenset("b"): 1.0, frozenset("ab"): 6.0}
    split = shapley(["a", "b"], lambda s: values[frozenset(s)])
    assert split == pytest.approx({"a": 4.0, "b": 2.0})


def test_two_factors_split_by_shapley_when_runs_vary_one_at_a_time() -> None:
    version, data = {"framework_version": "2.0.0"}, {"data_version": "md5-new"}
    candidate = _runs((3, 4, 5), shift={CELL: -FIVE_POINTS}, overrides={**version, **data})
    pool = pd.concat(
        [
            _runs((6, 7, 8), shift={CELL: -0.8 * FIVE_POINTS}, overrides=version),
            _runs((6, 7, 8), shift={CELL: -0.2 * FIVE_POINTS}, overrides=data),
        ]
    )
    without_pool = compare(_runs((0, 1, 2)), candidate).regressions.iloc[0]["main factor"]
    assert "not separable" in without_pool and "framework_version" in without_pool
    with_pool = compare(_runs((0, 1, 2)), candidate, pool=pool).regressions.iloc[0]["main factor"]
    assert with_pool.startswith("framework_version (8")  # about 80% of the change


def test_cells_run_on_one_side_only_are_listed_not_compared() -> None:
    base = _runs((0, 1, 2))
    candidate = _runs((3, 4, 5))
    candidate = candidate[candidate["framework"] != "rf"]
    result = compare(base, candidate)
    assert "ds00_binary / rf (only in the baseline)" in result.unmatched
    assert "rf" not in set(result.table["framework"]) and not result.regressed


def test_a_param_on_one_side_only_is_the_main_factor_with_its_values() -> None:
    base = _runs((0, 1, 2))
    candidate = _runs((3, 4, 5), shift={CELL: -FIVE_POINTS})
    candidate.loc[candidate["framework"] == "hgb", "params.param.max_iter"] = "3"
    candidate["evaluation.serving"] = "ok"  # an outcome, not a setting
    for first, second, values in ((base, candidate, "unset -> 3"), (candidate, base, "3 -> unset")):
        result = compare(first, second)
        hgb = result.table[(result.table["framework"] == "hgb") & (result.table["dataset"] == CELL[0])]
        assert hgb.iloc[0]["main factor"] == "params"
        assert hgb.iloc[0]["differing factors"] == f"params: max_iter {values}"
        assert result.table[result.table["framework"] == "rf"]["differing factors"].eq("").all()
    assert compare(base, candidate).regressions[["dataset", "framework"]].values.tolist() == [list(CELL)]


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("fold", "abc", "`fold` is 'abc'"),
        ("status", "weird", "tag `status` is 'weird'"),
        ("dataset", "", "no `dataset` tag"),
        ("result", float("nan"), "no `result` metric"),
        ("job_key", "same", "both record job_key same"),
    ],
)
def test_unexpected_store_content_is_one_sentence_naming_run_and_field(
    field: str, value: object, words: str
) -> None:
    from tasks.errors import UserError

    candidate = _runs((3, 4, 5))
    candidate["run_id"] = [f"run{index}" for index in range(len(candidate))]
    candidate.loc[candidate.index[:2] if field == "job_key" else candidate.index[:1], field] = value
    with pytest.raises(UserError) as caught:
        compare(_runs((0, 1, 2)), candidate)
    message = str(caught.value)
    assert words in message and "run0" in message and "candidate" in message
    assert "\n" not in message


def test_series_place_a_slower_fit_in_the_fitting_phase_and_the_page_plots_them(tmp_path: Path) -> None:
    """compare(series=...) as the CLI calls it: each run's watchdog series, keyed by run id. The
    candidate's hgb jobs fit 1.6x longer with a higher RSS peak; `where` says so, and compare.md
    plots the aligned series of that regression."""
    from test_report_series import _job

    from tasks.report.compare_markdown import write_folder
    from tasks.resources import SERIES_FILE

    base, cand = _runs((0, 1, 2)), _runs((0, 1, 2))
    in_cell = (cand["dataset"] == CELL[0]) & (cand["framework"] == CELL[1])
    cand.loc[in_cell, "fit_s"] *= 1.6
    base["run_id"] = [f"b{k}" for k in range(len(base))]
    cand["run_id"] = [f"c{k}" for k in range(len(cand))]
    series = {run_id: {SERIES_FILE: _job(40, 500.0, seed=k)} for k, run_id in enumerate(base["run_id"])}
    series |= {
        run_id: {SERIES_FILE: _job(64 if hit else 40, 690.0 if hit else 500.0, seed=100 + k)}
        for k, (run_id, hit) in enumerate(zip(cand["run_id"], in_cell, strict=True))
    }
    result = compare(base, cand, series=series)
    flagged = result.regressions
    assert [*CELL, "fit_s"] in flagged[["dataset", "framework", "metric"]].values.tolist()
    where = flagged[(flagged["framework"] == CELL[1]) & (flagged["metric"] == "fit_s")]["where"].iloc[0]
    assert "DTW" in where and "fitting 1.6x longer" in where, where
    others = result.table[result.table["framework"] != CELL[1]]
    assert not others["where"].str.contains("longer").any()
    page = (write_folder(result, tmp_path, "base", "cand") / "compare.md").read_text()
    assert "Where the top regressions happened" in page
    plotted = sorted(p.name for p in tmp_path.glob("series_1_*.png"))
    assert plotted and all(f"]({name})" in page for name in plotted)


def test_a_framework_at_another_version_is_one_cell_and_the_version_is_the_factor() -> None:
    # The candidate ran hgb in its own environment at another version (`hgb@2.0.0`), five points worse.
    candidate = _runs((3, 4, 5), shift={CELL: -FIVE_POINTS})
    cell = (candidate["dataset"] == CELL[0]) & (candidate["framework"] == CELL[1])
    candidate.loc[cell, "framework"] = "hgb@2.0.0"
    candidate.loc[cell, "framework_version"] = "2.0.0"
    result = compare(_runs((0, 1, 2)), candidate)
    assert not any(CELL[0] in line for line in result.unmatched)
    [row] = result.regressions.to_dict("records")
    assert (row["dataset"], row["framework"]) == (CELL[0], "hgb -> hgb@2.0.0")
    assert row["main factor"] == "framework_version"
    assert "framework_version" in row["differing factors"] and "-> 2.0.0" in row["differing factors"]
