"""The robustness part of a report: degradation curves, the robust ranking, clean vs robust rank,
breaking points, and the most damaging (column, corruption) cells.

Inputs are the job table (the `robust_*` metrics of each job run) and the per-case tables the
robustness evaluation left on each run (`evaluations/robustness/cases.csv`, with the job's
dataset, framework, fold and seed added). The constant predictor reads no feature, so it never
degrades: it is left out of the robust ranking (an AUC of 1 by construction says nothing).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt  # the Agg backend: tasks/report/plots.py sets it
import pandas as pd

from tasks.report import plots, ranking
from tasks.report.images import image_datasets
from tasks.report.jobs import DEFAULT_BASELINE
from tasks.report.plots import _colors, _save
from tasks.vocabulary import RESULT

ROBUST_AUC = "robust_auc"
FRAME_TARGET = "*"  # tasks.evaluations.robustness.search.FRAME
BUILD_ERROR = "build error"  # tasks.evaluations.robustness.search.BUILD_ERROR (not a scored point)
TOP_CELLS = 5


@dataclass
class RobustnessReport:
    leaderboard: pd.DataFrame  # framework, robust_rank, robust_auc, clean_rank, rank_change
    friedman: ranking.FriedmanResult | None
    critical_difference: float | None
    families: pd.DataFrame  # family x framework mean AUC, plus the framework that degrades least
    breaking: pd.DataFrame  # dataset, framework, corruption: mean breaking point over folds
    worst_cells: pd.DataFrame  # framework, dataset, target, corruption, degradation (top per framework)
    curves: pd.DataFrame  # dataset, corruption, framework, severity, degradation (frame-wide cases)
    figures: list[Path] = field(default_factory=list)
    # dataset, framework: flip distances, anomaly capture, boundary density (mean over folds)
    adaptive: pd.DataFrame = field(default_factory=pd.DataFrame)
    # dataset, corruption, framework: breaking point and its interval over the draws
    intervals: pd.DataFrame = field(default_factory=pd.DataFrame)
    # dataset, framework: FGSM/PGD/HopSkipJump in pixel space, activation coverage (torch networks)
    pixel: pd.DataFrame = field(default_factory=pd.DataFrame)


def robust_ranking(table: pd.DataFrame,
                   baseline: str = DEFAULT_BASELINE) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(dataset x framework mean robust AUC, the same for clean `result`), baseline left out.

    A framework that does not take a dataset (tfidf_logreg on a table) is NaN there; the clean
    scores keep only the cells that have a robust AUC, so both ranks are over the same cells."""
    ok = table[table["ok"] & table[ROBUST_AUC].notna() & (table["framework"] != baseline)]
    robust = ok.pivot_table(index="dataset", columns="framework", values=ROBUST_AUC, aggfunc="mean")
    clean = ok.pivot_table(index="dataset", columns="framework", values=RESULT, aggfunc="mean")
    return robust, clean.reindex(index=robust.index, columns=robust.columns).where(robust.notna())


def complete_block(scores: pd.DataFrame) -> pd.DataFrame:
    """The frameworks present on the most datasets, on the datasets where all of them are: what
    Friedman and Nemenyi need (a full table)."""
    present = scores.notna().sum()
    return scores.loc[:, present == present.max()].dropna() if not scores.empty else scores


def leaderboard(robust: pd.DataFrame, clean: pd.DataFrame) -> pd.DataFrame:
    """Average rank on robustness AUC (1 = degrades least) next to the average rank on clean data,
    each dataset ranking the frameworks that took it."""
    robust_rank, clean_rank = ranking.ranks(robust).mean(), ranking.ranks(clean).mean()
    board = pd.DataFrame({
        "datasets": robust.notna().sum(),
        "robust_rank": robust_rank,
        "robust_auc": robust.mean(),
        "clean_rank": clean_rank,
        "rank_change": robust_rank - clean_rank,  # > 0: ranks worse once the data is corrupted
    })
    board.index.name = "framework"
    return board.sort_values(["robust_rank", "robust_auc"], ascending=[True, False]).reset_index()


