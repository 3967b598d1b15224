"""The report's Images part: accuracy and throughput per image dataset and framework, whether deep
learning pays on each dataset, and the loader sweep.

- the table: per image dataset (a card of `modality: image`; a tabular learner on its pixel table,
  `pixels_of`, is listed under it as `NAME (pixels)`) and framework, the means over folds
  and seeds of top-1 accuracy, top-5 accuracy, training images/s, epochs, seconds per epoch and
  the share of training spent waiting for data (the CNN records the last four; a learner without
  a training loop of its own leaves them empty);
- pays: per dataset, the best framework that records training images/s (a deep learner) against
  the best that does not, by accuracy;
- pretraining: per dataset, the best deep learner that started from pretrained weights (it records
  `pretrained_parameters` > 0: the MobileNetV2 fine-tune) against the best trained from scratch (0:
  the CNN), at the suite's one budget, by accuracy;
- refused: a framework none of whose jobs on the image datasets finished (AutoGluon MultiModal where
  its environment does not import), with the sentence its jobs were recorded with;
- the loader sweep: the CNN's loader variants (`cnn:w0`, `cnn:w2_pin`, ...) side by side, images/s
  and data-wait share, with GPU utilisation where the jobs had a GPU; the best-fed setting named.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib.pyplot as plt  # the Agg backend: tasks/report/plots.py sets it
import numpy as np
import pandas as pd

from tasks.errors import UserError
from tasks.images.card import pixels_of
from tasks.report.plots import _save
from tasks.specs import load_dataset_spec

ACCURACY, TOP5 = "acc", "top5_acc"
FIGURES = ("train_images_per_s", "epochs", "time_per_epoch_s", "data_wait_share")
GPU_UTIL = "gpu_util_mean_pct"
PRETRAINED = "pretrained_parameters"  # > 0: started from pretrained weights; 0: from scratch
COLUMNS = ["dataset", "framework", ACCURACY, TOP5, *FIGURES, GPU_UTIL, PRETRAINED, "jobs"]


def image_datasets(jobs: pd.DataFrame) -> dict[str, str]:
    """Dataset -> the image dataset it stands for: an image card (`modality: image`) itself, a pixel
    table (`pixels_of: NAME`) its image card; other datasets and unreadable cards are left out."""
    found = {}
    for dataset in sorted(set(jobs["dataset"])):
        try:
            spec = load_dataset_spec(dataset)
        except UserError:
            continue
        if spec.modality == "image":
            found[dataset] = dataset
        elif pixels_of(spec) is not None:
            found[dataset] = str(pixels_of(spec))
    return found


def image_table(jobs: pd.DataFrame) -> pd.DataFrame:
    """COLUMNS: one row per (image dataset, framework), means over its ok jobs."""
    shown = image_datasets(jobs)
    ok = jobs[jobs["ok"] & jobs["dataset"].isin(shown)]
    if ok.empty:
        return pd.DataFrame(columns=COLUMNS)
    # A tabular learner on a pixel table is listed under the image dataset, its input said.
    pixels = ok["dataset"].map(shown) != ok["dataset"]
    numbers = pd.DataFrame({"dataset": ok["dataset"].map(shown),
                            "framework": ok["framework"].where(~pixels, ok["framework"] + " (pixels)")})
    for column in [ACCURACY, TOP5, *FIGURES, GPU_UTIL, PRETRAINED]:
        numbers[column] = pd.to_numeric(ok[column], errors="coerce") if column in ok else np.nan
    table = numbers.groupby(["dataset", "framework"], as_index=False).mean()
    table["jobs"] = numbers.groupby(["dataset", "framework"]).size().to_numpy()
    return table.reindex(columns=COLUMNS).sort_values(["dataset", ACCURACY], ascending=[True, False])


def deep_learning_pays(table: pd.DataFrame) -> list[str]:
    """One line per dataset: the best deep learner (it records training images/s) against the best
    other framework, by accuracy."""
    lines = []
    for dataset, block in table.groupby("dataset"):
        deep = block[block["train_images_per_s"].notna()].sort_values(ACCURACY, ascending=False)
        other = block[block["train_images_per_s"].isna()].sort_values(ACCURACY, ascending=False)
        if deep.empty or other.empty:
            missing = "deep learner" if deep.empty else "other framework"
            lines.append(f"- {dataset}: no {missing} finished here, so no comparison.")
            continue
        best_deep, best_other = deep.iloc[0], other.iloc[0]
        gap = best_deep[ACCURACY] - best_other[ACCURACY]
        verdict = "pays" if gap > 0 else "does not pay"
        lines.append(f"- {dataset}: deep learning {verdict}: {best_deep['framework']} "
                     f"{best_deep[ACCURACY]:.4f} against {best_other['framework']} "
                     f"{best_other[ACCURACY]:.4f} accuracy ({gap:+.4f}).")
    return lines


def pretraining_pays(table: pd.DataFrame) -> list[str]:
    """One line per dataset: the best pretrained deep learner against the best one trained from
    scratch (both from the same suite, so at the same budget), by accuracy."""
    lines = []
    deep = table[table["train_images_per_s"].notna() & table[PRETRAINED].notna()]
    for dataset, block in deep.groupby("dataset"):
        pretrained = block[block[PRETRAINED] > 0].sort_values(ACCURACY, ascending=False)
        scratch = block[block[PRETRAINED] == 0].sort_values(ACCURACY, ascending=False)
        if pretrained.empty or scratch.empty:
            missing = "pretrained network" if pretrained.empty else "network trained from scratch"
            lines.append(f"- {dataset}: no {missing} finished here, so no comparison.")
            continue
        best_pretrained, best_scratch = pretrained.iloc[0], scratch.iloc[0]
        gap = best_pretrained[ACCURACY] - best_scratch[ACCURACY]
        verdict = "pays" if gap > 0 else "does not pay"
        lines.append(f"- {dataset}: pretraining {verdict}: {best_pretrained['framework']} "
                     f"{best_pretrained[ACCURACY]:.4f} against {best_scratch['framework']} "
                     f"{best_scratch[ACCURACY]:.4f} accuracy ({gap:+.4f}), "
                     f"{best_pretrained['epochs']:.2f} against {best_scratch['epochs']:.2f} epochs.")
    return lines


def refused(jobs: pd.DataFrame) -> list[str]:
    """One line per framework that ran on the image datasets without one job finishing: the
    sentences its jobs were recorded with (skipped or failed), each once."""
    shown = image_datasets(jobs)
    block = jobs[jobs["dataset"].isin(shown)]
    if block.empty or "error" not in block:
        return []
    lines = []
    for framework, runs in block.groupby("framework"):
        if runs["ok"].any():
            continue
        reasons = runs["error"].fillna("").astype(str).str.strip()
        # Not taking a dataset's modality is not a refusal (cnn on a pixel table): those are left out.
        on_images = runs[runs["dataset"].map(shown) == runs["dataset"]]
        said = list(dict.fromkeys(r for r in reasons[on_images.index] if r))
        if said:
            lines.append(f"- {framework}: {len(on_images)} jobs not run: {'; '.join(said)}")
    return lines


def loader_sweep(table: pd.DataFrame) -> pd.DataFrame:
    """The CNN's loader variants (framework `cnn:wN[_pin]`), one row each per dataset."""
    sweep = table[table["framework"].str.fullmatch(r"cnn:w\d+(_pin)?(@.*)?")].copy()
    if sweep.empty:
        return sweep
    settings = sweep["framework"].str.extract(r"cnn:w(?P<workers>\d+)(?P<pin>_pin)?")
    sweep["num_workers"] = settings["workers"].astype(int)
    sweep["pin_memory"] = settings["pin"].notna()
    return sweep.sort_values(["dataset", "num_workers", "pin_memory"]).reset_index(drop=True)


