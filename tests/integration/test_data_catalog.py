"""The whole catalog, end to end: rebuilt from the packages it hashes to what datasets.dvc pins,
it passes the gate, the CLI's exit codes say so, and a DVC remote is preferred when it has the data."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tasks.data.build import build
from tasks.data.pinning import push
from tasks.data.validate import validate_all
from tasks.data.versions import dir_md5, pinned_md5

pytestmark = pytest.mark.integration

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).with_name("automl-eval"))


@pytest.fixture
def empty_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh checkout's view: every card, params and .dvcignore, no datasets/."""
    shutil.copytree(PROJECT_ROOT / "specs" / "datasets", tmp_path / "specs" / "datasets")
    for name in ("params.yaml", ".dvcignore", "datasets.dvc"):
        shutil.copy(PROJECT_ROOT / name, tmp_path / name)
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path))
    return tmp_path


def test_materialized_catalog_hashes_to_the_pin_and_passes_the_gate(empty_home: Path) -> None:
    pinned = pinned_md5()
    assert pinned is not None, "datasets.dvc must pin datasets/"
    report = build(use_dvc=False)
    assert not report.errors, report.errors
    built = empty_home / "datasets"
    if dir_md5(built) != pinned:
        workspace = PROJECT_ROOT / "datasets"
        differing = sorted(
            str(p.relative_to(built))
            for p in built.rglob("*")
            if p.is_file()
            and not (workspace / p.relative_to(built)).is_file()
            or p.is_file()
            and (workspace / p.relative_to(built)).read_bytes() != p.read_bytes()
        )
        pytest.fail(
            f"datasets/ rebuilt from the packages hashes to {dir_md5(built)}, datasets.dvc pins {pinned}; "
            f"files differing from the project's datasets/: {differing}. Re-pin with "
            "`automl-eval datasets build --pin` after changing a card or a source, and keep sources "
            "byte-reproducible (no absolute paths, times or unseeded randomness in what they write)."
        )
    failed = {o.dataset: o.failures for o in validate_all() if not o.ok}
    assert not failed


def _cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AUTOML_EVAL_HOME": str(home), "COLUMNS": "400"}
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=300, env=env)


def test_cli_validate_exits_0_on_the_catalog_and_1_on_a_corrupted_copy(data_home) -> None:
    home = data_home("breast_cancer", "penguins", "wage")
    clean = _cli("datasets", "validate", home=home)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "3 of 3 datasets passed the gate" in clean.stdout

    csv = home / "datasets" / "penguins.csv"
    pd.read_csv(csv).assign(island="Dream").to_csv(csv, index=False)
    broken = _cli("datasets", "validate", home=home)
    output = broken.stdout + broken.stderr
    assert broken.returncode == 1, output
    assert "column 'island' failed expect_column_unique_value_count_to_be_between" in output
    # The two unchanged datasets keep their verdicts; only the changed one is gated again.
    assert "2 of 3 datasets passed the gate; failed: penguins (2 verdicts reused, 1 computed)." in output
    assert "Traceback" not in output


def test_build_prefers_the_dvc_remote_and_leaves_dvc_status_clean(data_home) -> None:
    home = data_home()
    shutil.copy(PROJECT_ROOT / "specs" / "datasets" / "penguins.yaml", home / "specs" / "datasets")
    dvc = str(Path(sys.executable).with_name("dvc"))
    subprocess.run([dvc, "init", "--no-scm", "-q"], cwd=home, check=True)
    subprocess.run([dvc, "remote", "add", "-d", "local", str(home / "remote")], cwd=home, check=True)

    first = build()
    assert first.route.startswith("materialized") and first.pin_status == "pinned now"
    assert push() is None
    shutil.rmtree(home / "datasets")
    shutil.rmtree(home / ".dvc" / "cache")

    again = build()
    assert again.route == "pulled from the DVC remote", again.pull_skipped
    assert again.pin_status == "clean" and again.ok
    status = subprocess.run([dvc, "status", "datasets.dvc"], cwd=home, capture_output=True, text=True)
    assert "up to date" in status.stdout, status.stdout + status.stderr

    # A user's new dataset is work in progress: reported, kept, not an error ...
    (home / "datasets" / "mine.csv").write_text("x,y\n1,2\n3,4\n5,6\n")
    (home / "specs" / "datasets" / "mine.yaml").write_text(
        "source: {package: me, call: by hand}\nfile: mine.csv\ntarget: y\n"
        "problem_type: regression\ncolumns: {x: numeric}\nfolds: 3\n"
    )
    added = build()
    assert (added.pin_status, added.ok) == ("new files", True)
    assert added.differing_files == ["mine.csv", "mine.folds.csv"]
    assert build(pin=True).pin_status == "re-pinned"
    # ... but a pinned file that no source can rebuild, changed afterwards, breaks the pin.
    (home / "datasets" / "mine.csv").write_text("x,y\n1,2\n3,4\n5,7\n")
    changed = build()
    assert (changed.pin_status, changed.ok) == ("differs", False)
    assert "mine.csv" in changed.differing_files


def test_a_file_edited_by_hand_is_kept_with_a_sentence_until_overwrite_is_asked(data_home) -> None:
    home = data_home()
    shutil.copy(PROJECT_ROOT / "specs" / "datasets" / "penguins.yaml", home / "specs" / "datasets")
    dvc = str(Path(sys.executable).with_name("dvc"))
    subprocess.run([dvc, "init", "--no-scm", "-q"], cwd=home, check=True)
    assert build().pin_status == "pinned now"
    csv = home / "datasets" / "penguins.csv"
    packaged = csv.read_bytes()

    # The user's edit: 30 rows' species relabelled. Building again keeps it and says so.
    edited = pd.read_csv(csv)
    edited.loc[:29, "species"] = "Gentoo"
    edited.to_csv(csv, index=False)
    edit = csv.read_bytes()
    again = _cli("datasets", "build", "penguins", home=home)
    output = again.stdout + again.stderr
    assert csv.read_bytes() == edit, "the build overwrote the user's edit"
    assert "kept:" in output and "datasets/penguins.csv has local changes" in output, output
    assert "--overwrite" in output and "--pin" in output and "Traceback" not in output

    # Asked to, the build rebuilds the file from its package: the pinned bytes again.
    rebuilt = build(["penguins"], overwrite=True)
    assert not rebuilt.kept and csv.read_bytes() == packaged
    assert rebuilt.pin_status == "clean"
