"""A data version gone from the workspace and from the DVC cache comes back from the local DVC remote,
as the real `dvc` pushed it (DVC's own layout, not one this project writes), for an attribution mix.

The scratch project is a git repository pinning datasets/ with `dvc add` (as datasets.dvc pins the
catalog), two revisions of breast_cancer.csv pushed to a local remote (`.dvc-remote`, the project's
own remote setting); then the cache is emptied and the file is at its new version.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.data.restore import find_version, local_remotes, restore_into
from tasks.data.versions import file_md5
from tasks.specs import load_dataset_spec

pytestmark = pytest.mark.integration


def _run(home: Path, *command: str) -> None:
    done = subprocess.run(command, cwd=home, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"{' '.join(command)}: {done.stdout}{done.stderr}"


def _dvc(home: Path, *args: str) -> None:
    _run(home, sys.executable, "-m", "dvc", *args)


def _pin_and_push(home: Path, message: str) -> None:
    _dvc(home, "add", "datasets")
    _dvc(home, "push")
    _run(home, "git", "add", "-A")
    _run(home, "git", "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", message)


def test_a_data_version_removed_from_the_workspace_and_cache_is_restored_from_the_local_remote(
    data_home, tmp_path: Path,  # noqa: ANN001 - conftest fixture
) -> None:
    home = data_home("breast_cancer")
    _run(home, "git", "init", "-q")
    _dvc(home, "init", "-q")
    _dvc(home, "config", "core.analytics", "false")
    _dvc(home, "remote", "add", "-d", "local", ".dvc-remote")  # DVC stores it relative to .dvc/
    assert "url = ../.dvc-remote" in (home / ".dvc" / "config").read_text()  # as the project's own
    spec = load_dataset_spec("breast_cancer")
    old_md5 = file_md5(spec.path)
    _pin_and_push(home, "first data version")
    rows = spec.path.read_text().splitlines()
    spec.path.write_text("\n".join(rows[:-20]) + "\n")  # the next version: 20 rows fewer
    _pin_and_push(home, "second data version")
    new_md5 = file_md5(spec.path)
    assert new_md5 != old_md5

    shutil.rmtree(home / ".dvc" / "cache")  # neither the workspace nor the cache holds it now
    assert local_remotes(home) == {"local": home / ".dvc-remote"}
    assert find_version(spec, new_md5, home).source == "the workspace"
    target = tmp_path / "mix" / "datasets"
    restored = restore_into(spec, old_md5, target, home)
    assert restored.source == "DVC remote 'local'", restored.source
    assert file_md5(target / spec.file) == old_md5
    assert (target / spec.file).read_text().splitlines() == rows

    shutil.rmtree(home / ".dvc-remote")  # gone everywhere: the reason, for the factor's "not varied"
    gone = find_version(spec, old_md5, home)
    assert gone.path is None
    assert gone.source == (f"data version {old_md5} of breast_cancer is neither in datasets/, nor in the DVC "
                           f"cache {home / '.dvc' / 'cache'}, nor in a local DVC remote (local)")