def family_table(table: pd.DataFrame, baseline: str = DEFAULT_BASELINE) -> pd.DataFrame:
    columns = sorted(c for c in table.columns if c.startswith("robust_") and c.endswith("_auc")
                     and c != ROBUST_AUC and c[len("robust_"):-len("_auc")] in FAMILIES)
    ok = table[table["ok"] & (table["framework"] != baseline)]
    if not columns or ok.empty:
        return pd.DataFrame()
    means = ok.groupby("framework")[columns].mean().T
    means.index = [c[len("robust_"):-len("_auc")] for c in means.index]
    means = means.dropna(how="all")
    means.index.name = "family"
    out = means.reset_index()
    out["degrades_least"] = [means.loc[f].idxmax() if means.loc[f].notna().any() else "" for f in means.index]
    return out


def breaking_table(table: pd.DataFrame, baseline: str = DEFAULT_BASELINE) -> pd.DataFrame:
    columns = [c for c in table.columns if c.startswith("robust_") and c.endswith("_breaking")]
    ok = table[table["ok"] & (table["framework"] != baseline)]
    if not columns or ok.empty:
        return pd.DataFrame()
    long = ok.melt(id_vars=["dataset", "framework"], value_vars=columns, var_name="corruption",
                   value_name="breaking_point").dropna()
    long["corruption"] = long["corruption"].str[len("robust_"):-len("_breaking")]
    wide = long.pivot_table(index=["dataset", "corruption"], columns="framework", values="breaking_point",
                            aggfunc="mean")
    return wide.reset_index()


def worst_cells(cases: pd.DataFrame, top: int = TOP_CELLS, baseline: str = DEFAULT_BASELINE) -> pd.DataFrame:
    """Per framework, the (column, corruption) cells with the highest mean degradation."""
    single = cases[(cases["target"].astype(str) != FRAME_TARGET) & (cases["status"] != BUILD_ERROR)
                   & (cases["framework"] != baseline)]
    if single.empty:
        return pd.DataFrame(columns=["framework", "dataset", "target", "corruption", "degradation"])
    keys = ["framework", "dataset", "target", "corruption"]
    mean = single.groupby(keys, as_index=False)["degradation"].mean()
    mean = mean.sort_values(["framework", "degradation"], ascending=[True, False])
    return mean.groupby("framework").head(top).reset_index(drop=True)


def curve_points(cases: pd.DataFrame) -> pd.DataFrame:
    """Mean degradation per point; with the band (lowest and highest draw) where the cases have it."""
    frame_wide = cases[(cases["target"].astype(str) == FRAME_TARGET) & (cases["status"] != BUILD_ERROR)]
    values = ["degradation"] + [c for c in ("degradation_low", "degradation_high") if c in frame_wide]
    return frame_wide.groupby(["dataset", "corruption", "framework", "severity"], as_index=False)[
        values].mean()


# The adaptive figures (tasks.evaluations.robustness metrics robust_NAME) and their columns here.
ADAPTIVE = {"adv_flip_median": "flip_median", "adv_flip_p10": "flip_p10", "adv_flip_share": "flip_share",
            "adv_rows": "rows_attacked", "anomaly_auroc": "anomaly_auroc",
            "anomaly_auroc_random": "anomaly_random", "anomaly_cases": "anomaly_cases",
            "boundary_density_random": "density_random", "boundary_density_steered": "density_steered",
            "replayed": "replayed", "replay_still_breaking": "still_breaking"}
