"""The explanation figures: an agreement heatmap per dataset and a SHAP summary of its best framework."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, as tasks/report/plots.py

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def agreement_heatmap(matrix: pd.DataFrame, dataset: str, path: Path) -> Path:
    size = max(3.5, 0.9 * len(matrix) + 1.5)
    figure, axes = plt.subplots(figsize=(size, size * 0.85))
    image = axes.imshow(matrix.to_numpy(dtype=float), vmin=-1, vmax=1, cmap="RdBu")
    axes.set_xticks(range(len(matrix)), matrix.columns, rotation=45, ha="right")
    axes.set_yticks(range(len(matrix)), matrix.index)
    for i, j in np.ndindex(matrix.shape):
        value = matrix.iat[i, j]
        axes.text(j, i, "" if pd.isna(value) else f"{value:.2f}", ha="center", va="center", fontsize=8)
    axes.set_title(f"{dataset}: importance rank correlation")
    figure.colorbar(image, ax=axes, shrink=0.8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def shap_summaries(runs: pd.DataFrame, shap_files: dict[str, Path], folder: Path) -> list[Path]:
    """Per dataset, shap's summary (beeswarm) plot of the best framework's first job with SHAP values
    (`shap_files`: run id -> its saved SHAP values)."""
    import shap  # optional and heavy: only a report of explained runs draws it

    figures: list[Path] = []
    ok = runs[(runs.get("status") == "ok") & runs["run_id"].isin(list(shap_files))].copy()
    if ok.empty or "result" not in ok:
        return figures
    ok["result"] = pd.to_numeric(ok["result"], errors="coerce")
    for dataset, group in ok.groupby("dataset"):
        best = group.groupby("framework")["result"].mean().idxmax()
        run_id = str(group[group["framework"] == best].sort_values(["fold", "seed"])["run_id"].iloc[0])
        with np.load(shap_files[run_id], allow_pickle=False) as saved:
            values, data, features = saved["values"], saved["data"], [str(f) for f in saved["features"]]
            explainer = str(saved["explainer"])
        if not len(values):
            continue
        shap.summary_plot(values, data, feature_names=features, show=False, max_display=15)
        figure = plt.gcf()
        figure.suptitle(f"{dataset}: SHAP of {best} ({explainer} explainer, {len(values)} rows)", fontsize=10)
        path = folder / f"shap_summary_{dataset}.png"
        figure.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(figure)
        figures.append(path)
    return figures
