"""The nightly comparison on two real executions that differ only in one framework's params.

`automl-eval run` twice on a tiny suite (hgb and rf on breast_cancer, 1 fold x 2 seeds); the
second time hgb gets `max_iter: 1, max_depth: 1` instead of 400 rounds. The nightly hook must report
hgb's regression, name the params (each with its two values) as its main factor, and leave rf
alone. Then `automl-eval compare` writes compare.md. (Where the series part is checked on synthetic
series in tests/unit/test_report_series.py.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.heavy]  # over a minute each: make test-heavy (CI)
ROOT = Path(__file__).resolve().parents[2]
SUITE = "compare_real"
# The baseline's hgb fits long enough (400 rounds, no early stop) for its fitting stage to be sampled
# many times even on a quiet machine; the candidate's single stump fits at once.
BASELINE_YAML = (
    "datasets: [breast_cancer]\n"
    "frameworks: [{name: hgb, params: {max_iter: 400, early_stopping: false}}, rf]\n"
    "folds: 1\nseeds: [0, 1]\nbudget: test\n"
)
CANDIDATE_YAML = (
    "datasets: [breast_cancer]\n"
    "frameworks: [{name: hgb, params: {max_iter: 1, max_depth: 1}}, rf]\n"
    "folds: 1\nseeds: [0, 1]\nbudget: test\n"
)


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    uri = f"sqlite:///{home / 'mlflow' / 'mlflow.db'}"
    env = {**os.environ, "AUTOML_EVAL_HOME": str(home), "MLFLOW_TRACKING_URI": uri}
    return subprocess.run(
        [sys.executable, "-c", "from flows.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        timeout=600,
    )


def test_params_changed_on_one_framework_are_the_main_factor_of_its_regression(
    data_home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch  # noqa: ANN001 - conftest fixture
) -> None:
    home = data_home("breast_cancer")
    shutil.copy(ROOT / "specs" / "budgets.yaml", home / "specs" / "budgets.yaml")
    (home / "specs" / "suites").mkdir(exist_ok=True)
    suite_file = home / "specs" / "suites" / f"{SUITE}.yaml"
    for text in (BASELINE_YAML, CANDIDATE_YAML):
        suite_file.write_text(text)
        done = _cli(home, "run", SUITE, "--new")
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

    uri = f"sqlite:///{home / 'mlflow' / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    from tasks.report.compare_store import compare_with_previous_nightly, resolve_execution

    tonight = resolve_execution(f"{SUITE}@latest", uri=uri)
    nightly = compare_with_previous_nightly(tonight, uri=uri)
    assert nightly.comparison is not None and nightly.regressed
    table = nightly.comparison.table
    hgb = table[(table["framework"] == "hgb") & (table["metric"] == "result")].iloc[0]
    assert hgb["regression"] and hgb["main factor"] == "params"
    assert hgb["differing factors"] == ("params: early_stopping false -> unset, max_depth unset -> 1, "
                                        "max_iter 400 -> 1")
    rf = table[table["framework"] == "rf"]
    assert rf["differing factors"].eq("").all()
    assert set(rf["main factor"]) <= {"no change", "none differ (noise)"}
    # rf's costs may move on a loaded machine; its result, same seeds and data, cannot.
    assert not rf[rf["metric"] == "result"]["regression"].any()

    out = home / "reports" / "compare"  # --out must lie inside the project
    done = _cli(home, "compare", f"{SUITE}@previous", f"{SUITE}@latest", "--out", str(out))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "params" in done.stdout and "REGRESSION" in done.stdout
    assert (out / "compare.md").is_file()
