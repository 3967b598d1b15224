"""`automl-eval explain-regression BASE CAND`: name a regression's cause by running the experiments.

The two executions' job runs say which factors differ (data version per dataset, framework version
named in the suite, framework params, budget, project commit, host kind). For the regressed cells
only, every mix of the runnable factors' old and new values
(2^k, k <= max_factors; else one factor at a time) runs as a fresh execution of the suite
`SUITE-attribution`, with the same folds and seeds, through the normal benchmark flow. Each mix
runs in a scratch home under runs/attribution/ whose datasets/ holds the mix's data versions,
restored from the workspace, the DVC cache or a local DVC remote; everything else (cards, budgets,
the MLflow store, framework environments) is the project's own, linked. A framework version not
installed is installed first; an older commit runs from a git worktree; a host kind not available
here is refused (flows/attribution_factors.py). When the framework version is the main factor and
pip can install releases between its two versions, a bisection over them follows, within the job
cap. The arithmetic (Shapley shares with t-intervals, the bisection) is
tasks/report/counterfactuals.py.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from flows.attribution_factors import (
    Installs,
    checkout_commit,
    commit_worktrees,
    host_kind,
    unavailable_host_kind,
    why_commit_unrunnable,
)
from flows.benchmark import benchmark
from tasks import paths
from tasks.data import folds
from tasks.data.folds import folds_path
from tasks.data.load import load_frame
from tasks.data.materialize import save_folds
from tasks.data.restore import find_version, restore_into
from tasks.environment_install import releases_between
from tasks.errors import UserError
from tasks.frameworks.registry import get_adapter
from tasks.launch import LAUNCHER_ENV, WORKER_CODE_ENV
from tasks.report import counterfactuals
from tasks.report.compare import Comparison, compare
from tasks.report.counterfactuals import (
    ALL_MIXES,
    Attribution,
    Bisection,
    Mix,
    bisect_releases,
    mix_label,
    plan_mixes,
    unit_values,
)
from tasks.specs import load_budget, load_dataset_spec
from tasks.tracking import read, store
from tasks.vocabulary import RESULT

DEFAULT_MAX_JOBS = 40
DEFAULT_MAX_FACTORS = 4
ATTRIBUTION_SUFFIX = "-attribution"  # the mixes' suite and MLflow experiment: SUITE-attribution
RUNNABLE = ("data_version", "framework_version", "params", "budget", "code")
HARDWARE = "hardware"  # the host kind (CPU model / GPUs): only this machine's kind runs here
ATTRIBUTION_OF_TAG = "attribution_of"
ATTRIBUTION_MIX_TAG = "attribution_mix"
INSTALL_TAG = "attribution_install_s"
CODE_TAG = "attribution_code"
MAIN_FACTOR_TAG = "attribution_main_factor"
MAIN_ENV = "="  # a framework version recorded from the main environment (not named NAME@VERSION)
# What the scratch home shares with the project by a link (the rest, datasets/ and runs/, is its own).
LINKED = ("mlflow", ".venvs", "params.yaml", ".dvcignore", ".dvc")
LINKED_SPECS = ("datasets", "budgets.yaml")  # specs/suites/ is the mix's own


@dataclass
class MixRun:
    mix: Mix
    label: str
    execution_id: str  # "" for a mix that was not run (the recorded execution stands for it)
    url: str
    jobs: int
    seconds: float
    install_s: float = 0.0  # pip installing the framework versions this mix needed first
    code: str = ""  # the commit whose adapters ran, when the project commit is a factor
    problems: list[str] = field(default_factory=list)  # its jobs that did not end ok, with the reason


@dataclass
class Explanation:
    base_id: str
    cand_id: str
    suite: str
    cells: list[tuple[str, str]]  # (dataset, framework) explained
    factors: list[str]  # the runnable differing factors
    described: dict[str, str]  # factor -> "data_version: breast_cancer 1a2b -> 3c4d"
    unrunnable: dict[str, str]  # factor -> why it was not varied
    attribution: Attribution
    per_cell: dict[tuple[str, str], Attribution]
    mixes: list[MixRun]
    comparison: Comparison
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    bisection: Bisection | None = None
    bisection_runs: list[MixRun] = field(default_factory=list)

    @property
    def jobs_run(self) -> int:
        return sum(m.jobs for m in (*self.mixes, *self.bisection_runs))


# ---------------------------------------------------------------- what differs


def _mode(values: pd.Series) -> str:
    values = values.dropna().astype(str)
    return str(values.mode().iloc[0]) if len(values) else ""


def _family(framework: str) -> str:
    return framework.partition("@")[0]


def _param_value(text: str) -> Any:
    """A recorded param back as the suite wrote it (tracking logs non-strings as JSON)."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def side_values(runs: pd.DataFrame) -> dict[str, Any]:
    """One side's value of every factor over the explained cells (plain data, comparable with ==)."""
    values: dict[str, Any] = {
        "data_version": {d: _mode(g["data_version"]) for d, g in runs.groupby("dataset")},
        "framework_version": {},
        "params": {},
        "budget": _mode(runs["budget"]) if "budget" in runs else "",
    }
    param_columns = [c for c in runs if c.startswith("params.param.")]
    for framework, group in runs.groupby(runs["framework"].map(_family)):
        named = _mode(group["framework"]).partition("@")[2]
        installed = _mode(group["framework_version"]) if "framework_version" in group else ""
        values["framework_version"][framework] = named or MAIN_ENV + installed
        values["params"][framework] = {
            c.removeprefix("params.param."): _param_value(_mode(group[c]))
            for c in param_columns
            if group[c].notna().any()
        }
    values["code"] = _mode(runs["git_sha"]) if "git_sha" in runs else ""
    values[HARDWARE] = host_kind(runs)
    return values


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text[:8] if len(text) == 32 and text.isalnum() else text  # an md5: its head is enough