def sweep_figure(sweep: pd.DataFrame, path: Path) -> Path:
    """Per dataset, against the loader setting: images/s, the share of training spent waiting for
    data and, where the jobs had a GPU, its mean utilisation; a CPU-only sweep's title says so."""
    datasets = sorted(sweep["dataset"].unique())
    with_gpu = sweep[GPU_UTIL].notna().any()
    panels = [("train_images_per_s", "training images/s", "#4C72B0", None),
              ("data_wait_share", "data-wait share of training", "#55A868", (0, 1))]
    if with_gpu:
        panels.append((GPU_UTIL, "GPU utilisation, mean %", "#DD8452", (0, 100)))
    figure, axes = plt.subplots(len(panels), len(datasets), figsize=(5 * len(datasets), 3.2 * len(panels)),
                                squeeze=False)
    for column, dataset in enumerate(datasets):
        block = sweep[sweep["dataset"] == dataset]
        settings = zip(block["num_workers"], block["pin_memory"], strict=True)
        labels = [f"{workers}{' pin' if pinned else ''}" for workers, pinned in settings]
        for row, (measure, label, colour, limits) in enumerate(panels):
            axis = axes[row][column]
            axis.bar(labels, pd.to_numeric(block[measure], errors="coerce").fillna(0.0), color=colour)
            axis.set_ylabel(label)
            if limits:
                axis.set_ylim(*limits)
        host = "" if with_gpu else " (CPU-only host: no GPU utilisation)"
        axes[0][column].set_title(f"{dataset}: loader sweep{host}")
        axes[-1][column].set_xlabel("loader workers (pinned memory)")
    return _save(figure, path)


