"""A regression planted in two factors at once, explained by running the experiments.

hgb on breast_cancer (2 folds x 1 seed, test budget). The candidate changes two things: the
framework param max_iter 100 -> 3, and the data version (30% of the labels flipped; the first
version kept in the scratch project's DVC cache, as `dvc commit` would). The nightly's
attribution (within the suite's `attribution: {max_jobs: 4}`) takes the two executions as two of
the 4 mixes and runs the other two as real jobs, restoring the old data version from the DVC
cache for the mix that needs it. It must split the AUC drop over both factors: each share equal
to the exact Shapley value computed here by hand from the four executions' recorded results,
data_version the larger, the shares adding up to the change. Its page is logged on the
candidate's MLflow run. Bad inputs are one sentence each (exit 2 from the command), nothing run.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SUITE = "planted"
BASELINE_YAML = (
    "datasets: [breast_cancer]\nframeworks: [{name: hgb, params: {max_iter: 100}}]\n"
    "folds: 2\nseeds: [0]\nbudget: test\nattribution: {max_jobs: 4}\n"
)
CANDIDATE_YAML = BASELINE_YAML.replace("max_iter: 100", "max_iter: 3")
FLIPPED = 0.3


def _flip_labels(csv: Path, target: str, share: float) -> None:
    frame = pd.read_csv(csv, dtype={target: str})
    rng = np.random.default_rng(0)
    rows = rng.choice(len(frame), size=int(share * len(frame)), replace=False)
    classes = sorted(frame[target].unique())
    flipped = frame[target].copy()
    flipped.iloc[rows] = [classes[1] if v == classes[0] else classes[0] for v in flipped.iloc[rows]]
    frame[target] = flipped
    frame.to_csv(csv, index=False)


def _cli_exit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str]:
    """The command in this process (a subprocess would import MLflow and Prefect again)."""
    from flows.cli import main

    capsys.readouterr()  # what the flows printed before: not this command's
    monkeypatch.setattr(sys, "argv", ["automl-eval", *args])
    with pytest.raises(SystemExit) as exited:
        main()
    captured = capsys.readouterr()
    return int(exited.value.code or 0), captured.out + captured.err


def test_planted_two_factor_regression_is_split_between_data_version_and_params(
    data_home,  # noqa: ANN001 - conftest fixture
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = data_home("breast_cancer")
    shutil.copy(ROOT / "specs" / "budgets.yaml", home / "specs" / "budgets.yaml")
    (home / "specs" / "suites").mkdir(exist_ok=True)
    suite_file = home / "specs" / "suites" / f"{SUITE}.yaml"
    from flows.cli_run import configure_embedded_prefect

    configure_embedded_prefect()
    from flows.benchmark import benchmark
    from flows.deployments import attribute_regression
    from flows.explain_regression import explain
    from tasks.data.restore import keep_in_cache
    from tasks.errors import UserError
    from tasks.report.counterfactuals import unit_values
    from tasks.tracking import read

    suite_file.write_text(BASELINE_YAML)
    base_id = benchmark(SUITE, execution="new")["execution_id"]
    data_file = home / "datasets" / "breast_cancer.csv"
    keep_in_cache(data_file, home)  # the first version stays restorable, as `dvc commit` keeps it
    _flip_labels(data_file, "diagnosis", FLIPPED)
    suite_file.write_text(CANDIDATE_YAML)
    cand_id = benchmark(SUITE, execution="new")["execution_id"]

    with pytest.raises(UserError, match=r"more than --max-jobs 3 .*not run: \+data_version, \+params\)"):
        explain(base_id, cand_id, max_jobs=3)  # 2 mixes x 2 jobs
    with pytest.raises(UserError, match="--max-jobs is 0"):
        explain(base_id, cand_id, max_jobs=0)
    # As the nightly does it on a regression: within the suite's `attribution: {max_jobs: 4}`.
    explanation = attribute_regression(SUITE, base_id, cand_id)
    assert explanation is not None
    assert explanation.factors == ["data_version", "params"]
    # The two executions are the ends; the two one-factor mixes ran, 2 jobs each.
    assert explanation.jobs_run == 4
    by_label = {m.label: m.execution_id for m in explanation.mixes}
    assert by_label["baseline"] == base_id and by_label["candidate"] == cand_id
    assert set(by_label) == {"baseline", "+data_version", "+params", "candidate"}

    # The exact contributions, by hand, from what the four executions recorded in MLflow.
    value, versions = {}, {}
    for label, execution_id in by_label.items():
        runs = read.job_runs(execution_id=execution_id)
        assert (runs["status"] == "ok").all() and len(runs) == 2
        value[label] = float(unit_values(runs, "result").mean())
        versions[label] = set(runs["data_version"])
    # "+params" ran on the first data version, brought back from the DVC cache.
    assert versions["+params"] == versions["baseline"] != versions["+data_version"] == versions["candidate"]
    data_exact = 0.5 * (
        (value["+data_version"] - value["baseline"]) + (value["candidate"] - value["+params"])
    )
    params_exact = 0.5 * (
        (value["+params"] - value["baseline"]) + (value["candidate"] - value["+data_version"])
    )
    shares = explanation.attribution.table().set_index(["quantity", "factor"])
    assert shares.loc[("result", "data_version"), "share"] == pytest.approx(data_exact, abs=1e-9)
    assert shares.loc[("result", "params"), "share"] == pytest.approx(params_exact, abs=1e-9)
    assert data_exact < params_exact < 0  # both hurt; the flipped labels hurt more
    assert explanation.attribution.exact("result")
    assert read.execution(by_label["+params"])["suite"] == f"{SUITE}-attribution"
    assert "fit_s" in explanation.attribution.totals  # costs are attributed too

    folder = home / "reports" / f"attribution-{base_id[:8]}-vs-{cand_id[:8]}"
    logged = {Path(a.path).name for a in read.client().list_artifacts(cand_id, "attribution")}
    assert {"attribution.md", "attribution.csv", "mixes.csv", "regressions.csv"} <= logged
    page = (folder / "attribution.md").read_text()
    assert "data_version: breast_cancer" in page and "main factor" in page
    regressions = pd.read_csv(folder / "regressions.csv")
    assert (
        regressions.loc[regressions["metric"] == "result", "main factor"].iloc[0].startswith("data_version (")
    )
    assert read.execution(cand_id).get("attribution_main_factor", "").startswith("data_version")

    # Bad input: one sentence, exit 2, nothing run.
    code, said = _cli_exit(monkeypatch, capsys, "explain-regression", "0" * 32, cand_id)
    assert code == 2 and "no run with id" in said and len(said.strip().splitlines()) == 1
    code, said = _cli_exit(monkeypatch, capsys, "explain-regression", base_id, cand_id, "--max-jobs", "0")
    assert code == 2 and "--max-jobs is 0" in said
    other_suite = by_label["+params"]
    with pytest.raises(UserError, match="explain two executions of one suite"):
        explain(base_id, other_suite)