def describe(factor: str, base: Any, cand: Any) -> str:
    """'data_version: breast_cancer 1a2b3c4d -> 5e6f7a8b' (each key whose value differs)."""
    if isinstance(base, dict) and isinstance(cand, dict):
        changes = []
        for key in sorted(set(base) | set(cand)):
            old, new = base.get(key), cand.get(key)
            if old != new:
                if isinstance(old, dict) or isinstance(new, dict):
                    inner = describe(key, old or {}, new or {}).partition(": ")[2]
                    changes.append(f"{key} {inner}")
                else:
                    changes.append(
                        f"{key} {_short(old) if old not in (None, '') else 'unset'} -> "
                        f"{_short(new) if new not in (None, '') else 'unset'}"
                    )
        return f"{factor}: " + ", ".join(changes)
    return f"{factor}: {_short(base) or 'unset'} -> {_short(cand) or 'unset'}"


def _why_unrunnable(factor: str, base: Any, cand: Any, root: Path, installs: Installs) -> str | None:
    """Why this runnable factor cannot be varied after all (a data version not restorable, a
    framework version pip cannot install, a commit whose schema moved), or None. A framework
    version that is not installed is installed here, first."""
    if factor == "data_version":
        for dataset in sorted(set(base) | set(cand)):
            spec = load_dataset_spec(dataset)
            for md5 in {base.get(dataset), cand.get(dataset)} - {None, ""}:
                found = find_version(spec, md5, root)
                if found.path is None:
                    return found.source
    if factor == "framework_version":
        named = [(fw, v) for side in (base, cand) for fw, v in side.items() if not v.startswith(MAIN_ENV)]
        if not named:
            return (
                "both versions were installed in the main environment, which holds one at a time; "
                "name them NAME@VERSION in the suite so that each runs in its own environment"
            )
        for framework, version in named:
            refused = installs.ensure(framework, version)
            if refused:
                return refused
    if factor == "code":
        head = checkout_commit(root)
        for commit in (base, cand):
            why = why_commit_unrunnable(root, commit, head)
            if why:
                return why
    if factor == "budget":
        for name in {base, cand}:
            try:
                load_budget(name)
            except UserError as exc:
                return str(exc)
    return None