# The figures of models that offer their torch network, kept apart from the black-box ones above.
PIXEL = {"pixel_rows": "rows_attacked", "fgsm_flip_share": "fgsm_flip_share", "fgsm_linf_median": "fgsm_linf",
         "fgsm_l2_median": "fgsm_l2", "pgd_flip_share": "pgd_flip_share", "pgd_linf_median": "pgd_linf",
         "pgd_l2_median": "pgd_l2", "pixel_hsj_flip_share": "hsj_flip_share",
         "pixel_hsj_linf_median": "hsj_linf",
         "pixel_errors": "attack_errors", "activation_coverage_before": "coverage_before",
         "activation_coverage": "coverage"}


def adaptive_table(table: pd.DataFrame, baseline: str = DEFAULT_BASELINE,
                   names: dict[str, str] = ADAPTIVE) -> pd.DataFrame:
    """Per dataset and framework (mean over folds): the minimal flip distances of the black-box
    boundary search, the share flipped within the budget, anomaly-capture AUROC, boundary density of
    the random corruptions and of the steered cases, and the replayed cases that still break (with
    `names` = PIXEL: the pixel-space attacks and activation coverage of torch networks)."""
    columns = [f"robust_{name}" for name in names if f"robust_{name}" in table.columns]
    ok = table[table["ok"] & (table["framework"] != baseline)]
    if not columns or ok.empty:
        return pd.DataFrame()
    means = ok.groupby(["dataset", "framework"])[columns].mean().dropna(how="all")
    return means.rename(columns={f"robust_{k}": v for k, v in names.items()}).reset_index()


def interval_table(table: pd.DataFrame, baseline: str = DEFAULT_BASELINE) -> pd.DataFrame:
    """Breaking point with its interval over the draws (robust_C_breaking, _low, _high)."""
    ok = table[table["ok"] & (table["framework"] != baseline)]
    names = [c[len("robust_"):-len("_breaking_low")] for c in table.columns
             if c.startswith("robust_") and c.endswith("_breaking_low")]
    rows = []
    for name in names:
        columns = {f"robust_{name}_breaking": "breaking_point", f"robust_{name}_breaking_low": "low",
                   f"robust_{name}_breaking_high": "high"}
        if not set(columns) <= set(ok.columns):
            continue
        part = ok.groupby(["dataset", "framework"])[list(columns)].mean().dropna(subset=list(columns)[1:])
        rows.append(part.rename(columns=columns).assign(corruption=name).reset_index())
    if not rows:
        return pd.DataFrame()
    return pd.concat(rows, ignore_index=True)[["dataset", "corruption", "framework", "breaking_point",
                                                "low", "high"]]


FAMILIES = frozenset({"missing", "noise", "unit", "category", "feature_drop", "text", "stream", "image"})


def images_together(frame: pd.DataFrame, shown: dict[str, str],
                    baseline: str = DEFAULT_BASELINE) -> pd.DataFrame:
    """A pixel table's rows under the image dataset it flattens, its framework marked `(pixels)`
    (as the Images section lists it): the CNN on the images and a tabular learner on their pixels saw
    the same corrupted images, so their curves, breaking points and ranks stand side by side. The
    baseline keeps its name (it reads no pixel either way, and is left out of the ranks)."""
    if frame.empty or not {"dataset", "framework"} <= set(frame.columns):
        return frame
    pixels = frame["dataset"].map(lambda d: shown.get(d, d)) != frame["dataset"]
    if not pixels.any():
        return frame
    frame = frame.copy()
    marked = pixels & (frame["framework"].astype(str) != baseline)
    frame.loc[marked, "framework"] = frame.loc[marked, "framework"].astype(str) + " (pixels)"
    frame.loc[pixels, "dataset"] = frame.loc[pixels, "dataset"].map(shown)
    return frame


