"""An adaptive suite end to end: a clear pair stops after the first round, a close one goes on.

The real command runs on a scratch project with the constant baseline and two fast frameworks on
breast_cancer under the `test` budget: constant against hgb or rf is settled after 3 folds (AUC 0.5
against 0.99), hgb against rf (both near 0.99, apart by less than their spread) is not.
"""

from __future__ import annotations

from collections import Counter

import pytest
from run_support.project import add_suites, executions, job_runs, run_cli

pytestmark = pytest.mark.integration

SUITE = {"datasets": ["breast_cancer"], "frameworks": ["constant", "hgb", "rf"], "folds": 4, "budget": "test",
         "adaptive": {"confidence": 0.95, "min_folds": 3, "max_folds": 4, "decide": ["pairwise"]}}


def test_adaptive_suite_stops_early_on_a_clear_pair_and_continues_on_a_close_one(data_home) -> None:  # noqa: ANN001
    home = add_suites(data_home("breast_cancer"), {"adaptive_mini": SUITE})
    done = run_cli(home, "run", "adaptive_mini", "--parallel", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "12 jobs (ok 11); ran 11 now" in done.stdout  # 9 in round 1, then hgb and rf's 4th fold
    [execution] = executions(home, "adaptive_mini")
    runs = job_runs(home, execution.info.run_id)
    assert all(run.data.tags["status"] == "ok" for run in runs)  # every job that ran is recorded
    folds_run = Counter(run.data.tags["framework"] for run in runs)
    assert folds_run == {"constant": 3, "hgb": 4, "rf": 4}
    [report] = (home / "reports").glob("adaptive_mini-*/report.md")
    section = report.read_text().split("## Adaptive", 1)[1]
    assert "11 jobs of the full grid's 12" in section
    assert "Still open at the last round: breast_cancer: hgb vs rf." in section


# Two frameworks, one clear pair: the first execution settles both cells after the first round.
PAIR = {"datasets": ["breast_cancer"], "frameworks": ["constant", "hgb"], "folds": 4, "budget": "test",
        "adaptive": {"confidence": 0.95, "min_folds": 3, "max_folds": 4, "decide": ["pairwise"]}}
# The same suite with hgb cut to one small tree: still clearly above the constant (AUC about 0.95, the
# pair settles again), but about 4% below the first execution's, beyond the nightly's 2% threshold.
STUMP = {"name": "hgb", "params": {"max_iter": 1, "max_depth": 2, "early_stopping": False}}


@pytest.mark.heavy  # two runs of the CLI
def test_a_cell_settled_before_that_regressed_is_reopened(data_home) -> None:  # noqa: ANN001
    home = add_suites(data_home("breast_cancer"), {"adaptive_pair": PAIR})
    first = run_cli(home, "run", "adaptive_pair", "--parallel", "2")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "ran 6 now" in first.stdout  # both cells settled in round 1
    add_suites(home, {"adaptive_pair": {**PAIR, "frameworks": ["constant", STUMP]}})
    second = run_cli(home, "run", "adaptive_pair", "--parallel", "2")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "ran 7 now" in second.stdout  # hgb's 4th fold; the constant, unchanged, stays settled
    newest = max(executions(home, "adaptive_pair"), key=lambda run: run.info.start_time)
    assert newest.data.tags["adaptive_reopened"] == '[["breast_cancer", "hgb"]]'
    assert Counter(run.data.tags["framework"] for run in job_runs(home, newest.info.run_id)) == {
        "constant": 3, "hgb": 4}
    [report] = (home / "reports").glob(f"adaptive_pair-{newest.info.run_id[:8]}/report.md")
    section = report.read_text().split("## Adaptive", 1)[1]
    assert "reopened (regressed)" in section and "breast_cancer / hgb." in section