# ---------------------------------------------------------------- running a mix


def mix_values(mix: Mix, base: Mapping[str, Any], cand: Mapping[str, Any]) -> dict[str, Any]:
    return {f: (cand[f] if f in mix else base[f]) for f in RUNNABLE}


def mix_suite(values: Mapping[str, Any], seeds: list[int], folds: int) -> dict[str, Any]:
    """The suite YAML of one mix: the explained cells' datasets and frameworks at the mix's values."""
    frameworks = []
    for framework in sorted(values["params"]):
        entry: dict[str, Any] = {"name": framework, "params": values["params"][framework]}
        if not values["framework_version"].get(framework, MAIN_ENV).startswith(MAIN_ENV):
            entry["version"] = values["framework_version"][framework]
        frameworks.append(entry)
    return {
        "datasets": sorted(values["data_version"]),
        "frameworks": frameworks,
        "folds": folds,
        "seeds": seeds,
        "budget": values["budget"],
    }


def _mix_home(
    home: Path, suite: Mapping[str, Any], suite_name: str, data_versions: Mapping[str, str], root: Path
) -> Path:
    """A scratch project for one mix: its suite, and datasets/ holding the mix's data versions;
    the cards, budgets, MLflow store and the rest link to the project's."""
    (home / "datasets").mkdir(parents=True)
    (home / "specs" / "suites").mkdir(parents=True)
    for name in LINKED:
        if (root / name).exists():
            (home / name).symlink_to(root / name)
    for name in LINKED_SPECS:
        if (root / "specs" / name).exists():
            (home / "specs" / name).symlink_to(root / "specs" / name)
    (home / "specs" / "suites" / f"{suite_name}.yaml").write_text(
        yaml.safe_dump(dict(suite), sort_keys=False)
    )
    for dataset, md5 in data_versions.items():
        spec = load_dataset_spec(dataset)
        restored = restore_into(spec, md5, home / "datasets", root)
        if restored.path is None:  # checked before anything ran; a cache emptied since then
            raise UserError(restored.source + "; restore it with `dvc pull` and run the command again.")
        if folds.is_user_given(spec):
            # The user's own split is part of the card, not of the data version: it goes as it is.
            saved_folds = folds_path(spec)
            if saved_folds.is_file():
                target = home / "datasets" / saved_folds.relative_to(paths.datasets_dir())
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(saved_folds, target)
            continue
        # Folds computed from the restored version itself, as `datasets build` computed them when that
        # version was current: the workspace's folds belong to the workspace's version, and beside an
        # older file they put duplicate rows on both sides of a fold (the gate then skips every job).
        with _in_home(home):
            restored_spec = load_dataset_spec(dataset)
            save_folds(restored_spec, load_frame(restored_spec))
    return home


@contextlib.contextmanager
def _in_home(home: Path) -> Iterator[None]:
    """Run with `home` as the project root; framework environments stay the project's."""
    saved = {name: os.environ.get(name) for name in ("AUTOML_EVAL_HOME", "AUTOML_EVAL_VENVS_DIR")}
    os.environ["AUTOML_EVAL_VENVS_DIR"] = str(paths.venvs_dir())
    os.environ["AUTOML_EVAL_HOME"] = str(home)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _run_mix(suite_name: str, home: Path, *, team: str | None, code: Path | None = None) -> str:
    """One mix through the normal flow; `code`: a worktree whose adapters its workers run."""
    saved = {name: os.environ.get(name) for name in (WORKER_CODE_ENV, LAUNCHER_ENV)}
    if code is not None:
        os.environ[WORKER_CODE_ENV] = str(code)
    try:
        with _in_home(home):
            outcome = benchmark(suite_name, execution="new", trigger="attribution", team=team, report=False)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return str(outcome["execution_id"])


def _run_link(execution_id: str) -> str:
    found = read.execution(execution_id)
    return store.run_url(str(found.get("experiment_id", "")), execution_id) if store.is_server() else ""


# ---------------------------------------------------------------- the command


