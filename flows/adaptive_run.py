"""A suite's jobs in rounds (its `adaptive:` block): after each round, only the cells that an open
decision still needs get the next fold (tasks/adaptive.py decides). Thin wiring: the dispatcher
runs each round, locally or across the team's hosts, and records every job as any run does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from flows.dispatch import Dispatcher, JobContext
from tasks.adaptive import Grid, needs_more_folds
from tasks.plan import Job
from tasks.results import JobResult
from tasks.specs import AdaptiveSettings
from tasks.vocabulary import RESULT


@dataclass(frozen=True)
class RoundsRun:
    ran: int  # jobs run now, over all rounds
    rounds: int
    open_cells: int  # (dataset, framework) cells an open decision still needed after the last round


def grid_of(jobs: Iterable[Job], results: Mapping[str, JobResult]) -> Grid:
    """dataset -> framework -> fold -> `result`, averaged over seeds; jobs not ok are left out."""
    sums: dict[str, dict[str, dict[int, list[float]]]] = {}
    for job in jobs:
        result = results.get(job.key)
        by_fold = sums.setdefault(job.dataset, {}).setdefault(job.framework_id, {})
        if result is not None and result.status == "ok" and RESULT in result.scores:
            by_fold.setdefault(job.fold, []).append(float(result.scores[RESULT]))
    return {dataset: {name: {fold: sum(values) / len(values) for fold, values in by_fold.items()}
                      for name, by_fold in by_framework.items()}
            for dataset, by_framework in sums.items()}


def run_in_rounds(runner: Dispatcher, jobs: list[Job], runnable: list[Job],
                  contexts: dict[str, JobContext], settings: AdaptiveSettings,
                  results_now: Callable[[], Mapping[str, JobResult]]) -> RoundsRun:
    """Round r runs the cells still wanted on folds below min_folds + r - 1; `results_now` reads what is
    recorded (this run's and a resumed execution's), so a resume picks up where the rounds stopped."""
    max_folds = settings.max_folds or settings.min_folds
    wanted = {(job.dataset, job.framework_id) for job in jobs}
    ran, round_number = 0, 0
    for folds in range(settings.min_folds, max_folds + 1):
        round_number += 1
        this_round = [job for job in runnable
                      if job.fold < folds and (job.dataset, job.framework_id) in wanted]
        taken = {job.key for job in this_round}
        runnable = [job for job in runnable if job.key not in taken]
        print(f"adaptive round {round_number}: {len(this_round)} jobs, folds below {folds}, "
              f"{len(wanted)} cells open")
        runner.run(this_round, contexts)
        ran += len(this_round)
        wanted = needs_more_folds(grid_of(jobs, results_now()), settings.confidence, settings.decide,
                                  settings.rope, max_folds if settings.futility else None)
        if not wanted:
            break
    return RoundsRun(ran, round_number, len(wanted))