def section(
    jobs: pd.DataFrame, folder: Path, render: Callable[[pd.DataFrame, int], str]
) -> tuple[list[str], list[Path]]:
    """The Images section's markdown lines and figures; nothing when no image dataset finished."""
    table = image_table(jobs)
    if table.empty:
        return [], []
    pretraining = pretraining_pays(table)
    refusals = refused(jobs)
    table.to_csv(folder / "images.csv", index=False)
    lines = ["## Images", "",
             "Per image dataset and framework (means over folds and seeds): top-1 and top-5 accuracy, "
             "training images/s, epochs completed, seconds per epoch, the share of training spent waiting "
             "for data, and mean GPU utilisation where the job had a GPU.", "",
             render(table, 4), "", "Does deep learning pay (best deep learner against the best other "
             "framework, by accuracy)?", "", *deep_learning_pays(table), ""]
    if pretraining:
        lines += ["Does pretraining pay (the best network fine-tuned from pretrained weights against the "
                  "best trained from scratch, same suite and budget, by accuracy)?", "", *pretraining, ""]
    if refusals:
        lines += ["Refused here (no job of the framework ran on these images):", "", *refusals, ""]
    figures: list[Path] = []
    sweep = loader_sweep(table)
    if not sweep.empty:
        path = sweep_figure(sweep, folder / "loader_sweep.png")
        figures.append(path)
        measured = GPU_UTIL if sweep[GPU_UTIL].notna().any() else "train_images_per_s"
        best = sweep.loc[sweep.groupby("dataset")[measured].idxmax()]
        where = "GPU utilisation" if measured == GPU_UTIL else (
            "images/s (a CPU-only host: images/s and data-wait share only, no GPU utilisation)")
        lines += ["### Loader sweep", "", f"The setting that feeds the device best, by {where}:", "",
                  *(f"- {row.dataset}: {row.num_workers} workers, pinned memory "
                    f"{'on' if row.pin_memory else 'off'} ({row.train_images_per_s:.1f} images/s, data wait "
                    f"{row.data_wait_share:.1%})" for row in best.itertuples()),
                  "", f"![loader sweep]({path.name})", ""]
    return lines, figures