def _cells(comparison: Comparison) -> tuple[list[tuple[str, str]], list[str]]:
    regressed = comparison.regressions
    notes = []
    if regressed.empty:
        notes.append("nothing regressed beyond the thresholds: every compared cell is explained")
        regressed = comparison.table
    cells = sorted(set(zip(regressed["dataset"], regressed["framework"], strict=True)))
    return cells, notes


def _of_cells(runs: pd.DataFrame, cells: list[tuple[str, str]], side: int) -> pd.DataFrame:
    """The runs of the explained cells; a cell named 'BASE -> CAND' is its side's framework."""
    wanted = {(d, f.split(" -> ")[side] if " -> " in f else f) for d, f in cells}
    keys = list(zip(runs["dataset"], runs["framework"], strict=True))
    return runs[[key in wanted for key in keys]].reset_index(drop=True)


def plan(
    base_id: str,
    cand_id: str,
    *,
    max_jobs: int,
    max_factors: int,
    rerun_ends: bool = False,
    refuse_unavailable_host: bool = True,
    installs: Installs | None = None,
) -> dict[str, Any]:
    """Everything decided before a job runs; every bad input is a UserError (one sentence).

    A host kind that is not available here is such a bad input for the command
    (`refuse_unavailable_host`); the nightly reports it as a factor not varied instead. Framework
    versions not installed are installed here (into `installs`), after the refusals of the inputs
    themselves and before the job cap is checked (the cap counts mixes of runnable factors only)."""
    installs = installs if installs is not None else Installs()
    if max_jobs < 1:
        raise UserError(
            f"--max-jobs is {max_jobs}: the attribution needs at least 1 job; give a positive cap."
        )
    if max_factors < 1:
        raise UserError(f"--max-factors is {max_factors}; give at least 1.")
    base_exec, cand_exec = read.execution(base_id), read.execution(cand_id)
    if base_exec.get("suite") != cand_exec.get("suite"):
        raise UserError(
            f"execution {base_id} is of suite '{base_exec.get('suite')}' and {cand_id} of suite "
            f"'{cand_exec.get('suite')}'; explain two executions of one suite."
        )
    # Which cells regressed needs the figures only: the series (DTW, read artifact by artifact) are
    # for `compare`, where in the job the runs part.
    all_base, all_cand = read.job_runs(execution_id=base_id), read.job_runs(execution_id=cand_id)
    comparison = compare(all_base, all_cand)
    cells, notes = _cells(comparison)
    if not cells:
        raise UserError(
            f"executions {base_id} and {cand_id} have no dataset x framework in common; "
            "explain two executions of one suite."
        )
    base_runs, cand_runs = _of_cells(all_base, cells, 0), _of_cells(all_cand, cells, 1)
    base, cand = side_values(base_runs), side_values(cand_runs)
    differing = [f for f in (*RUNNABLE, HARDWARE) if base[f] != cand[f]]
    described = {f: describe(f, base[f], cand[f]) for f in differing}
    root = paths.project_root()
    unrunnable: dict[str, str] = {}
    if HARDWARE in differing:
        why = unavailable_host_kind(base[HARDWARE]) or unavailable_host_kind(cand[HARDWARE])
        if why and refuse_unavailable_host:
            raise UserError(
                f"executions {base_id} and {cand_id} ran on different host kinds and {why}, so the host "
                "kind cannot vary; run explain-regression on a machine of the other kind."
            )
        unrunnable[HARDWARE] = why or "this command does not move jobs between host kinds"
    for factor in differing:
        if factor in RUNNABLE:
            why = _why_unrunnable(factor, base[factor], cand[factor], root, installs)
            if why:
                unrunnable[factor] = why
    factors = [f for f in differing if f not in unrunnable]
    if not factors:
        what = "; ".join(f"{described[f]} ({why})" for f, why in unrunnable.items()) or "nothing"
        raise UserError(
            f"no factor that can be re-run differs between {base_id} and {cand_id} "
            f"(differing: {what}); nothing to explain by experiment."
        )
    mixes, method = plan_mixes(factors, max_factors)
    if method != ALL_MIXES:
        notes.append(
            f"{len(factors)} factors > --max-factors {max_factors}: each factor was varied alone "
            "(its effect from the baseline), not split by Shapley values"
        )
    # The two executions are the mixes "nothing switched" and "everything switched" when nothing
    # unrunnable differs between them (one factor alone: no job at all); otherwise the ends run
    # again, so that what was not varied stays out of the split. `rerun_ends` measures them again
    # anyway (costs measured side by side with the other mixes).
    ends = {frozenset(): (base_id, base_runs), frozenset(factors): (cand_id, cand_runs)}
    reuse = not unrunnable and not rerun_ends
    reused = [(mix, *ends[mix]) for mix in mixes if reuse and mix in ends]
    to_run = [mix for mix in mixes if not (reuse and mix in ends)]
    seeds = sorted({int(s) for s in pd.to_numeric(base_runs["seed"])})
    folds = int(pd.to_numeric(base_runs["fold"]).max()) + 1
    per_mix = len(base["data_version"]) * len(base["params"]) * len(seeds) * folds
    if len(to_run) * per_mix > max_jobs:
        not_run = ", ".join(mix_label(mix, factors) for mix in to_run)
        raise UserError(
            f"the attribution of {', '.join(factors)} needs {len(to_run)} mixes x {per_mix} jobs = "
            f"{len(to_run) * per_mix} jobs, more than --max-jobs {max_jobs} (attribution.max_jobs in "
            f"the suite), so none was run (not run: {not_run}); raise the cap or lower --max-factors."
        )
    return {
        "suite": str(cand_exec.get("suite")),
        "cells": cells,
        "notes": notes,
        "base": base,
        "cand": cand,
        "factors": factors,
        "described": described,
        "unrunnable": unrunnable,
        "mixes": mixes,
        "method": method,
        "reused": reused,
        "to_run": to_run,
        "seeds": seeds,
        "folds": folds,
        "per_mix": per_mix,
        "base_runs": base_runs,
        "cand_runs": cand_runs,
        "comparison": comparison,
        "team": cand_exec.get("team") or None,
        "installs": installs,
        "max_jobs": max_jobs,
        "head": checkout_commit(root) if "code" in factors else "",
    }


