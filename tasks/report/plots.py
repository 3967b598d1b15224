"""The report's figures (PNG, matplotlib Agg): critical difference, Elo, win rates, Pareto, stability."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: reports are written on servers and in flows, never shown

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator  # noqa: E402

DPI = 120
FADED = 0.25


def _save(figure: Figure, path: Path, *, tight: bool = True, dpi: int = DPI) -> Path:
    if tight:  # tight_layout is slow on many small panels; those set their spacing themselves
        figure.tight_layout()
    figure.savefig(path, dpi=dpi)
    plt.close(figure)
    return path


def critical_difference(
    average_ranks: pd.Series,
    critical_difference_value: float,
    groups: list[list[str]],
    path: Path,
    *,
    datasets: int,
    alpha: float = 0.05,
) -> Path:
    """Demšar's diagram: average ranks on an axis, bars join frameworks not significantly different."""
    ordered = average_ranks.sort_values()
    k = len(ordered)
    half = math.ceil(k / 2)
    bottom = min(-half * 0.45, -0.2 - 0.18 * len(groups)) - 0.3
    figure, axes = plt.subplots(figsize=(8, 1.5 + 0.75 * (1.4 - bottom)))
    low, high = 1, max(k, 2)
    axes.set_xlim(low - 0.5, high + 0.5)
    axes.set_ylim(bottom, 1.4)
    axes.invert_xaxis()  # rank 1 (best) on the right, as in Demšar's figures
    axes.hlines(0, low, high, color="black", linewidth=1.2)
    for tick in range(low, high + 1):
        axes.vlines(tick, 0, 0.12, color="black")
        axes.text(tick, 0.22, str(tick), ha="center", va="bottom", fontsize=9)
    # Best half labelled on the right, the rest on the left, each with an elbow line to its rank.
    for position, (name, rank) in enumerate(ordered.items()):
        right = position < half
        row = position if right else k - 1 - position
        y = -(row + 1) * 0.45
        x_label = low - 0.45 if right else high + 0.45
        axes.plot([rank, rank, x_label], [0, y, y], color="tab:blue", linewidth=1)
        axes.text(
            x_label,
            y,
            f" {name} ({rank:.2f}) " if right else f" ({rank:.2f}) {name} ",
            ha="left" if right else "right",
            va="center",
            fontsize=9,
        )
    for index, group in enumerate(groups):
        y = -0.2 - 0.18 * index
        axes.plot([ordered[group[0]] - 0.03, ordered[group[-1]] + 0.03], [y, y], color="black", linewidth=3)
    axes.plot([high, high - critical_difference_value], [0.9, 0.9], color="tab:red", linewidth=2)
    axes.text(
        high - critical_difference_value / 2,
        0.95,
        f"CD = {critical_difference_value:.2f}",
        ha="center",
        va="bottom",
        fontsize=9,
        color="tab:red",
    )
    axes.set_title(
        f"Critical difference (Nemenyi, alpha={alpha}, {datasets} datasets): "
        "average rank, 1 = best\nframeworks joined by a black bar are not significantly different",
        fontsize=10,
    )
    axes.axis("off")
    return _save(figure, path)


def elo(ratings: pd.DataFrame, anchor: str, path: Path) -> Path:
    """Each rating as a point on its 95% bootstrap interval; the anchor's 1000 drawn as a line.

    The interval is drawn from its own ends, not as error bars around the rating: a percentile
    interval from few bootstrap rounds can leave out the rating itself (matplotlib refuses the
    negative error bar that would make)."""
    table = ratings.sort_values("elo")
    figure, axes = plt.subplots(figsize=(7, 1.2 + 0.4 * len(table)))
    y = np.arange(len(table))
    axes.hlines(y, table["ci_low"], table["ci_high"], color="gray", linewidth=1.5)
    axes.plot(table["elo"], y, "o", color="tab:blue", label="Elo (95% bootstrap interval)")
    axes.axvline(1000, color="tab:red", linestyle="--", linewidth=1, label=f"{anchor} = 1000 (anchor)")
    axes.set_yticks(y, table["framework"])
    axes.set_xlabel("Elo rating (Bradley-Terry, points)")
    axes.set_title("Elo from pairwise battles per dataset, fold and seed")
    axes.legend(loc="lower right", fontsize=8)
    axes.grid(axis="x", alpha=0.3)
    return _save(figure, path)


