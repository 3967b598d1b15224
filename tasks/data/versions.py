"""Data versions as DVC records them, computed without running DVC.

DVC 3 hashes a file as the md5 of its bytes, and a directory as the md5 of the JSON listing of
its files (``[{"md5": ..., "relpath": ...}]`` sorted by path) with ``.dir`` appended. The
per-file md5 is the ``data_version`` tag of every job on that dataset.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from functools import lru_cache
from pathlib import Path

import yaml

from tasks import paths
from tasks.errors import UserError
from tasks.specs import DatasetSpec

PIN_FILE = "datasets.dvc"


@lru_cache(maxsize=256)
def _md5_cached(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_md5(path: Path) -> str:
    stat = path.stat()  # size and mtime in the cache key: a rewritten file is hashed again
    return _md5_cached(str(path), stat.st_size, stat.st_mtime_ns)


def data_version(spec: DatasetSpec) -> str:
    """The DVC md5 of the dataset's file (what datasets.dvc's directory listing records for it)."""
    if not spec.path.is_file():
        raise UserError(
            f"{spec.card_path}: field 'file': {spec.path} does not exist; run `automl-eval datasets build`."
        )
    return file_md5(spec.path)


def _ignore_patterns() -> list[str]:
    """The simple name patterns of .dvcignore (a line without '/' inside matches any path part)."""
    dvcignore = paths.project_root() / ".dvcignore"
    if not dvcignore.is_file():
        return []
    lines = (line.strip() for line in dvcignore.read_text(encoding="utf-8").splitlines())
    return [line.rstrip("/") for line in lines if line and not line.startswith("#")]


def _ignored(relpath: Path, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(part, pattern) for part in relpath.parts for pattern in patterns)


def tracked_files(folder: Path) -> dict[str, Path]:
    """relpath -> path of every file DVC hashes in ``folder`` (what .dvcignore leaves)."""
    patterns = _ignore_patterns()
    return {
        p.relative_to(folder).as_posix(): p
        for p in folder.rglob("*")
        if p.is_file() and not _ignored(p.relative_to(folder), patterns)
    }


def dir_md5(folder: Path) -> str:
    """DVC 3's hash of a directory: md5 of its sorted JSON file listing, plus '.dir'."""
    listing = [{"md5": file_md5(path), "relpath": rel} for rel, path in sorted(tracked_files(folder).items())]
    return hashlib.md5(json.dumps(listing, sort_keys=True).encode("utf-8")).hexdigest() + ".dir"


def pinned_md5() -> str | None:
    """The md5 datasets.dvc pins for datasets/, or None when nothing is pinned yet."""
    pin = paths.project_root() / PIN_FILE
    if not pin.is_file():
        return None
    try:
        outs = (yaml.safe_load(pin.read_text(encoding="utf-8")) or {}).get("outs") or []
        return str(outs[0]["md5"])
    except (yaml.YAMLError, KeyError, IndexError, TypeError, AttributeError):
        raise UserError(f"{pin}: not a DVC file with outs[0].md5; restore it from git.") from None