@dataclass
class _Runner:
    """Runs mixes (and bisection steps) as executions of SUITE-attribution, each in its scratch home."""

    planned: dict[str, Any]
    cand_id: str
    folder: Path
    code_at: Any  # commit -> its worktree (flows.attribution_factors.commit_worktrees)
    charged: set[str] = field(default_factory=set)  # installs already counted on a mix

    def run(self, label: str, values: Mapping[str, Any], mix: Mix) -> tuple[MixRun, pd.DataFrame]:
        planned = self.planned
        suite_name = planned["suite"] + ATTRIBUTION_SUFFIX
        home = _mix_home(
            self.folder / label.replace(" ", "").replace("+", "_").replace("@", "-"),
            mix_suite(values, planned["seeds"], planned["folds"]),
            suite_name,
            values["data_version"],
            paths.project_root(),
        )
        # Created from the project (not the scratch home), so its artifacts go to the project's store.
        store.experiment_id(suite_name)
        commit = values["code"] if "code" in planned["factors"] else ""
        code = self.code_at(commit) if commit and commit != planned["head"] else None
        needed = {
            f"{fw}@{v}": planned["installs"].seconds.get(f"{fw}@{v}", 0.0)
            for fw, v in values["framework_version"].items()
            if not v.startswith(MAIN_ENV)
        }
        install_s = sum(s for key, s in needed.items() if key not in self.charged)
        self.charged.update(needed)
        started = time.perf_counter()
        execution_id = _run_mix(suite_name, home, team=planned["team"], code=code)
        read.set_tag(execution_id, ATTRIBUTION_OF_TAG, self.cand_id)
        read.set_tag(execution_id, ATTRIBUTION_MIX_TAG, label)
        if install_s:
            read.set_tag(execution_id, INSTALL_TAG, f"{install_s:.1f}")
        if commit:
            read.set_tag(execution_id, CODE_TAG, commit)
        runs = read.job_runs(execution_id=execution_id)
        seconds = time.perf_counter() - started
        return MixRun(mix, label, execution_id, _run_link(execution_id), len(runs), seconds, install_s,
                      commit, _problems(runs)), runs


