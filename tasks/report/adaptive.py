"""The Adaptive section of a report: per cell the round it settled and the evidence, the compute
spent against the full grid's, and the decisions still open at the last round.

The rounds are replayed from the recorded per-fold results with the `adaptive:` settings and the
reopened cells the execution recorded (tasks/adaptive.py): the procedure is a pure function of
those, so the replay gives each cell the folds the run gave it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path

import pandas as pd

from tasks.adaptive import Cell, Grid, Rounds, TopK, play_rounds
from tasks.specs import AdaptiveSettings
from tasks.vocabulary import RESULT


def grid_of(jobs: pd.DataFrame) -> Grid:
    """dataset -> framework -> fold -> `result` (mean over seeds) of the ok jobs."""
    ok = jobs[jobs["ok"]]
    means = ok.groupby(["dataset", "framework", "fold"])[RESULT].mean()
    grid: dict[str, dict[str, dict[int, float]]] = {}
    for (dataset, framework, fold), value in means.items():
        grid.setdefault(str(dataset), {}).setdefault(str(framework), {})[int(fold)] = float(value)
    return grid


def replay(jobs: pd.DataFrame, settings: AdaptiveSettings, reopened: Collection[Cell] = ()) -> Rounds:
    max_folds = settings.max_folds or int(jobs["fold"].max()) + 1
    return play_rounds(grid_of(jobs), confidence=settings.confidence, min_folds=settings.min_folds,
                       max_folds=max_folds, decide=settings.decide, rope=settings.rope,
                       futility=settings.futility, reopened=reopened, k=settings.top_k)


def tables(jobs: pd.DataFrame, settings: AdaptiveSettings, rounds: Rounds,
           reopened: Collection[Cell] = ()) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, float]]:
    """The cells (folds, round settled), the pairs (verdict, interval) and the compute figures."""
    cells = pd.DataFrame([
        {"dataset": dataset, "framework": framework, "folds": folds,
         "settled_in_round": ("reopened (regressed)" if (dataset, framework) in reopened
                              else rounds.settled_at[(dataset, framework)] or "open at max")}
        for (dataset, framework), folds in sorted(rounds.folds.items())])
    pairs = pd.DataFrame([
        {"dataset": pair.dataset, "first": pair.first, "second": pair.second, "verdict": pair.verdict,
         "folds": pair.interval.folds, "mean_difference": pair.interval.mean,
         "low": pair.interval.low, "high": pair.interval.high}
        for pair in rounds.pairs])
    max_folds = settings.max_folds or int(jobs["fold"].max()) + 1
    seeds = max(1, int(jobs["seed"].nunique()))
    full_jobs = len(rounds.folds) * max_folds * seeds
    fit_per_job = jobs.groupby(["dataset", "framework"])["fit_s"].mean()
    compute = {"jobs_run": float(len(jobs)), "jobs_full_grid": float(full_jobs),
               "job_share": len(jobs) / full_jobs if full_jobs else float("nan"),
               "fit_s_run": float(jobs["fit_s"].sum()),
               "fit_s_full_grid_estimate": float(fit_per_job.sum() * max_folds * seeds),
               "rounds": float(rounds.rounds)}
    return cells, pairs, compute


def top_k_lines(top: TopK, folder: Path, table_markdown: Callable[..., str]) -> list[str]:
    """The top k across datasets: the frameworks in and out, their mean rank, and the evidence per
    pair (`adaptive_top_k.csv`)."""
    pairs = pd.DataFrame([
        {"first": pair.first, "second": pair.second, "verdict": pair.verdict, "folds": pair.interval.folds,
         "rank_difference": pair.interval.mean, "low": pair.interval.low, "high": pair.interval.high}
        for pair in top.pairs])
    pairs.to_csv(folder / "adaptive_top_k.csv", index=False)
    ranked = sorted(top.mean_rank.items(), key=lambda item: item[1])
    ranks = ", ".join(f"{name} {rank:.2f}" for name, rank in ranked)
    return [f"Top {top.k} across datasets: {', '.join(top.top) if top.settled else 'open'} (in: "
            f"{', '.join(top.top) or 'none yet'}; out: {', '.join(top.out) or 'none yet'}). Fold mean rank "
            f"over the {top.folds} folds every cell ran, 1 best: {ranks}.", "",
            "The evidence, per pair of frameworks (second's fold mean rank minus first's: above 0, first "
            "ranks better):", "", table_markdown(pairs), ""]


def section(jobs: pd.DataFrame, settings: AdaptiveSettings | None, folder: Path,
            table_markdown: Callable[..., str], reopened: Collection[Cell] = ()) -> list[str]:
    """report.md's Adaptive section; empty when the execution did not run in rounds."""
    if settings is None or not jobs["ok"].any() or jobs["framework"].nunique() < 2:
        return []
    rounds = replay(jobs, settings, reopened)
    cells, pairs, compute = tables(jobs, settings, rounds, reopened)
    cells.to_csv(folder / "adaptive_cells.csv", index=False)
    pairs.to_csv(folder / "adaptive_pairs.csv", index=False)
    open_pairs = pairs[pairs["verdict"] == "open"]
    open_races = [race.dataset for race in rounds.races if not race.settled]
    best = rounds.best
    decided = [f"top_k (k = {settings.top_k})" if name == "top_k" else name for name in settings.decide]
    lines = ["## Adaptive (folds in rounds)", "",
             f"Decided: {', '.join(decided)} at confidence {settings.confidence} (rope "
             f"{settings.rope}); rounds from {settings.min_folds} folds, one more per round. Each interval "
             "is the anytime-valid confidence sequence on the mean per-fold difference first - second "
             "(docs/suites.md, section Adaptive benchmarking).", "",
             f"Compute: {int(compute['jobs_run'])} jobs of the full grid's {int(compute['jobs_full_grid'])} "
             f"({compute['job_share']:.0%}), fit {compute['fit_s_run']:.1f} s of an estimated "
             f"{compute['fit_s_full_grid_estimate']:.1f} s, in {int(compute['rounds'])} rounds.", "",
             "Per cell, the folds it got and the round after which no open decision needed it:", "",
             table_markdown(cells), ""]
    if reopened:
        lines += ["Reopened (settled in the previous execution, its result now worse beyond the nightly's "
                  "regression threshold; more folds up to the last round): "
                  + ", ".join(f"{dataset} / {name}" for dataset, name in sorted(reopened)) + ".", ""]
    lines += ["The evidence, per pair:", "", table_markdown(pairs), ""]
    if "best" in settings.decide:
        lines += [f"Best across datasets: {best.leader if best.settled else 'open'} (datasets won: "
                  + ", ".join(f"{name} {count}" for name, count in best.wins.items()) + ").", ""]
    top = rounds.top
    if top is not None:
        lines += top_k_lines(top, folder, table_markdown)
    still_open = [f"{row.dataset}: {row.first} vs {row.second}" for row in open_pairs.itertuples()
                  if "pairwise" in settings.decide]
    still_open += [f"{dataset}: best" for dataset in open_races if "best" in settings.decide]
    if top is not None and not top.settled:
        still_open += [f"top {top.k} across datasets ({', '.join(top.undecided)} undecided)"]
    lines += [("Still open at the last round: " + "; ".join(still_open) + ".") if still_open
              else "No decision is open.", ""]
    return lines