def win_rate(matrix: pd.DataFrame, path: Path) -> Path:
    k = len(matrix)
    figure, axes = plt.subplots(figsize=(1.6 + 0.75 * k, 1.2 + 0.65 * k))
    image = axes.imshow(matrix.to_numpy(dtype=float), cmap="RdBu", vmin=0, vmax=1)
    for i in range(k):
        for j in range(k):
            value = matrix.iat[i, j]
            if not np.isnan(value):
                axes.text(
                    j,
                    i,
                    f"{value:.2f}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if abs(value - 0.5) > 0.35 else "black",
                )
    axes.set_xticks(range(k), matrix.columns, rotation=45, ha="right")
    axes.set_yticks(range(k), matrix.index)
    axes.set_xlabel("opponent")
    axes.set_ylabel("framework")
    axes.set_title("Win rate of row over column\n(per dataset, fold, seed; ties count half)", fontsize=10)
    figure.colorbar(image, ax=axes, label="win rate (0-1)")
    return _save(figure, path)


def _front_scatter(
    axes: Axes, points: pd.DataFrame, x: str, y: str, colors: dict[str, str], *, labels: bool = True
) -> None:
    for row in points.itertuples():
        front = bool(row.on_front)
        axes.scatter(
            getattr(row, x),
            getattr(row, y),
            color=colors[row.framework],
            s=60 if front else 40,
            alpha=1.0 if front else FADED,
            edgecolor="black" if front else "none",
            zorder=3,
        )
        if not labels:
            continue
        axes.annotate(
            row.framework,
            (getattr(row, x), getattr(row, y)),
            textcoords="offset points",
            xytext=(5, 4),
            fontsize=8,
            alpha=1.0 if front else 0.5,
        )
    front = points[points["on_front"]].sort_values(x)
    axes.step(front[x], front[y], where="post", color="black", linewidth=1, alpha=0.6, zorder=2)


def _log_x(axes: Axes, values: pd.Series) -> None:
    """Log scale with plain tick labels (no slow mathtext): 1-2-5 steps on short ranges, decades on long."""
    axes.set_xscale("log")
    positive = values[values > 0]
    wide = len(positive) and positive.max() / positive.min() > 300
    axes.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0,) if wide else (1.0, 2.0, 5.0)))
    axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axes.xaxis.set_minor_locator(NullLocator())


def _front_legend(axes: Axes) -> None:
    axes.scatter([], [], color="gray", edgecolor="black", label="on the Pareto front")
    axes.scatter([], [], color="gray", alpha=FADED, label="dominated")
    axes.legend(loc="best", fontsize=7)


def _colors(frameworks: list[str]) -> dict[str, str]:
    colormap = plt.get_cmap("tab10")
    palette = [to_hex(colormap(index)) for index in range(colormap.N)]
    return {name: palette[i % len(palette)] for i, name in enumerate(sorted(frameworks))}


COST_LABELS = {"fit_s": "fit time (s, log scale)", "latency_p99_ms": "p99 single-row latency (ms, log scale)"}


def pareto_overall(points: pd.DataFrame, cost: str, path: Path) -> Path:
    figure, axes = plt.subplots(figsize=(7, 5))
    colors = _colors(list(points["framework"]))
    _front_scatter(axes, points, "cost", "score", colors)
    _log_x(axes, points["cost"])
    axes.set_xlabel(f"geometric mean over datasets of {COST_LABELS.get(cost, cost)}")
    axes.set_ylabel("mean normalized score (0 = baseline, 1 = best)")
    axes.set_title(
        f"Quality vs {cost}: Pareto front across datasets\n(front joined; dominated frameworks faded)",
        fontsize=10,
    )
    # Close points hide each other's labels; the colour legend names every framework anyway.
    for name in sorted(colors):
        axes.scatter([], [], color=colors[name], label=name)
    _front_legend(axes)
    axes.grid(alpha=0.3)
    return _save(figure, path)


def pareto_per_dataset(points: pd.DataFrame, metrics: dict[str, str], cost: str, path: Path) -> Path:
    datasets = sorted(points["dataset"].unique())
    columns = min(4, len(datasets))
    rows = math.ceil(len(datasets) / columns)
    height = 3.3 * rows + 1.4  # inches: panels plus a title line and a legend line above them
    figure, grid = plt.subplots(rows, columns, figsize=(max(4.2 * columns, 8.0), height), squeeze=False)
    colors = _colors(list(points["framework"].unique()))
    for axes, dataset in zip(grid.flat, datasets, strict=False):
        block = points[points["dataset"] == dataset]
        # Many small panels: names would pile up; the colour legend above names every framework.
        _front_scatter(axes, block, "cost", "result", colors, labels=len(datasets) <= 12)
        _log_x(axes, block["cost"])
        axes.set_title(dataset, fontsize=10)
        axes.set_xlabel(COST_LABELS.get(cost, cost), fontsize=8)
        axes.set_ylabel(f"result ({metrics.get(dataset, '')}, higher is better)", fontsize=8)
        axes.tick_params(labelsize=7)
        axes.grid(alpha=0.3)
    for axes in list(grid.flat)[len(datasets) :]:
        axes.axis("off")
    handles = [
        Line2D(
            [], [], marker="o", linestyle="", color="gray", markeredgecolor="black", label="on the front"
        ),
        Line2D([], [], marker="o", linestyle="", color="gray", alpha=FADED, label="dominated"),
    ]
    handles += [
        Line2D([], [], marker="o", linestyle="", color=colors[name], label=name)
        for name in sorted(colors)
    ]
    figure.suptitle(
        f"Per dataset: result vs {cost} (Pareto front joined, dominated frameworks faded)",
        fontsize=11,
        y=1.0 - 0.12 / height,
    )
    figure.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, 1.0 - 0.42 / height),
        fontsize=8,
        ncol=min(len(handles), 7),
        frameon=False,
    )
    figure.subplots_adjust(
        left=0.07, right=0.98, bottom=0.55 / height, top=1.0 - 1.25 / height, wspace=0.3, hspace=0.55
    )
    return _save(figure, path, tight=False, dpi=90 if len(datasets) > 12 else DPI)


