"""A report section as a plug-in: it declares where it goes (`order`) and builds its part of the
report from a ReportContext, returning a Section (markdown lines, figures, files written).

Sections are modules of tasks/report/sections/ that define ``SECTION``, found by the project's
plug-in registry (tasks/plugins.py), plus those of any package named in AUTOML_EVAL_PLUGINS;
tasks/report/build.py only puts them in order, lists their files and figures under "## Files" and
writes the pages. The context holds the job table and the statistics several sections share,
computed once when first asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from tasks.plugins import Registry
from tasks.report import aggregate, elo, jobs, leaderboard, ranking, robustness, stability
from tasks.report.markdown import markdown_table

if TYPE_CHECKING:  # types only: a plug-in module declaring a section is also imported by the job's
    # process (every registry looks into it), which must not load MLflow (explanations read it)
    from tasks.adaptive import Cell
    from tasks.report.explanations import ExplanationInputs
    from tasks.specs import AdaptiveSettings

EXTRA_SECTIONS_ENV = "AUTOML_EVAL_EXTRA_REPORT_SECTIONS"


@dataclass
class Section:
    """One section's part of the report. `figures` are listed under "## Files" (and inlined in
    report.html); `shown` are figures its own lines already embed; `files` are lines of the
    "## Files" list naming the tables it wrote."""

    lines: list[str] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    shown: list[Path] = field(default_factory=list)


@dataclass(frozen=True)
class ReportInputs:
    """What a report reads besides the job runs (each None when the runs have none)."""

    robustness_cases: pd.DataFrame | None = None  # the robustness evaluation's cases.csv, stacked
    explanations: ExplanationInputs | None = None
    forecasts: pd.DataFrame | None = None  # forecasting jobs' predictions
    reference: tuple[str, pd.DataFrame] | None = None  # (file name, a published AMLB results.csv)
    anytime_curves: pd.DataFrame | None = None  # the jobs' anytime.csv, stacked
    adaptive_settings: AdaptiveSettings | None = None  # the `adaptive:` settings the execution ran with
    adaptive_reopened: Collection[Cell] = ()  # the cells it reopened for a regression


@dataclass
class ReportContext:
    """The job table, the report's options and the statistics sections share. A section adds a
    sentence for the Notes section to `notes`."""

    title: str
    table: pd.DataFrame  # jobs.prepare(runs): one typed row per job run
    folder: Path
    baseline: str
    spread_threshold: float
    bootstrap_rounds: int
    alpha: float
    inputs: ReportInputs
    notes: list[str] = field(default_factory=list)
    markdown_table: Callable[..., str] = markdown_table

    @cached_property
    def cells(self) -> pd.DataFrame:
        return jobs.with_imputation(self.table, self.baseline)

    @cached_property
    def _task_scores(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        return jobs.task_scores(self.cells)

    @property
    def scores(self) -> pd.DataFrame:  # dataset x framework, the mean result
        return self._task_scores[0]

    @property
    def imputed(self) -> pd.DataFrame:  # dataset x framework, True where a failure was imputed
        return self._task_scores[1]

    @cached_property
    def normalized(self) -> pd.DataFrame:
        return jobs.normalized_scores(self.scores, self.baseline)

    @cached_property
    def rank_table(self) -> pd.DataFrame:
        return ranking.ranks(self.scores)

    @cached_property
    def average_ranks(self) -> pd.Series:
        return self.rank_table.mean().sort_values()

    @cached_property
    def board(self) -> pd.DataFrame:
        return leaderboard.leaderboard(self.table)

    @cached_property
    def totals(self) -> pd.DataFrame:
        return aggregate.aggregate(self.normalized, self.rank_table, jobs.dataset_rows(self.table),
                                   self.imputed)

    @cached_property
    def friedman(self) -> ranking.FriedmanResult | None:
        return ranking.friedman(self.scores)

    @cached_property
    def critical_difference(self) -> float | None:
        datasets, frameworks = self.scores.shape
        if datasets >= 2 and frameworks >= 2:
            return ranking.nemenyi_critical_difference(frameworks, datasets, self.alpha)
        return None

    @cached_property
    def anchor(self) -> str:
        """The framework at Elo 1000: the baseline, or the lowest average rank when it did not run."""
        return self.baseline if self.baseline in self.scores.columns else str(self.average_ranks.index[-1])

    @cached_property
    def elo_table(self) -> pd.DataFrame | None:
        if self.scores.shape[1] < 2:
            return None
        return elo.elo_ratings(self.cells, anchor=self.anchor, rounds=self.bootstrap_rounds).ratings

    @cached_property
    def steady(self) -> pd.DataFrame:
        spans = jobs.spans(self.scores, self.baseline)
        return stability.per_dataset(self.table, spans, self.spread_threshold)

    @cached_property
    def steady_summary(self) -> pd.DataFrame:
        return stability.per_framework(self.steady, self.normalized, self.spread_threshold)

    @cached_property
    def flags(self) -> list[str]:
        return sorted(self.steady_summary.loc[self.steady_summary["flagged"], "framework"])

    @cached_property
    def robust(self) -> robustness.RobustnessReport | None:
        return robustness.build(self.table, self.inputs.robustness_cases, self.folder, alpha=self.alpha,
                                baseline=self.baseline)


@dataclass(frozen=True)
class ReportSection:
    """A section plug-in: its name, its place (lower first) and how it is built."""

    name: str
    order: int
    build: Callable[[ReportContext], Section]


SECTIONS: Registry[ReportSection] = Registry(
    "report section", "report sections", base=ReportSection, package="tasks.report.sections",
    attribute="SECTION", extra_env=EXTRA_SECTIONS_ENV)


def ordered_sections() -> list[ReportSection]:
    """Every section, shipped and added, in report order (by order, then name)."""
    return sorted(SECTIONS.all().values(), key=lambda section: (section.order, section.name))