def build(table: pd.DataFrame, cases: pd.DataFrame | None, folder: Path, *, alpha: float = 0.05,
          baseline: str = DEFAULT_BASELINE) -> RobustnessReport | None:
    """Every robustness table and figure, written under `folder`; None when no job has robust_auc."""
    if ROBUST_AUC not in table or not table[ROBUST_AUC].notna().any():
        return None
    shown = image_datasets(table)
    table = images_together(table, shown, baseline)
    cases = images_together(cases, shown, baseline) if cases is not None else None
    robust, clean = robust_ranking(table, baseline)
    board = leaderboard(robust, clean) if not robust.empty else pd.DataFrame()
    block = complete_block(robust)
    test = ranking.friedman(block) if not block.empty else None
    datasets, frameworks = block.shape
    cd_value = ranking.nemenyi_critical_difference(frameworks, datasets, alpha) if (
        datasets >= 2 and frameworks >= 2) else None
    cases = cases if cases is not None else pd.DataFrame()
    needed = {"dataset", "framework", "target", "corruption", "severity", "degradation", "status"}
    usable = not cases.empty and needed <= set(cases.columns)
    curves = curve_points(cases) if usable else pd.DataFrame()
    cells = worst_cells(cases, baseline=baseline) if usable else pd.DataFrame()
    report = RobustnessReport(board, test, cd_value, family_table(table, baseline),
                              breaking_table(table, baseline), cells, curves,
                              adaptive=adaptive_table(table, baseline),
                              intervals=interval_table(table, baseline),
                              pixel=adaptive_table(table, baseline, PIXEL))
    if cd_value is not None:
        average = ranking.ranks(block).mean()
        report.figures.append(plots.critical_difference(
            average, cd_value, ranking.cliques(average, cd_value), folder / "robust_critical_difference.png",
            datasets=datasets, alpha=alpha))
    for dataset, points in (curves.groupby("dataset") if not curves.empty else []):
        path = folder / f"robust_curves_{dataset}.png"
        report.figures.append(degradation_curves(points, str(dataset), path))
    for name, frame in (("robust_leaderboard", board), ("robust_families", report.families),
                        ("robust_breaking_points", report.breaking), ("robust_worst_cells", cells),
                        ("robust_curves", curves), ("robust_adaptive", report.adaptive),
                        ("robust_breaking_intervals", report.intervals), ("robust_pixel", report.pixel)):
        if not frame.empty:
            frame.to_csv(folder / f"{name}.csv", index=False)
    if usable:
        cases.to_csv(folder / "robust_cases.csv", index=False)
    return report


