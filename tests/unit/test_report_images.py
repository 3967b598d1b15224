"""The report's Images section: the accuracy/throughput table of image datasets only, whether deep
learning pays, and the loader sweep naming the best-fed setting (images/s on a CPU-only host)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tasks.report import images
from tasks.report.markdown import markdown_table as _table
from tasks.report.plots import DPI, plt


def _jobs() -> pd.DataFrame:
    rows = [
        # dataset, framework, acc, images/s, data wait
        ("digits", "constant", 0.10, np.nan, np.nan),
        ("digits", "cnn:w0", 0.80, 100.0, 0.30),
        ("digits", "cnn:w2", 0.82, 160.0, 0.05),
        ("digits", "cnn:w2_pin", 0.81, 150.0, 0.06),
        ("penguins", "hgb", 0.97, np.nan, np.nan),  # a tabular card: not in the Images section
    ]
    columns = ["dataset", "framework", "acc", "train_images_per_s", "data_wait_share"]
    frame = pd.DataFrame(rows, columns=columns)
    return frame.assign(ok=True, top5_acc=0.9, epochs=2.0, time_per_epoch_s=10.0)


def test_the_images_section_tables_image_datasets_and_names_the_best_loader(tmp_path: Path) -> None:
    lines, figures = images.section(_jobs(), tmp_path, _table)
    text = "\n".join(lines)
    assert text.startswith("## Images") and "penguins" not in text
    assert "- digits: deep learning pays: cnn:w2 0.8200 against constant 0.1000 accuracy (+0.7200)." in text
    assert "- digits: 2 workers, pinned memory off (160.0 images/s, data wait 5.0%)" in text
    assert "a CPU-only host: images/s and data-wait share only" in text
    assert [path.name for path in figures] == ["loader_sweep.png"] and figures[0].stat().st_size > 0
    table = pd.read_csv(tmp_path / "images.csv")
    assert list(table["framework"]) == ["cnn:w2", "cnn:w2_pin", "cnn:w0", "constant"]  # best accuracy first


def test_no_image_dataset_means_no_section(tmp_path: Path) -> None:
    jobs = _jobs()
    assert images.section(jobs[jobs["dataset"] == "penguins"], tmp_path, _table) == ([], [])


def test_a_tabular_learner_on_a_pixel_table_is_listed_under_its_image_dataset(tmp_path: Path) -> None:
    jobs = pd.concat([_jobs(), pd.DataFrame([{"dataset": "digits_pixels", "framework": "hgb", "acc": 0.95,
                                              "ok": True}])], ignore_index=True)
    lines, _ = images.section(jobs, tmp_path, _table)
    verdict = "- digits: deep learning does not pay: cnn:w2 0.8200 against hgb (pixels) 0.9500 accuracy"
    assert verdict in "\n".join(lines)


def test_the_section_says_whether_pretraining_pays_and_shows_a_refused_framework(tmp_path: Path) -> None:
    reason = ("refused here: framework environment 'autogluon_mm@1.6.3' is not installed; install it with "
              "`automl-eval frameworks install autogluon_mm@1.6.3`.")
    jobs = pd.concat([
        _jobs().assign(pretrained_parameters=np.where(_jobs()["framework"].str.startswith("cnn"), 0, np.nan)),
        pd.DataFrame([
            {"dataset": "digits", "framework": "mobilenet_finetune", "acc": 0.90, "ok": True, "epochs": 1.5,
             "train_images_per_s": 40.0, "pretrained_parameters": 2.2e6},
            {"dataset": "digits", "framework": "autogluon_mm@1.6.3", "ok": False, "status": "skipped",
             "error": reason},
            {"dataset": "digits_pixels", "framework": "autogluon_mm@1.6.3", "ok": False, "status": "skipped",
             "error": "autogluon_mm does not handle tabular multiclass problems."},
        ])], ignore_index=True)
    text = "\n".join(images.section(jobs, tmp_path, _table)[0])
    assert ("- digits: pretraining pays: mobilenet_finetune 0.9000 against cnn:w2 0.8200 accuracy (+0.0800), "
            "1.50 against 2.00 epochs.") in text
    assert f"- autogluon_mm@1.6.3: 1 jobs not run: {reason}" in text
    assert "does not handle tabular" not in text
    # Without a pretrained network there is no verdict to give, and it says so.
    only_scratch = jobs[jobs["framework"] != "mobilenet_finetune"]
    text = "\n".join(images.section(only_scratch, tmp_path, _table)[0])
    assert "- digits: no pretrained network finished here, so no comparison." in text


def test_the_loader_sweep_figure_adds_gpu_utilisation_only_where_the_jobs_had_a_gpu(tmp_path: Path) -> None:
    table = images.image_table(_jobs())
    cpu_sweep = images.loader_sweep(table)
    assert list(zip(cpu_sweep["num_workers"], cpu_sweep["pin_memory"], strict=True)) == [
        (0, False), (2, False), (2, True)]
    # CPU-only: images/s and the data-wait share, two rows of panels; with a GPU a third, its utilisation.
    cpu_png = images.sweep_figure(cpu_sweep, tmp_path / "cpu.png")
    gpu_sweep = cpu_sweep.assign(gpu_util_mean_pct=[60.0, 88.0, 91.0])
    gpu_png = images.sweep_figure(gpu_sweep, tmp_path / "gpu.png")
    assert plt.imread(cpu_png).shape[0] == round(2 * 3.2 * DPI)
    assert plt.imread(gpu_png).shape[0] == round(3 * 3.2 * DPI)
    # With GPU utilisation measured, the best-fed setting is named by it, not by images/s.
    jobs = _jobs().assign(gpu_util_mean_pct=[np.nan, 60.0, 70.0, 91.0, np.nan])
    text = "\n".join(images.section(jobs, tmp_path, _table)[0])
    assert "The setting that feeds the device best, by GPU utilisation:" in text
    assert "- digits: 2 workers, pinned memory on (150.0 images/s, data wait 6.0%)" in text
