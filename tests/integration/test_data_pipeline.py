"""dvc.yaml's stages follow the data: `datasets build` ends with `dvc repro`, so dvc.lock records
what was built, `datasets status` names each stale stage and file, and `--committed` catches a
data change committed without its lock (CI's check after the data build)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration

PROJECT_ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}


def _run(*command: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **GIT_ENV, "AUTOML_EVAL_HOME": str(home), "COLUMNS": "400"}
    return subprocess.run(command, cwd=home, capture_output=True, text=True, timeout=300, env=env)


def _cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return _run(str(BIN / "automl-eval"), *args, home=home)


def _project_pipeline_on(home: Path) -> None:
    """The project's dvc.yaml, its commands and parameters as they are, keeping the deps the copy has."""
    pipeline = yaml.safe_load((PROJECT_ROOT / "dvc.yaml").read_text(encoding="utf-8"))
    for stage in pipeline["stages"].values():
        stage["deps"] = [dep for dep in stage["deps"] if dep in ("datasets", "specs/datasets")]
    (home / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False), encoding="utf-8")


def test_build_records_the_pipeline_and_status_names_the_stale_stage_and_file(data_home) -> None:
    home = data_home("penguins")
    _project_pipeline_on(home)
    for command in (["git", "init", "-q"], [str(BIN / "dvc"), "init", "-q"]):
        assert _run(*command, home=home).returncode == 0

    built = _cli("datasets", "build", home=home)
    output = built.stdout + built.stderr
    assert built.returncode == 0, output
    assert "dvc repro: ran materialize, validate; dvc.lock updated" in output
    assert "dvc status: data and pipelines are up to date." in output
    status = _run(str(BIN / "dvc"), "status", home=home)
    assert "Data and pipelines are up to date." in status.stdout, status.stdout + status.stderr
    assert _run("git", "add", "-A", home=home).returncode == 0
    assert _run("git", "commit", "-qm", "data and its lock", home=home).returncode == 0
    assert _cli("datasets", "status", "--committed", home=home).returncode == 0

    # A card changes and is committed without its lock: `datasets status` names the stage and the file.
    card = home / "specs" / "datasets" / "penguins.yaml"
    card.write_text(card.read_text(encoding="utf-8") + "# reviewed\n", encoding="utf-8")
    assert _run("git", "commit", "-qam", "a card without its lock", home=home).returncode == 0
    stale = _cli("datasets", "status", home=home)
    assert stale.returncode == 1
    assert "stage 'materialize' is out of date: its dependency specs/datasets is modified" in stale.stdout

    # The build brings the lock along; CI's check still fails until that lock is committed.
    rebuilt = _cli("datasets", "build", home=home)
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    assert "dvc repro: ran materialize, validate; dvc.lock updated" in rebuilt.stdout
    assert "Data and pipelines are up to date." in _run(str(BIN / "dvc"), "status", home=home).stdout
    drift = _cli("datasets", "status", "--committed", home=home)
    assert drift.returncode == 1
    assert ("the committed dvc.lock is stale: stage 'materialize', its dependency specs/datasets is "
            "recorded with another hash by the build") in drift.stdout.replace("\n", " ")
    assert _run("git", "commit", "-qam", "its lock", home=home).returncode == 0
    assert _cli("datasets", "status", "--committed", home=home).returncode == 0

    # A build of some datasets only, or with data the pin lacks, leaves the lock alone and says so.
    partial = _cli("datasets", "build", "penguins", home=home)
    assert "dvc repro not run, dvc.lock unchanged: only some datasets were built" in partial.stdout
