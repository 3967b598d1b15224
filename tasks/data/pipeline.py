"""dvc.yaml's data stages (materialize, validate): reproduced by DVC itself, and what is stale, in sentences.

`automl-eval datasets build` ends by calling `reproduce()`, DVC's own `dvc repro`: DVC runs the
stages whose dependencies changed and writes dvc.lock, so the lock always records what the build
made and the two cannot disagree. `stale()` is `dvc status` (pipeline and datasets.dvc) as one
sentence per stage and file; `lock_drift()` names what a build changed in a committed dvc.lock or
datasets.dvc, which is how CI catches a data change committed without its lock.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tasks import paths
from tasks.data.pinning import dvc_repo, reason_of
from tasks.data.versions import PIN_FILE
from tasks.errors import UserError

PIPELINE_FILE = "dvc.yaml"
LOCK_FILE = "dvc.lock"
_FIX = "run `automl-eval datasets build` and commit dvc.lock and datasets.dvc"


def has_pipeline() -> bool:
    root = paths.project_root()
    return (root / ".dvc").is_dir() and (root / PIPELINE_FILE).is_file()


@dataclass(frozen=True)
class Stale:
    """One line of `dvc status`: a stage (or datasets.dvc) and the file that no longer matches its record."""

    stage: str
    path: str
    change: str  # modified, deleted, new, not in cache, changed command, ...
    kind: str  # dependency, output, parameter, stage

    def sentence(self) -> str:
        if self.kind == "stage":
            return f"stage '{self.stage}' is out of date: {self.change}; {_FIX}."
        return f"stage '{self.stage}' is out of date: its {self.kind} {self.path} is {self.change}; {_FIX}."


_KINDS = {"changed deps": "dependency", "changed outs": "output"}


def _flatten(status: dict[str, list[Any]]) -> list[Stale]:
    """DVC's status dict ({stage: [{"changed deps": {path: change}}, "always changed", ...]}) as lines."""
    lines: list[Stale] = []
    for stage, entries in status.items():
        for entry in entries:
            if isinstance(entry, str):  # "always changed", "changed checksum"
                lines.append(Stale(stage, "", entry, "stage"))
                continue
            for key, changes in entry.items():
                if not isinstance(changes, dict):  # {"changed command": ...}
                    lines.append(Stale(stage, "", key, "stage"))
                    continue
                for path, change in changes.items():
                    if isinstance(change, dict):  # params.yaml: {"folds.k": "modified"}
                        lines.extend(Stale(stage, f"{path}:{name}", how, "parameter")
                                     for name, how in change.items())
                    else:
                        lines.append(Stale(stage, path, str(change), _KINDS.get(key, key)))
    return lines


def stale() -> list[Stale]:
    """`dvc status` over every stage (dvc.yaml and datasets.dvc); empty when all is up to date."""
    with dvc_repo() as repo:
        return _flatten(repo.status())


@dataclass(frozen=True)
class Reproduced:
    ran: list[str]  # stages DVC ran, in order
    lock_changed: bool  # dvc.lock was rewritten with other contents
    error: str | None = None  # one sentence when a stage failed; dvc.lock then keeps its record for it


def _stage_runs_here() -> None:
    """Stage commands run `automl-eval`: the one of this interpreter first, so they run the build's code."""
    own_bin = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    if own_bin not in path.split(os.pathsep):
        os.environ["PATH"] = own_bin + os.pathsep + path


def reproduce() -> Reproduced:
    """`dvc repro`: run the stages whose dependencies changed and record them all in dvc.lock."""
    from dvc.exceptions import DvcException, ReproductionError

    lock = paths.project_root() / LOCK_FILE
    before = lock.read_bytes() if lock.is_file() else b""
    _stage_runs_here()
    try:
        with dvc_repo() as repo:
            ran = [stage.addressing for stage in repo.reproduce()]
    except ReproductionError as exc:
        cause = exc.__cause__
        why = reason_of(cause) if isinstance(cause, Exception) else reason_of(exc)
        return Reproduced([], False, f"dvc repro: {reason_of(exc)} ({why}); dvc.lock keeps its earlier "
                                     "record for it. Fix what the stage printed above and build again.")
    except DvcException as exc:
        return Reproduced([], False, f"dvc repro: {reason_of(exc)}.")
    after = lock.read_bytes() if lock.is_file() else b""
    return Reproduced(ran, after != before)


