"""How `explain-regression` makes a factor take its old or new value: what it takes, or why it cannot.

- framework version: the version's environment (`.venvs/NAME-VERSION`), installed first when it is
  not (the seconds pip took are kept, per environment); pip's one-line reason when it cannot be.
  A release between two versions (for the bisection) is an environment derived from a declared one.
- project commit: the commit's adapter code, in a git worktree of that commit made under the
  project's runs/attribution/ folder (`git worktree add --detach`) and removed afterwards; refused
  with the files that moved when the suite, job or data schema changed between it and the checkout
  that runs the harness (the old worker would read requests it does not know).
- host kind: the CPU model and GPUs the jobs ran on; a kind that is not this machine's cannot be
  re-run here.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tasks import environment_install
from tasks.errors import UserError
from tasks.frameworks.environments import FrameworkEnvironment, release_environment
from tasks.frameworks.registry import find_environment, get_adapter
from tasks.resources import cpu_model, gpu_inventory

GIT_TIMEOUT_S = 120.0
# What an older commit's worker must read as this checkout writes it: if any of these differ between
# the two commits, the old code does not run against this harness (its path -> what it defines).
SCHEMA_PATHS: dict[str, str] = {
    "tasks/specs.py": "the suite schema",
    "tasks/child_requests.py": "the job request",
    "tasks/results.py": "the job result",
    "tasks/predictions.py": "the prediction columns",
    "tasks/data": "the data layer",
    "specs/datasets": "the dataset cards",
}
NO_GPU = "none"


def say(line: str) -> None:
    """Progress of installs and worktrees, on stderr (stdout may be the command's JSON)."""
    print(line, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- framework versions


def environment_of(framework: str, version: str) -> FrameworkEnvironment:
    """The environment of `framework@version`: a declared one, else a release derived from one."""
    try:
        return find_environment(framework, version)
    except UserError:
        derived = release_environment(get_adapter(framework), version)
        if derived is None:
            raise
        return derived


@dataclass
class Installs:
    """Environments made ready for an attribution: seconds pip took (0 when already there)."""

    seconds: dict[str, float] = field(default_factory=dict)  # NAME@VERSION -> install seconds
    refused: dict[str, str] = field(default_factory=dict)  # NAME@VERSION -> why it cannot be used

    def ensure(self, framework: str, version: str, progress: Callable[[str], None] = say) -> str | None:
        """Install `framework@version` unless it is already usable; None when usable, else why not
        (pip's reason, in one sentence). Each environment is tried once per attribution."""
        key = f"{framework}@{version}"
        if key in self.seconds:
            return None
        if key in self.refused:
            return self.refused[key]
        try:
            environment = environment_of(framework, version)
            state = environment.state()
            if state.status == "installed":
                self.seconds[key] = 0.0
                return None
            progress(f"{key} is {state.status}: installing it into {environment.folder} first ...")
            # A broken one (an install that stopped half way) is made again from scratch.
            self.seconds[key] = environment_install.install(environment, progress, reinstall=True)
            environment.require_usable(probe=False)
        except UserError as exc:
            self.refused[key] = str(exc)
            return self.refused[key]
        return None

    def of(self, framework_versions: Mapping[str, str]) -> float:
        """Seconds of installs that a mix with these versions needed."""
        return sum(self.seconds.get(f"{fw}@{v}", 0.0) for fw, v in framework_versions.items())


# ---------------------------------------------------------------- project commits


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          timeout=GIT_TIMEOUT_S, check=False)


def checkout_commit(root: Path) -> str:
    """The commit of the checkout the harness runs from (its `git_sha`), or '' outside git."""
    completed = _git(root, "rev-parse", "HEAD")
    return completed.stdout.strip() if completed.returncode == 0 else ""


def why_commit_unrunnable(root: Path, commit: str, head: str) -> str | None:
    """Why `commit`'s adapter code cannot run against this checkout's harness (at `head`), or None."""
    if not commit or commit == "unknown":
        return "one execution recorded no project commit (its checkout was not a git repository)"
    if not head:
        return f"{root} is not a git checkout, so no worktree of commit {commit[:12]} can be made"
    if commit == head:
        return None
    if _git(root, "cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        return f"commit {commit[:12]} is not in this clone; fetch it (`git fetch`) and run the command again"
    moved = _git(root, "diff", "--name-only", commit, head, "--", *SCHEMA_PATHS)
    if moved.returncode != 0:
        return f"git could not compare {commit[:12]} with {head[:12]}: {moved.stderr.strip()}"
    files = [line for line in moved.stdout.splitlines() if line.strip()]
    if files:
        what = sorted({what for path, what in SCHEMA_PATHS.items()
                       for name in files if name == path or name.startswith(path + "/")})
        shown = ", ".join(files[:4]) + (f" and {len(files) - 4} more" if len(files) > 4 else "")
        return (f"{' and '.join(what)} moved between commit {commit[:12]} and {head[:12]} ({shown}): "
                "the old adapters would not read what this harness writes, so the commit is not re-run")
    return None


@contextmanager
def commit_worktrees(root: Path, folder: Path) -> Iterator[Callable[[str], Path]]:
    """`code_at(commit)` -> a git worktree of that commit under `folder` (made once per commit);
    every worktree made is removed when the block ends, whatever happened in it."""
    made: dict[str, Path] = {}

    def code_at(commit: str) -> Path:
        if commit not in made:
            target = folder / f"code-{commit[:12]}"
            added = _git(root, "worktree", "add", "--detach", str(target), commit)
            if added.returncode != 0:
                raise UserError(f"git could not make a worktree of commit {commit[:12]} in {target}: "
                                f"{added.stderr.strip().splitlines()[-1:] or 'no reason given'}")
            made[commit] = target
        return made[commit]

    try:
        yield code_at
    finally:
        for target in made.values():
            removed = _git(root, "worktree", "remove", "--force", str(target))
            if removed.returncode != 0:  # git no longer knows it: the folder alone goes
                shutil.rmtree(target, ignore_errors=True)
        if made:
            _git(root, "worktree", "prune")


# ---------------------------------------------------------------- host kinds


def host_kind(runs: pd.DataFrame) -> str:
    """'CPU MODEL / GPU MODEL' of the jobs (their most common one), '' when not recorded."""
    def mode(column: str) -> str:
        if column not in runs:
            return ""
        values = runs[column].dropna().astype(str)
        return str(values.mode().iloc[0]) if len(values) else ""

    cpu, gpu = mode("cpu_model"), mode("gpu_model")
    return f"{cpu} / {gpu or NO_GPU}" if cpu else ""


def unavailable_host_kind(kind: str) -> str | None:
    """Why jobs of this host kind cannot run on this machine, or None when they can."""
    if not kind:
        return None
    cpu, _, gpu = kind.partition(" / ")
    here = cpu_model()
    if cpu != here:
        return f"host kind '{kind}' is not available here (this machine's CPU is '{here}')"
    if gpu and gpu != NO_GPU:
        inventory = gpu_inventory()
        names = {str(device["name"]) for device in inventory.devices}
        missing = [name.strip() for name in gpu.split(",") if name.strip() not in names]
        if missing:
            return (f"host kind '{kind}' is not available here (no {', '.join(missing)}"
                    f"{'' if inventory.available else ': ' + inventory.reason})")
    return None