def degradation_curves(points: pd.DataFrame, dataset: str, path: Path) -> Path:
    """One panel per corruption: degradation over severity, one line per framework."""
    corruptions = sorted(points["corruption"].unique())
    columns = min(4, len(corruptions))
    rows = math.ceil(len(corruptions) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(3.2 * columns, 2.6 * rows), squeeze=False,
                                sharex=True, sharey=True)
    colors = _colors(sorted(points["framework"].unique()))
    for index, corruption in enumerate(corruptions):
        ax = axes[index // columns][index % columns]
        for framework, line in points[points["corruption"] == corruption].groupby("framework"):
            line = line.sort_values("severity")
            ax.plot([0.0, *line["severity"]], [0.0, *line["degradation"]], marker="o", markersize=3,
                    label=str(framework), color=colors[str(framework)])
            if {"degradation_low", "degradation_high"} <= set(line.columns):  # the draws' band
                ax.fill_between([0.0, *line["severity"]], [0.0, *line["degradation_low"]],
                                [0.0, *line["degradation_high"]], color=colors[str(framework)], alpha=0.2,
                                linewidth=0)
        ax.axhline(0.5, color="grey", linewidth=0.6, linestyle="--")
        ax.set_title(corruption, fontsize=9)
        ax.set_ylim(-0.1, 1.2)
    for index in range(len(corruptions), rows * columns):
        axes[index // columns][index % columns].axis("off")
    axes[0][0].legend(fontsize=7)
    figure.suptitle(f"{dataset}: degradation (0 = clean, 1 = constant predictor) over severity, mean "
                    "of the draws; band: lowest to highest draw; dashed: breaking threshold", fontsize=9)
    return _save(figure, path)


def markdown(report: RobustnessReport, table_of: Callable[[pd.DataFrame], str],
             alpha: float = 0.05) -> list[str]:
    """The report.md section; `table_of` renders a frame as a markdown table (build._table)."""
    render = table_of
    lines = ["## Robustness (corrupted test folds)", ""]
    if not report.leaderboard.empty:
        lines += ["Average rank on the robustness AUC (1 = degrades least; the constant predictor is left "
                  "out) next to the rank on clean data; rank_change > 0: wins on clean data, loses on "
                  "corrupted data.", "", render(report.leaderboard), ""]
    if report.friedman is not None:
        verdict = "differ" if report.friedman.p_value < alpha else "do not differ significantly"
        lines += [f"Friedman test over {report.friedman.datasets} datasets x {report.friedman.frameworks} "
                  f"frameworks: chi2 = {report.friedman.statistic:.3f}, p = {report.friedman.p_value:.3g}: "
                  f"the robust ranks {verdict} at alpha = {alpha}.", ""]
    if report.critical_difference is not None:
        lines += [f"Nemenyi critical difference: {report.critical_difference:.3f} ranks.", ""]
    if not report.families.empty:
        lines += ["### Robustness AUC per corruption family", "", render(report.families), ""]
    if not report.breaking.empty:
        lines += ["### Breaking points", "", "Smallest severity where `result` fell below halfway from clean "
                  "to the constant predictor (1 = held at every severity tested).", "",
                  render(report.breaking), ""]
    if not report.intervals.empty:
        lines += ["### Breaking points with their interval over the draws", "", "Each draw (another seed at "
                  "the same severities) has its own breaking point; low and high are the extremes (1 = a "
                  "draw held everywhere). The breaking point itself is read from the mean of the draws.", "",
                  render(report.intervals), ""]
    if not report.adaptive.empty:
        lines += ["### Boundary samples and effectiveness signals", "",
                  "flip_median / flip_p10: median and 10th-percentile minimal flip distance found by a "
                  "black-box HopSkipJump search (numeric features in training spreads, a category change "
                  "one unit; regression: the smallest move that shifts the prediction by the suite's "
                  "regression_share, half by default, of the target's spread), over the flipped rows; "
                  "flip_share: rows flipped within the flip budget; anomaly_auroc: how well (1 - "
                  "confidence) separates wrong from right predictions on the generated cases (0.5: not at "
                  "all), anomaly_random the same over the random corruptions alone, anomaly_cases the "
                  "copies drawn again where it was lowest while under its target; "
                  "density_random / density_steered: share of cases with a top-two probability gap "
                  "under delta, among the random corruptions and among the steered boundary cases; "
                  "replayed / still_breaking: cases saved by an earlier execution, and those that still "
                  "break the model.", "", render(report.adaptive), ""]
    if not report.pixel.empty:
        lines += ["### Pixel-space attacks and activation coverage (torch networks)", "",
                  "Apart from the black-box figures above: attacks in the network's own input space (pixels "
                  "in 0..1) on rows_attacked seeded test rows, each trying to flip the network's own "
                  "prediction. fgsm / pgd: FGSM (minimal mode: the smallest gradient-sign step that flips) "
                  "and PGD follow the loss's gradient; hsj: HopSkipJump reads decisions only. *_flip_share: "
                  "rows flipped within the suite's pixel_eps (L-inf); *_linf / *_l2: median perturbation of "
                  "the flipped rows. coverage_before / coverage: share of the network's neurons above the "
                  "activation threshold for at least one generated case, before and after the noise cases "
                  "steered towards unfired neurons.", "", render(report.pixel), ""]
    if not report.worst_cells.empty:
        lines += [f"### Top {TOP_CELLS} most damaging (column, corruption) cells per framework", "",
                  render(report.worst_cells), ""]
    return lines