def _problems(runs: pd.DataFrame) -> list[str]:
    """One sentence per reason a mix's jobs did not end ok: how many jobs, their status, the reason."""
    if runs.empty or "status" not in runs:
        return []
    failed = runs[runs["status"].fillna("") != "ok"]
    reasons: dict[tuple[str, str], int] = {}
    for _, run in failed.iterrows():
        error = str(run.get("error") or "").strip()
        reason = error.splitlines()[0] if error else "no reason recorded"
        key = (str(run.get("status") or "unknown"), reason)
        reasons[key] = reasons.get(key, 0) + 1
    return [f"{count} job{'s' if count > 1 else ''} {status}: {reason}"
            for (status, reason), count in reasons.items()]


def explain(
    base_id: str,
    cand_id: str,
    *,
    max_jobs: int = DEFAULT_MAX_JOBS,
    max_factors: int = DEFAULT_MAX_FACTORS,
    rerun_ends: bool = False,
    refuse_unavailable_host: bool = True,
) -> Explanation:
    """Plan, run the mixes (none when the executions already isolate one factor), attribute; then,
    when the framework version is the main factor, bisect the releases between its two versions."""
    started = time.perf_counter()
    planned = plan(
        base_id,
        cand_id,
        max_jobs=max_jobs,
        max_factors=max_factors,
        rerun_ends=rerun_ends,
        refuse_unavailable_host=refuse_unavailable_host,
    )
    factors, base, cand = planned["factors"], planned["base"], planned["cand"]
    mix_runs: dict[Mix, pd.DataFrame] = {}
    mixes: list[MixRun] = []
    for mix, side_id, side_runs in planned["reused"]:
        mix_runs[mix] = side_runs
        mixes.append(MixRun(mix, mix_label(mix, factors), side_id, _run_link(side_id), 0, 0.0))
    folder = paths.runs_dir() / "attribution" / f"{cand_id[:12]}-{time.strftime('%Y%m%dT%H%M%S')}"
    with commit_worktrees(paths.project_root(), folder) as code_at:
        runner = _Runner(planned, cand_id, folder, code_at)
        for mix in planned["to_run"]:
            ran, runs = runner.run(mix_label(mix, factors), mix_values(mix, base, cand), mix)
            mix_runs[mix] = runs
            mixes.append(ran)
        attribution = counterfactuals.attribute(factors, planned["method"], mix_runs)
        jobs_so_far = sum(m.jobs for m in mixes)
        bisection, bisection_runs, note = _bisect(planned, attribution, mix_runs, runner, jobs_so_far)
    notes = planned["notes"] + ([note] if note else [])
    per_cell = {}
    for dataset, framework in planned["cells"]:
        family = _family(framework.split(" -> ")[-1])
        in_cell = {
            m: r[(r["dataset"] == dataset) & (r["framework"].map(_family) == family)]
            for m, r in mix_runs.items()
        }
        per_cell[(dataset, framework)] = counterfactuals.attribute(factors, planned["method"], in_cell)
    return Explanation(
        base_id,
        cand_id,
        planned["suite"],
        planned["cells"],
        factors,
        planned["described"],
        planned["unrunnable"],
        attribution,
        per_cell,
        mixes,
        planned["comparison"],
        notes,
        time.perf_counter() - started,
        bisection,
        bisection_runs,
    )


