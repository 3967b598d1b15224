"""DVC operations on the pinned datasets/ folder: pull from a remote, pin, keep the cache filled.

Only this module opens DVC (slow to import); tasks/data/pipeline.py runs dvc.yaml's stages through
`dvc_repo()`. Everything runs through DVC's Python API on the project's own repository; failures
come back as plain reasons, never as tracebacks.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from tasks import paths
from tasks.data.versions import PIN_FILE, file_md5, pinned_md5, tracked_files

if TYPE_CHECKING:  # dvc takes about a second to import; dvc_repo imports it when called
    from dvc.repo import Repo


def dvc_initialised() -> bool:
    return (paths.project_root() / ".dvc").is_dir()


def _pin_file() -> str:
    # Absolute: DVC resolves relative targets against the working directory, not the repository.
    return str(paths.project_root() / PIN_FILE)


def _cache_object(md5: str) -> Path:
    # DVC 3 cache layout: .dvc/cache/files/md5/<first two hex>/<rest>
    return paths.project_root() / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]


def pinned_listing() -> dict[str, str] | None:
    """relpath -> md5 of the pinned version, when the cache holds its directory listing."""
    md5 = pinned_md5()
    if md5 is None or not _cache_object(md5).is_file():
        return None
    entries = json.loads(_cache_object(md5).read_text(encoding="utf-8"))
    return {entry["relpath"]: entry["md5"] for entry in entries}


def dvc_repo() -> Repo:
    # DVC logs warnings (e.g. every object a remote lacks) straight to the console; the outcome
    # is reported here in one sentence instead.
    logging.getLogger("dvc").setLevel(logging.ERROR)
    logging.getLogger("dvc_objects").setLevel(logging.ERROR)
    logging.getLogger("dvc_data").setLevel(logging.ERROR)
    from dvc.repo import Repo  # here: about a second to import, paid only by commands that use DVC

    return Repo(str(paths.project_root()))


def reason_of(exc: Exception) -> str:
    """The first line of a DVC error, or its type when it says nothing."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def local_changes(listing: dict[str, str]) -> list[str]:
    """Files in datasets/ that the pinned listing lacks or records with other bytes."""
    present = tracked_files(paths.datasets_dir())
    return sorted(rel for rel, path in present.items() if listing.get(rel) != file_md5(path))


def pull() -> str | None:
    """Fetch the pinned datasets/ from the default remote and check it out; None on success, else why not.

    Never overwrites local work: when datasets/ holds files the pinned version lacks or records
    differently (a user's new dataset not yet added), nothing is checked out.
    """
    from dvc.exceptions import DvcException

    try:
        with dvc_repo() as repo:
            if not repo.config.get("core", {}).get("remote"):
                return "no default DVC remote is configured"
            repo.fetch(targets=[_pin_file()])
            listing = pinned_listing()
            if listing is None:
                return "the remote does not hold the pinned directory listing"
            changed = local_changes(listing)
            if changed:
                shown = ", ".join(changed[:5]) + (" ..." if len(changed) > 5 else "")
                return f"datasets/ has local changes not in datasets.dvc ({shown}); not overwriting them"
            repo.checkout(targets=[_pin_file()])
        return None
    except DvcException as exc:
        return reason_of(exc)


def pin() -> str:
    """`dvc add datasets`: record the folder as it is now in datasets.dvc (and the cache); returns the md5."""
    with dvc_repo() as repo:
        repo.add(str(paths.datasets_dir()))
    md5 = pinned_md5()
    assert md5 is not None
    return md5


def ensure_cached() -> None:
    """Put the pinned data into the local cache (so `dvc push` can send it) if it is not there yet."""
    md5 = pinned_md5()
    if md5 is None or _cache_object(md5).is_file():
        return
    with dvc_repo() as repo:
        repo.commit(_pin_file(), force=True)


def push() -> str | None:
    """Send the pinned data to the default remote; None on success, else why not."""
    from dvc.exceptions import DvcException

    try:
        with dvc_repo() as repo:
            repo.push(targets=[_pin_file()])
        return None
    except DvcException as exc:
        return reason_of(exc)
