"""Job: one (dataset@version, framework:variant@version, fold, seed) under a budget, and the suite plan.

The job key is a stable hash of everything that defines the job, so a resumed suite can tell a
finished job from a missing one and no job is recorded twice.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from tasks.errors import UserError
from tasks.metric_registry import can_optimise
from tasks.specs import Budget, DatasetSpec, FrameworkRef, framework_id


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
        return f"{self.dataset}/{self.framework_id}/fold{self.fold}/seed{self.seed}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["budget"] = self.budget.model_dump()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Job:
        return cls(**{**data, "budget": Budget(**data["budget"])})


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



class MetricOptimiser(Protocol):
    """What the metric check needs of a framework adapter (tasks/frameworks/base.FrameworkAdapter)."""

    problem_types: frozenset[str]
    metric_names: str | None  # whose metric names it optimises the suite metric by; None: none


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

    def applies_to(self, spec: DatasetSpec) -> str | None: ...


def not_applicable(jobs: list[Job], specs: Mapping[str, DatasetSpec],
                   adapters: Mapping[str, TakesDatasets]) -> dict[str, str]:
    """Job key -> why its framework cannot take its dataset (problem type, modality, rows, columns),
    as the adapter says; such a job is recorded as skipped with that reason, never run."""
    reasons: dict[str, str] = {}
    for job in jobs:
        adapter = adapters.get(job.framework)
        reason = adapter.applies_to(specs[job.dataset]) if adapter is not None else None
        if reason:
            reasons[job.key] = reason
    return reasons
