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
