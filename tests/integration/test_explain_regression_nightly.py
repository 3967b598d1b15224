"""The nightly does the attribution by itself: two runs of the real `nightly` deployment flow, the
second differing in two factors (hgb's max_iter 100 -> 3 and a new data version with 30% of the
labels flipped), end with an attribution artifact on the second: a markdown artifact on its Prefect
flow run, the `attribution/` page on its MLflow execution and the measured main factor as its tag.

hgb on breast_cancer, one fold, one seed, `test` budget, within the suite's `attribution:
{max_jobs: 2}`: the two nightlies are two of the four mixes, the other two run as real jobs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_explain_regression import FLIPPED, _flip_labels

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SUITE = "nightly-planted"
BASELINE_YAML = (
    "datasets: [breast_cancer]\nframeworks: [{name: hgb, params: {max_iter: 100}}]\n"
    "folds: 1\nseeds: [0]\nbudget: test\nattribution: {max_jobs: 2}\n"
)


def test_two_nightlies_differing_in_two_factors_leave_an_attribution_on_the_second(
    data_home,  # noqa: ANN001 - conftest fixture
) -> None:
    home = data_home("breast_cancer")
    shutil.copy(ROOT / "specs" / "budgets.yaml", home / "specs" / "budgets.yaml")
    (home / "specs" / "suites").mkdir(exist_ok=True)
    suite_file = home / "specs" / "suites" / f"{SUITE}.yaml"
    suite_file.write_text(BASELINE_YAML)
    from flows.cli_run import configure_embedded_prefect

    configure_embedded_prefect()
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from flows.deployments import nightly
    from tasks.data.restore import keep_in_cache
    from tasks.report.publish import artifact_key
    from tasks.tracking import read

    first = nightly(suite=SUITE, return_state=True)
    assert first.is_completed(), first.message  # nothing to compare with yet
    last_night = read.executions(suite=SUITE)["execution_id"].iloc[0]
    keep_in_cache(home / "datasets" / "breast_cancer.csv", home)  # as `dvc commit` keeps it
    _flip_labels(home / "datasets" / "breast_cancer.csv", "diagnosis", FLIPPED)
    suite_file.write_text(BASELINE_YAML.replace("max_iter: 100", "max_iter: 3"))

    second = nightly(suite=SUITE, return_state=True)
    assert second.is_failed()  # the night regressed
    tonight = read.executions(suite=SUITE)["execution_id"].iloc[0]
    assert tonight != last_night
    assert read.execution(tonight).get("regression") == "true"

    # On the Prefect flow run of the second nightly: the attribution page, measured.
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[artifact_key("attribution", SUITE)]))
        )
    [page] = [a for a in artifacts if a.flow_run_id == second.state_details.flow_run_id]
    assert page.type == "markdown" and f"# Why {tonight} regressed against {last_night}" in page.data
    assert "data_version: breast_cancer" in page.data and "params: hgb max_iter 100 -> 3" in page.data
    assert "No attribution was run" not in page.data

    # On the MLflow execution: the page and its tables, and the measured culprit as a tag.
    logged = {Path(a.path).name for a in read.client().list_artifacts(tonight, "attribution")}
    assert {"attribution.md", "attribution.csv", "mixes.csv", "regressions.csv"} <= logged
    main = read.execution(tonight).get("attribution_main_factor", "")
    # The planted culprit: 30% of the labels flipped costs hgb far more than 3 boosting rounds instead
    # of 100 on breast_cancer (the data version took 96% of the drop when this was measured).
    assert main.startswith("data_version (") and main.endswith("measured)"), main
    mixes = read.executions(suite=f"{SUITE}-attribution")
    mixes = mixes[mixes["attribution_of"] == tonight]
    assert sorted(mixes["attribution_mix"]) == ["+data_version", "+params"]
