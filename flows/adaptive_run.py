"""A suite's jobs in rounds (its `adaptive:` block): after each round, only the cells that an open
decision still needs get the next fold (tasks/adaptive.py decides), and the cells the previous
execution had settled but whose result regressed since then get folds again (reopened,
tasks/report/adaptive_reopen.py decides). Thin wiring: the dispatcher runs each round, locally or
across the team's hosts, and records every job as any run does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from flows.dispatch import Dispatcher, JobContext
from tasks.adaptive import Cell, Grid, needs_more_folds
from tasks.plan import Job
from tasks.report import jobs as job_table
from tasks.report.adaptive import grid_of as recorded_grid
from tasks.report.adaptive_reopen import regressed_cells, settled_cells
from tasks.report.compare_store import previous_successful
from tasks.results import JobResult
from tasks.specs import AdaptiveSettings
from tasks.tracking import read
from tasks.tracking.adaptive_record import record_adaptive, recorded_adaptive
from tasks.vocabulary import RESULT

logger = logging.getLogger("automl_eval.adaptive")


@dataclass(frozen=True)
class RoundsRun:
    ran: int  # jobs run now, over all rounds
    rounds: int
    open_cells: int  # (dataset, framework) cells an open decision still needed after the last round
    reopened: frozenset[Cell] = frozenset()


@dataclass(frozen=True)
class Previous:
    """The previous execution of the suite, as the nightly's regression check finds it, and the
    cells its rounds settled."""

    execution_id: str
    grid: Grid
    settled: frozenset[Cell]


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


def previous_execution(execution_id: str, settings: AdaptiveSettings) -> Previous | None:
    """The previous successful execution of the same suite (trigger and team alike, as the nightly
    compares) and the cells it settled, replayed with the settings it recorded (these, if it
    recorded none); None without one."""
    baseline = previous_successful(execution_id)
    if baseline is None:
        return None
    runs = read.job_runs(execution_id=baseline)
    if runs.empty:
        return None
    grid = recorded_grid(job_table.prepare(runs))
    recorded, reopened = recorded_adaptive(read.execution(baseline))
    return Previous(baseline, grid, frozenset(settled_cells(grid, recorded or settings, reopened)))


def _say(cells: Iterable[Cell]) -> str:
    return ", ".join(f"{dataset} / {framework}" for dataset, framework in sorted(cells))


def run_in_rounds(runner: Dispatcher, jobs: list[Job], runnable: list[Job],
                  contexts: dict[str, JobContext], settings: AdaptiveSettings,
                  results_now: Callable[[], Mapping[str, JobResult]], *, counted: int = 0,
                  previous: Previous | None = None,
                  on_reopen: Callable[[frozenset[Cell]], None] | None = None) -> RoundsRun:
    """Round r runs the cells still wanted on folds below min_folds + r - 1; `results_now` reads what is
    recorded (this run's and a resumed execution's), so a resume picks up where the rounds stopped.

    The progress bar's total grows by each round's jobs (`counted`: those it already holds, the
    skipped ones). After each round a cell `previous` settled is reopened if its result regressed;
    `on_reopen` is told the reopened cells whenever they grow (the execution records them)."""
    max_folds = settings.max_folds or settings.min_folds
    wanted = {(job.dataset, job.framework_id) for job in jobs}
    reopened: frozenset[Cell] = frozenset()
    ran, round_number = 0, 0
    for folds in range(settings.min_folds, max_folds + 1):
        round_number += 1
        this_round = [job for job in runnable
                      if job.fold < folds and (job.dataset, job.framework_id) in wanted]
        taken = {job.key for job in this_round}
        runnable = [job for job in runnable if job.key not in taken]
        print(f"adaptive round {round_number}: {len(this_round)} jobs, folds below {folds}, "
              f"{len(wanted)} cells open")
        runner.planned(counted + ran + len(this_round))
        runner.run(this_round, contexts)
        ran += len(this_round)
        grid = grid_of(jobs, results_now())
        if previous is not None:
            regressed = regressed_cells(previous.grid, grid, previous.settled - reopened)
            if regressed:
                reopened |= regressed
                print(f"adaptive: reopened {_say(regressed)}: settled in execution {previous.execution_id}, "
                      "now worse beyond the nightly's regression threshold; more folds up to "
                      f"{max_folds}")
                if on_reopen is not None:
                    on_reopen(reopened)
        wanted = needs_more_folds(grid, settings.confidence, settings.decide, settings.rope,
                                  max_folds if settings.futility else None, settings.top_k) | reopened
        if not wanted:
            break
    return RoundsRun(ran, round_number, len(wanted), reopened)


def record_rounds(execution_id: str, settings: AdaptiveSettings, reopened: Iterable[Cell] = ()) -> None:
    """Tag the execution with its settings and reopened cells; a store that does not answer costs the
    report those tags (it then reads the suite file), never the run."""
    try:
        record_adaptive(execution_id, settings, reopened)
    except Exception as exc:
        logger.warning("adaptive settings not recorded on execution %s: %s", execution_id, exc)
