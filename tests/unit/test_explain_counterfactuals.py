"""The arithmetic of explain-regression (tasks/report/counterfactuals.py) and the restore of a data
version from DVC (tasks/data/restore.py), on small frames and real files; the jobs themselves run
in tests/integration/test_explain_regression.py."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tasks.data.pinning import pin, push
from tasks.data.restore import find_version, local_remotes, restore_into
from tasks.data.versions import file_md5
from tasks.report.counterfactuals import ALL_MIXES, ONE_AT_A_TIME, attribute, mix_label, plan_mixes
from tasks.specs import load_dataset_spec

FACTORS = ["data_version", "params"]


def _runs(results: list[float], fit_s: list[float] | None = None) -> pd.DataFrame:
    """One execution's job runs: hgb on one dataset, one fold, a seed per value."""
    return pd.DataFrame(
        {
            "dataset": "d",
            "framework": "hgb",
            "fold": 0,
            "seed": list(range(len(results))),
            "status": "ok",
            "result": results,
            "fit_s": fit_s or [1.0] * len(results),
        }
    )


def test_mixes_are_every_subset_up_to_max_factors_then_one_at_a_time() -> None:
    mixes, method = plan_mixes(FACTORS, 4)
    assert method == ALL_MIXES and len(mixes) == 4 and frozenset() in mixes and frozenset(FACTORS) in mixes
    mixes, method = plan_mixes(["a", "b", "c"], 2)
    assert method == ONE_AT_A_TIME
    assert mixes == [
        frozenset(),
        frozenset({"a"}),
        frozenset({"b"}),
        frozenset({"c"}),
        frozenset({"a", "b", "c"}),
    ]
    assert [mix_label(m, FACTORS) for m in plan_mixes(FACTORS, 4)[0]] == [
        "baseline",
        "+data_version",
        "+params",
        "candidate",
    ]


def test_shapley_shares_match_the_exact_contributions_and_add_up_to_the_change() -> None:
    # Per seed: baseline 0.99, data alone -0.30, params alone -0.02, both -0.36 (an interaction).
    mix_runs = {
        frozenset(): _runs([0.99, 0.98, 0.97]),
        frozenset({"data_version"}): _runs([0.69, 0.67, 0.68]),
        frozenset({"params"}): _runs([0.97, 0.96, 0.95]),
        frozenset(FACTORS): _runs([0.63, 0.62, 0.61], fit_s=[0.1, 0.1, 0.1]),
    }
    found = attribute(FACTORS, ALL_MIXES, mix_runs)
    shares = found.table().set_index(["quantity", "factor"])
    mean = {m: r["result"].mean() for m, r in mix_runs.items()}
    data = 0.5 * (
        (mean[frozenset({"data_version"})] - mean[frozenset()])
        + (mean[frozenset(FACTORS)] - mean[frozenset({"params"})])
    )
    params = 0.5 * (
        (mean[frozenset({"params"})] - mean[frozenset()])
        + (mean[frozenset(FACTORS)] - mean[frozenset({"data_version"})])
    )
    assert shares.loc[("result", "data_version"), "share"] == pytest.approx(data, abs=1e-12)
    assert shares.loc[("result", "params"), "share"] == pytest.approx(params, abs=1e-12)
    assert found.exact("result") and found.main().factor == "data_version"
    low, high = shares.loc[("result", "data_version"), ["ci_low", "ci_high"]]
    assert low < data < high and shares.loc[("result", "data_version"), "units"] == 3
    assert shares.loc[("result", "data_version"), "fraction"] == pytest.approx(
        abs(data) / (abs(data) + abs(params))
    )
    # Costs too: only the candidate mix fits faster, so each factor gets half of that change.
    assert shares.loc[("fit_s", "params"), "share"] == pytest.approx(-0.45)
    assert "data_version explains" in found.sentence()


def test_a_single_factor_takes_the_whole_change_and_one_at_a_time_is_not_called_shapley() -> None:
    found = attribute(
        ["params"], ALL_MIXES, {frozenset(): _runs([0.9, 0.8]), frozenset({"params"}): _runs([0.5, 0.6])}
    )
    share = found.main()
    assert share is not None and share.factor == "params" and share.value == pytest.approx(-0.3)
    assert share.fraction == 1.0 and found.exact("result")
    alone = attribute(
        ["a", "b", "c"],
        ONE_AT_A_TIME,
        {
            frozenset(): _runs([1.0]),
            frozenset({"a"}): _runs([0.5]),
            frozenset({"b"}): _runs([0.9]),
            frozenset({"c"}): _runs([1.0]),
            frozenset({"a", "b", "c"}): _runs([0.3]),
        },
    )
    assert alone.main().factor == "a" and not alone.exact("result")
    assert "not a Shapley split" in alone.sentence()


def test_a_version_gone_from_the_workspace_comes_back_from_a_local_dvc_remote(
    data_home, tmp_path: Path  # noqa: ANN001 - conftest fixture
) -> None:
    # The remote is filled by DVC itself (`dvc push` through the project's pin/push), so the test
    # holds restore.py to DVC's own layout, not to one it writes. Unlike
    # tests/integration/test_data_restore_dvc.py (a git repository, a relative remote, the dvc
    # CLI), this is the no-git case with the remote as an absolute path, the form
    # `dvc remote add -d NAME /folder` writes, and it runs with the unit tests.
    home = data_home("breast_cancer")
    dvc = str(Path(sys.executable).with_name("dvc"))
    remote = tmp_path / "remote"
    subprocess.run([dvc, "init", "--no-scm", "-q"], cwd=home, check=True)
    subprocess.run([dvc, "remote", "add", "-d", "local", str(remote)], cwd=home, check=True)
    spec = load_dataset_spec("breast_cancer")
    old_md5 = file_md5(spec.path)
    pin()
    assert push() is None
    shutil.rmtree(home / ".dvc" / "cache")  # only the remote holds the pushed version now
    spec.path.write_text(spec.path.read_text().replace("\n1", "\n0", 5))  # a new version in the workspace
    assert file_md5(spec.path) != old_md5 and local_remotes(home) == {"local": remote}
    target = tmp_path / "mix" / "datasets"
    restored = restore_into(spec, old_md5, target, home)
    assert restored.source == "DVC remote 'local'" and file_md5(target / spec.file) == old_md5
    missing = find_version(spec, "0" * 32, home)
    assert missing.path is None and "nor in a local DVC remote (local)" in missing.source
