"""Job: one (dataset@version, framework:variant@version, fold, seed) under a budget, and the suite plan.

The job key is a stable hash of everything that defines the job, so a resumed suite can tell a
finished job from a missing one and no job is recorded twice.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

from tasks.errors import UserError
from tasks.metric_registry import can_optimise
from tasks.specs import Budget, DatasetSpec, FrameworkRef, ScalingSettings, framework_id


@dataclass(frozen=True)
class ScalingStep:
    """One step of a suite's `scaling:` block: the cores and GPUs its jobs get (the budget's time
    stays), and the steps the plan capped at this host's cores and GPUs, in words ("" when none)."""

    cores: int
    gpus: int
    capped: str = ""


@dataclass(frozen=True)
class Job:
    suite: str
    dataset: str
    data_version: str
    framework: str  # adapter name
    variant: str | None
    fold: int
    seed: int
    budget: Budget
    params: dict[str, Any] = field(default_factory=dict)
    # The framework's version in its own environment (`hgb@1.7.2`); None: the main environment.
    framework_version: str | None = None
    # The suite's scaling step this job runs at (its budget already holds the step's cores and GPUs,
    # so the key differs by step); None outside a `scaling:` block.
    scaling: ScalingStep | None = None

    @property
    def framework_id(self) -> str:
        """`name[:variant][@version]`; without a version exactly what it was before versions
        existed, so the keys of jobs recorded then still match (resume)."""
        return framework_id(self.framework, self.variant, self.framework_version)

    @property
    def key(self) -> str:
        identity = {
            "suite": self.suite,
            "dataset": self.dataset,
            "data_version": self.data_version,
            "framework": self.framework_id,
            "params": self.params,
            "fold": self.fold,
            "seed": self.seed,
            "budget": self.budget.model_dump(),
        }
        canonical = json.dumps(identity, sort_keys=True, default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    @property
    def label(self) -> str:
        step = f"/{self.scaling.cores}c{self.scaling.gpus}g" if self.scaling is not None else ""
        return f"{self.dataset}/{self.framework_id}/fold{self.fold}/seed{self.seed}{step}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["budget"] = self.budget.model_dump()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Job:
        step = data.get("scaling")
        return cls(**{**data, "budget": Budget(**data["budget"]),
                      "scaling": ScalingStep(**step) if isinstance(step, dict) else step})


def make_jobs(
    suite_name: str,
    datasets: dict[str, str],  # dataset name -> data version
    frameworks: list[FrameworkRef],
    folds: int,
    seeds: list[int],
    budget: Budget,
) -> list[Job]:
    """Every combination, ordered so that each dataset's folds run close together."""
    return [
        Job(suite_name, name, data_version, ref.name, ref.variant, fold, seed, budget, dict(ref.params),
            framework_version=ref.version)
        for name, data_version in datasets.items()
        for fold in range(folds)
        for seed in seeds
        for ref in frameworks
    ]


def scaling_steps(settings: ScalingSettings, budget: Budget, *, host_cores: int,
                  host_gpus: int) -> list[ScalingStep]:
    """The steps of a `scaling:` block on this host: every (cores, gpus) pair, fewest first, each
    capped at the host's cores and GPUs. A capped step runs at the cap (once, however many steps
    it stands for); every step carries the note naming what was capped, so the report lists it."""
    asked_cores = settings.cores or [budget.cores]
    asked_gpus = settings.gpus if settings.gpus is not None else [budget.gpus]
    notes = []
    over_cores = sorted({count for count in asked_cores if count > host_cores})
    if over_cores:
        notes.append(f"cores {', '.join(map(str, over_cores))} capped at {host_cores} (the host's cores)")
    over_gpus = sorted({count for count in asked_gpus if count > host_gpus})
    if over_gpus:
        where = f"the host's {host_gpus} GPUs" if host_gpus else "no GPU is visible on the host"
        notes.append(f"gpus {', '.join(map(str, over_gpus))} capped at {host_gpus} ({where})")
    capped = "; ".join(notes)
    cores = sorted({min(count, host_cores) for count in asked_cores})
    gpus = sorted({min(count, host_gpus) for count in asked_gpus})
    return [ScalingStep(core_count, gpu_count, capped) for gpu_count in gpus for core_count in cores]


def expand_scaling(jobs: list[Job], steps: Sequence[ScalingStep]) -> list[Job]:
    """Each job once per step: the same budget time, the step's cores and GPUs (so each step has its
    own key), the step recorded on the job. Steps stay side by side for each job."""
    return [
        replace(job, budget=job.budget.model_copy(update={"cores": step.cores, "gpus": step.gpus}),
                scaling=step)
        for job in jobs
        for step in steps
    ]


def scaling_record(job: Job, info: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """(params, tags) a scaling job's run carries, from its job and its result's info (JobInfo as
    JSON): the step, what kind of work the framework did, and the steps capped on its host.

    The work: `fixed` (its params fix the work, FrameworkAdapter.fixed_work: the report compares
    fit_s), `cut_short` (fixed work the budget's time stopped: its fit_s is the budget's, not
    comparable), `fills_time` (it searches until its time is spent: the report compares result)."""
    if job.scaling is None:
        return {}, {}
    params = {"scaling_cores": str(job.scaling.cores), "scaling_gpus": str(job.scaling.gpus)}
    tags: dict[str, str] = {}
    if "fixed_work" in info:  # absent where the job failed before its framework was asked
        fixed = bool(info.get("fixed_work"))
        tags["scaling_work"] = ("cut_short" if info.get("fit_stopped_by_time") else "fixed") if fixed \
            else "fills_time"
    if job.scaling.capped:
        tags["scaling_capped"] = job.scaling.capped
    return params, tags


class MetricOptimiser(Protocol):
    """What the metric check needs of a framework adapter (tasks/frameworks/base.FrameworkAdapter)."""

    @property
    def problem_types(self) -> frozenset[str]: ...

    @property
    def metric_names(self) -> str | None:
        """Whose metric names it optimises the suite metric by; None: none."""


def check_suite_metrics(
    suite: str, datasets: Sequence[DatasetSpec], frameworks: Mapping[str, MetricOptimiser]
) -> None:
    """Refuse, before any job runs, a suite that asks a framework to optimise a metric it has no name for.

    `frameworks` maps each framework id of the suite to its adapter; a dataset whose problem type the
    framework does not handle is skipped by the jobs and not checked here.
    """
    for spec in datasets:
        for framework, adapter in frameworks.items():
            names, metric = adapter.metric_names, str(spec.metric)
            if names and spec.problem_type in adapter.problem_types and not can_optimise(metric, names):
                raise UserError(
                    f"suite '{suite}': framework '{framework}' cannot optimise the metric '{metric}' of "
                    f"dataset '{spec.name}'; give its card another metric or run without '{framework}'."
                )


class TakesDatasets(Protocol):
    """What the plan asks of a framework adapter (tasks/frameworks/base.py, FrameworkAdapter)."""

    @property
    def uses_gpu(self) -> bool:
        """Whether a GPU the budget grants is of any use to it."""

    def applies_to(self, spec: DatasetSpec) -> str | None: ...


def not_applicable(jobs: list[Job], specs: Mapping[str, DatasetSpec],
                   adapters: Mapping[str, TakesDatasets]) -> dict[str, str]:
    """Job key -> why its framework cannot take its dataset (problem type, modality, rows, columns),
    as the adapter says, or a scaling step with GPUs for a framework that uses none (the 0-GPU step
    already measures it); such a job is recorded as skipped with that reason, never run."""
    reasons: dict[str, str] = {}
    for job in jobs:
        adapter = adapters.get(job.framework)
        reason = adapter.applies_to(specs[job.dataset]) if adapter is not None else None
        if not reason and job.scaling is not None and job.scaling.gpus and adapter is not None \
                and not adapter.uses_gpu:
            reason = (f"{job.framework} uses no GPU, so its scaling step with {job.scaling.gpus} GPU(s) "
                      "would repeat the step without; not run.")
        if reason:
            reasons[job.key] = reason
    return reasons
