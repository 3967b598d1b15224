"""Bring back one data version of a dataset file by its DVC md5, without running DVC.

DVC 3 keeps every file it ever pinned under `files/md5/XX/REST` of its cache (`.dvc/cache`) and of
a local remote (a folder named in `.dvc/config`); the `data_version` tag of a job is that md5
(tasks/data/versions.py). So an older version is a copy away when either still holds it; when
neither does, the caller reports the factor as unrunnable with the returned reason.
"""

from __future__ import annotations

import configparser
import shutil
from dataclasses import dataclass
from pathlib import Path

from tasks import paths
from tasks.data.versions import file_md5
from tasks.specs import DatasetSpec

CACHE_DIR = Path(".dvc") / "cache"
CONFIG_FILES = (Path(".dvc") / "config", Path(".dvc") / "config.local")


@dataclass(frozen=True)
class Restored:
    path: Path | None  # the file holding that version, None when it could not be found
    source: str  # where it came from (the workspace, the DVC cache, remote NAME), or why not


def _object_path(store: Path, md5: str) -> Path:
    return store / "files" / "md5" / md5[:2] / md5[2:]


def local_remotes(root: Path) -> dict[str, Path]:
    """Remote name -> folder, for the remotes of .dvc/config (and config.local) that are local paths."""
    found: dict[str, Path] = {}
    for name in CONFIG_FILES:
        config = configparser.ConfigParser()
        if not (root / name).is_file():
            continue
        config.read(root / name, encoding="utf-8")
        for section in config.sections():
            title = section.strip("'")  # DVC writes ['remote "NAME"']
            if not title.startswith("remote "):
                continue
            url = config[section].get("url", "")
            if "://" in url and not url.startswith("file://"):
                continue  # s3, gs, ssh...: DVC itself would fetch them; nothing reachable here
            folder = Path(url.removeprefix("file://"))
            remote = title.partition(" ")[2].strip().strip('"')
            found[remote] = folder if folder.is_absolute() else (root / ".dvc" / folder).resolve()
    return found


def find_version(spec: DatasetSpec, md5: str, root: Path | None = None) -> Restored:
    """The file with this md5: the workspace's own file, else the DVC cache, else a local remote."""
    root = root or paths.project_root()
    if spec.path.is_file() and file_md5(spec.path) == md5:
        return Restored(spec.path, "the workspace")
    candidates = [("the DVC cache", _object_path(root / CACHE_DIR, md5))]
    candidates += [
        (f"DVC remote '{name}'", _object_path(folder, md5)) for name, folder in local_remotes(root).items()
    ]
    for source, path in candidates:
        if path.is_file() and file_md5(path) == md5:  # a damaged cache entry is no restore
            return Restored(path, source)
    remotes = ", ".join(local_remotes(root)) or "none configured"
    return Restored(
        None,
        f"data version {md5} of {spec.name} is neither in datasets/, nor in the DVC "
        f"cache {root / CACHE_DIR}, nor in a local DVC remote ({remotes})",
    )


def restore_into(spec: DatasetSpec, md5: str, datasets_dir: Path, root: Path | None = None) -> Restored:
    """Copy that version of the dataset's file to `datasets_dir`/its file (its saved folds beside it)."""
    found = find_version(spec, md5, root)
    if found.path is None:
        return found
    target = datasets_dir / spec.file
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(found.path, target)
    return found


def keep_in_cache(path: Path, root: Path | None = None) -> Path:
    """Store a file in the DVC cache under its md5 (what `dvc add`/`dvc commit` do for it)."""
    root = root or paths.project_root()
    target = _object_path(root / CACHE_DIR, file_md5(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.is_file():
        shutil.copyfile(path, target)
    return target