def stability(table: pd.DataFrame, threshold: float, path: Path) -> Path:
    """Spread per framework, one dot per dataset; dots over the threshold are red and named."""
    frameworks = sorted(table["framework"].unique())
    figure, axes = plt.subplots(figsize=(max(7.0, 0.8 * len(frameworks) + 3), 4.8))
    rng = np.random.default_rng(0)  # fixed jitter: the same runs draw the same figure
    for index, framework in enumerate(frameworks):
        rows = table[(table["framework"] == framework) & table["spread"].notna()]
        x = index + rng.uniform(-0.15, 0.15, len(rows))
        y = rows["spread"].to_numpy() * 100
        over = rows["flagged"].to_numpy()
        axes.scatter(x[~over], y[~over], color="tab:blue", s=25, alpha=0.7)
        axes.scatter(x[over], y[over], color="tab:red", s=35)
        for xi, yi, dataset in zip(x[over], y[over], rows["dataset"].to_numpy()[over], strict=True):
            axes.annotate(dataset, (xi, yi), textcoords="offset points", xytext=(4, 3), fontsize=7)
    axes.axhline(threshold * 100, color="tab:red", linestyle="--", linewidth=1)
    axes.scatter([], [], color="tab:blue", s=25, label="one dataset")
    axes.scatter([], [], color="tab:red", s=35, label="over the threshold (named)")
    axes.plot([], [], color="tab:red", linestyle="--", label=f"flag threshold ({threshold:.0%})")
    axes.set_xticks(range(len(frameworks)), frameworks, rotation=30, ha="right")
    axes.set_xlim(-0.6, len(frameworks) - 0.4)
    axes.set_ylim(bottom=0)
    axes.set_ylabel("std of result over folds x seeds\n(% of the baseline-to-best span)")
    axes.set_xlabel("framework")
    axes.set_title("Stability over folds and seeds (lower is steadier)")
    axes.legend(fontsize=8, loc="upper left")
    axes.grid(axis="y", alpha=0.3)
    return _save(figure, path)


def aligned_series(alignment: Any, path: Path, *, title: str, base_label: str, cand_label: str) -> Path:
    """Two runs' series after DTW alignment (tasks.report.series.Alignment), the baseline's stages
    shaded: where the two lines part is where the jobs differ."""
    base_index = [i for i, _ in alignment.path]
    cand_index = [j for _, j in alignment.path]
    figure, axes = plt.subplots(figsize=(6.4, 2.8))
    axes.plot(alignment.base[base_index], color="tab:blue", linewidth=1.2, label=base_label)
    axes.plot(alignment.cand[cand_index], color="tab:red", linewidth=1.2, label=cand_label)
    stages = [alignment.base_stages[i] for i in base_index]
    start, segment = 0, 0
    for position in range(1, len(stages) + 1):
        if position == len(stages) or stages[position] != stages[start]:
            if segment % 2 == 0:
                axes.axvspan(start - 0.5, position - 0.5, color="0.93", linewidth=0)
            axes.text((start + position - 1) / 2, 1.01, stages[start], transform=axes.get_xaxis_transform(),
                      ha="left", va="bottom", fontsize=6, rotation=30)
            start, segment = position, segment + 1
    axes.set_xlabel("aligned samples (DTW path)", fontsize=8)
    axes.set_ylabel(alignment.label + (" MB" if alignment.column.endswith("_mb") else ""), fontsize=8)
    axes.tick_params(labelsize=7)
    axes.set_title(title, fontsize=9, pad=28)
    axes.legend(fontsize=7, loc="best")
    return _save(figure, path)