def _version_range(planned: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(framework, old, new) when exactly one framework's version differs, both read as versions."""
    old, new = planned["base"]["framework_version"], planned["cand"]["framework_version"]
    changed = [fw for fw in sorted(set(old) | set(new)) if old.get(fw) != new.get(fw)]
    if len(changed) != 1 or not old.get(changed[0]) or not new.get(changed[0]):
        return None
    framework = changed[0]
    return framework, old[framework].removeprefix(MAIN_ENV), new[framework].removeprefix(MAIN_ENV)


def _bisect(
    planned: Mapping[str, Any],
    attribution: Attribution,
    mix_runs: Mapping[Mix, pd.DataFrame],
    runner: _Runner,
    jobs_so_far: int,
) -> tuple[Bisection | None, list[MixRun], str]:
    """The releases between the two framework versions, bisected on `result` with the other factors
    held where the Shapley step measured the version's own effect; bounded by the job cap."""
    main = attribution.main(RESULT)
    if main is None or main.factor != "framework_version" or main.value == 0:
        return None, [], ""  # the version is not the culprit (or changed nothing): nothing to bisect
    found = _version_range(planned)
    if found is None:
        return None, [], ""
    framework, old, new = found
    releases, why_none = releases_between(get_adapter(framework).package, old, new)
    if not releases:
        return None, [], f"no bisection of {framework} {old} -> {new}: {why_none}"
    factors = planned["factors"]
    held = frozenset(factors) - {"framework_version"}  # the others at their candidate value...
    if held not in mix_runs or held | {"framework_version"} not in mix_runs:
        held = frozenset()  # ...or, one factor at a time, at the baseline's
    with_old = float(unit_values(mix_runs[held], RESULT).mean())
    with_new = float(unit_values(mix_runs[held | {"framework_version"}], RESULT).mean())
    steps = max(0, (planned["max_jobs"] - jobs_so_far) // max(1, planned["per_mix"]))
    ran: list[MixRun] = []

    def measure(release: str) -> float | str:
        refused = planned["installs"].ensure(framework, release)
        if refused:
            return refused
        values = mix_values(held, planned["base"], planned["cand"])
        values["framework_version"] = {**values["framework_version"], framework: release}
        mix_run, runs = runner.run(f"bisect {framework}@{release}", values, held)
        ran.append(mix_run)
        measured = unit_values(runs, RESULT)
        return float(measured.mean()) if len(measured) else f"no job of {framework}@{release} finished ok"

    bisection = bisect_releases(framework, old, new, releases, with_old, with_new, measure, steps)
    return bisection, ran, ""


# ---------------------------------------------------------------- the page


def main_factor(attribution: Attribution, quantity: str) -> str:
    """The regression table's "main factor": the measured culprit and its share."""
    share = attribution.main(quantity)
    if share is None:
        return ""
    interval = "" if math.isnan(share.ci_low) else f", CI {share.ci_low:+.3g}..{share.ci_high:+.3g}"
    return f"{share.factor} ({share.fraction:.0%}: {share.value:+.4g}{interval}; measured)"


def regression_table(explanation: Explanation) -> pd.DataFrame:
    """metric | current | baseline | change | main factor, the main factor measured where attributed."""
    table = explanation.comparison.table
    rows = []
    for record in table.to_dict("records"):
        cell = (record["dataset"], record["framework"])
        if cell not in explanation.per_cell:
            continue
        attributed = main_factor(explanation.per_cell[cell], record["metric"])
        if not (record["regression"] or (record["metric"] == RESULT)):
            continue
        rows.append(
            {
                "dataset": record["dataset"],
                "framework": record["framework"],
                "metric": record["metric"],
                "current": record["current"],
                "baseline": record["baseline"],
                "change": record["change"],
                "regression": record["regression"],
                "main factor": attributed or record["main factor"],
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "dataset",
            "framework",
            "metric",
            "current",
            "baseline",
            "change",
            "regression",
            "main factor",
        ],
    )


def _md_table(frame: pd.DataFrame) -> str:
    def cell(value: Any) -> str:
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def markdown(explanation: Explanation) -> str:
    attribution = explanation.attribution
    lines = [f"# Why {explanation.cand_id} regressed against {explanation.base_id}", ""]
    lines += [
        f"Suite {explanation.suite}; cells explained: "
        + ", ".join(f"{d} / {f}" for d, f in explanation.cells)
        + "."
    ]
    troubled = [mix for mix in explanation.mixes if mix.problems]
    measured = [
        f"- {attribution.sentence(quantity, explanation.described)}"
        + (" (shares add up to the change exactly)" if attribution.exact(quantity) else "")
        for quantity in counterfactuals.attributed()
        if quantity in attribution.totals
    ]
    lines += ["", "## The culprit, measured", ""]
    if measured:
        lines += measured
    else:
        why = ("the jobs of " + ", ".join(f"mix {mix.label}" for mix in troubled) + " did not end ok "
               "(below)") if troubled else "no mix gave a result to compare"
        lines.append(f"No share could be measured: {why}.")
    if troubled:
        lines += ["", "## Mixes whose jobs did not end ok", ""]
        for mix in troubled:
            lines += [f"- mix {mix.label} ({mix.execution_id}): {problem}" for problem in mix.problems]
    regressions, shares = regression_table(explanation), attribution.table()
    if not regressions.empty:  # a section is written only with something in it
        lines += ["", "## Regression table", "", _md_table(regressions)]
    if not shares.empty:
        lines += ["", "## Shares (mean over folds x seeds, 95% t-interval)", "", _md_table(shares)]
    lines += ["", f"## Executions ({explanation.jobs_run} jobs run, {explanation.seconds:.0f} s)", ""]
    lines.append(_md_table(_mix_rows(explanation.mixes)))
    bisection = explanation.bisection
    if bisection is not None:
        lines += ["", f"## Bisection of {bisection.framework} {bisection.old} -> {bisection.new}", ""]
        lines += [
            f"- {bisection.sentence()}.",
            f"- result with {bisection.old}: {bisection.with_old:.4g}; with {bisection.new}: "
            f"{bisection.with_new:.4g} (the other factors held as in the Shapley step).",
            "",
        ]
        runs = {m.label.rpartition("@")[2]: m for m in explanation.bisection_runs}
        steps = pd.DataFrame(
            [
                {
                    "release": step.release,
                    "result": step.value,
                    "behaves like": step.verdict,
                    "execution": runs[step.release].execution_id if step.release in runs else "",
                    "install s": round(runs[step.release].install_s, 1) if step.release in runs else 0.0,
                }
                for step in bisection.steps
            ],
            columns=["release", "result", "behaves like", "execution", "install s"],
        )
        lines.append(_md_table(steps))
    if explanation.unrunnable:
        lines += ["", "## Not varied", ""]
        lines += [f"- {explanation.described[f]}: {why}" for f, why in explanation.unrunnable.items()]
    if explanation.notes:
        lines += ["", "## Notes", ""] + [f"- {note}" for note in explanation.notes]
    return "\n".join(lines) + "\n"


def _mix_rows(mixes: list[MixRun]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "mix": m.label,
                "execution": m.execution_id,
                "link": m.url,
                "jobs": m.jobs,
                "seconds": round(m.seconds, 1),
                "install s": round(m.install_s, 1),
                "commit": m.code[:12],
            }
            for m in mixes
        ],
        columns=["mix", "execution", "link", "jobs", "seconds", "install s", "commit"],
    )


def write(explanation: Explanation, folder: Path) -> Path:
    """attribution.md, attribution.csv, mixes.csv, regressions.csv; attached to the candidate's run."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "attribution.md").write_text(markdown(explanation), encoding="utf-8")
    explanation.attribution.table().to_csv(folder / "attribution.csv", index=False)
    regression_table(explanation).to_csv(folder / "regressions.csv", index=False)
    pd.DataFrame(
        [
            {
                "mix": m.label,
                "execution_id": m.execution_id,
                "url": m.url,
                "jobs": m.jobs,
                "seconds": m.seconds,
                "install_s": m.install_s,
                "commit": m.code,
            }
            for m in (*explanation.mixes, *explanation.bisection_runs)
        ]
    ).to_csv(folder / "mixes.csv", index=False)
    read.log_folder(explanation.cand_id, folder, artifact_path="attribution")
    read.set_tag(explanation.cand_id, MAIN_FACTOR_TAG, main_factor(explanation.attribution, RESULT))
    return folder