# ---------------------------------------------------------------- the committed records (CI)


def _committed(name: str) -> dict[str, Any]:
    """The file as the current git commit holds it (empty when the commit lacks it)."""
    root = paths.project_root()
    try:
        shown = subprocess.run(["git", "show", f"HEAD:./{name}"], cwd=root, capture_output=True, text=True,
                               timeout=60)
    except OSError:
        raise UserError(f"{name}: `git` is not available, so the committed {name} cannot be read.") from None
    if shown.returncode != 0:
        inside = subprocess.run(["git", "rev-parse", "--git-dir"], cwd=root, capture_output=True, timeout=60)
        if inside.returncode != 0:
            raise UserError(f"{root}: not a git checkout; --committed compares with git's HEAD.")
        return {}
    return yaml.safe_load(shown.stdout) or {}


def _current(name: str) -> dict[str, Any]:
    path = paths.project_root() / name
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path.is_file() else {}


def _records(entries: list[dict[str, Any]] | None) -> dict[str, str]:
    """path -> hash of a lock's deps or outs."""
    return {e["path"]: str(e.get("md5") or e.get("hash") or "") for e in entries or []}


def _differing(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    return sorted(key for key in set(before) | set(after) if before.get(key) != after.get(key))


def _how(key: str, before: dict[str, Any], after: dict[str, Any], what: str = "hash") -> str:
    if key not in before:
        return "not recorded in the committed file"
    if key not in after:
        return "recorded in the committed file but no longer declared"
    return f"recorded with another {what} by the build"


def _lock_changes(committed: dict[str, Any], built: dict[str, Any]) -> list[Stale]:
    old_stages, new_stages = committed.get("stages") or {}, built.get("stages") or {}
    lines: list[Stale] = []
    for stage in _differing(old_stages, new_stages):
        old, new = old_stages.get(stage), new_stages.get(stage)
        if old is None or new is None:
            gone = "missing from it" if old is None else "recorded there but no longer in dvc.yaml"
            lines.append(Stale(stage, LOCK_FILE, gone, "stage"))
            continue
        if old.get("cmd") != new.get("cmd"):
            lines.append(Stale(stage, "", "its command changed", "stage"))
        for key, kind in (("deps", "dependency"), ("outs", "output")):
            before, after = _records(old.get(key)), _records(new.get(key))
            lines.extend(
                Stale(stage, path, _how(path, before, after), kind) for path in _differing(before, after)
            )
        old_params, new_params = old.get("params") or {}, new.get("params") or {}
        for file in _differing(old_params, new_params):
            before, after = old_params.get(file) or {}, new_params.get(file) or {}
            lines.extend(
                Stale(stage, f"{file}:{name}", _how(name, before, after, "value"), "parameter")
                for name in _differing(before, after)
            )
    return lines


def _pin_changes(committed: dict[str, Any], built: dict[str, Any]) -> list[Stale]:
    before, after = _records(committed.get("outs")), _records(built.get("outs"))
    return [Stale(PIN_FILE, path, _how(path, before, after), "output") for path in _differing(before, after)]


def lock_drift() -> list[Stale]:
    """What the build recorded differently from the committed dvc.lock and datasets.dvc (git's HEAD).

    Empty on a clean clone whose commit carries the lock its data build writes; anything else means
    a card, a source or the gate changed without dvc.lock (or datasets.dvc) following.
    """
    return [
        *_lock_changes(_committed(LOCK_FILE), _current(LOCK_FILE)),
        *_pin_changes(_committed(PIN_FILE), _current(PIN_FILE)),
    ]


def drift_sentence(line: Stale) -> str:
    where = f"its {line.kind} {line.path}" if line.kind != "stage" else line.change
    what = f" is {line.change}" if line.kind != "stage" else ""
    record = PIN_FILE if line.stage == PIN_FILE else LOCK_FILE
    return (f"the committed {record} is stale: stage '{line.stage}', {where}{what}; "
            f"commit the {record} that `automl-eval datasets build` writes.")
