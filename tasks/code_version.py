"""Which code a process runs: a fingerprint of the harness's Python sources, the same on every host
that has the same files, wherever its checkout lies.

Team workers compare it with the suite's before they take a job (flows/team_worker.py): a worker
whose checkout is at another commit, or carries changes the suite's does not, would run and record
the job with other code than the suite planned with. A git commit would not do: a host's copy may
have uncommitted changes, or no history at all.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

# What a job runs: the harness (tasks/) and the flows that dispatch and record it (flows/).
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tasks", "flows")
SHOWN_CHARS = 12  # as much of the fingerprint as a sentence shows


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """sha256 over the packages' .py files (their paths relative to the checkout, and bytes)."""
    digest = hashlib.sha256()
    for package in PACKAGES:
        for path in sorted((PACKAGE_ROOT / package).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            digest.update(path.relative_to(PACKAGE_ROOT).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()
