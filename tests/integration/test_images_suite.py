"""`automl-eval run images` end to end at a small budget, with its post-job evaluations.

The real images suite (specs/suites/images.yaml), cut to digits and its pixel table, the CNN with a
few steps and hgb, one fold, short evaluation blocks: the image corruption families run on both
(the same corrupted images: the same seeds, the same cells), the CNN exports to ONNX within the
parity tolerance, and it is served by MLflow's scoring server under Locust and LoadGen with the
image as base64 text in the body, its signature saying `binary`. The report has its Images and
Robustness sections, the CNN and hgb on the pixels side by side. One run, so Prefect and MLflow
start once.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml
from run_support.project import add_suites, client, executions, job_runs, run_cli

from tasks.evaluations.robustness.images import IMAGE_CORRUPTIONS

pytestmark = [pytest.mark.integration, pytest.mark.heavy]  # over a minute each: make test-heavy (CI)

REPO_ROOT = Path(__file__).resolve().parents[2]
IMAGES = [corruption.name for corruption in IMAGE_CORRUPTIONS]


def copy_image_cards(home: Path, catalog: Path, *names: str) -> None:
    for name in names:
        shutil.copy(REPO_ROOT / "specs" / "datasets" / f"{name}.yaml", home / "specs" / "datasets")
        for file in (f"{name}.parquet", f"{name}.folds.csv"):
            shutil.copy(catalog / file, home / "datasets")


def small_images_suite() -> dict:
    """The images suite as it is, cut to one small dataset, a few CNN steps and short evaluations."""
    suite = yaml.safe_load((REPO_ROOT / "specs" / "suites" / "images.yaml").read_text())
    assert set(suite["robustness"]["corruptions"]) == set(IMAGES)  # the suite runs every image family
    assert suite["export"]["enabled"] and suite["serving"]["enabled"]
    suite["datasets"] = ["digits", "digits_pixels"]
    tiny_cnn = {"name": "cnn", "params": {"batch_size": 64, "epochs": 1, "_max_steps": 20}}
    suite["frameworks"] = [tiny_cnn, "hgb"]
    # Two severities, one draw, no bisection and no attacks: every family's curve and breaking point.
    suite["robustness"].update(time_s=90, severities=[0.5, 1.0], draws=1, max_bisections=0,
                               adversarial_rows=0, pixel_rows=0, coverage_rows=16)
    suite["export"].update(time_s=90, latency_calls=5, batch_rows=50)
    suite["serving"].update(time_s=180, concurrency=[1], duration_s=1, search_steps=1, min_duration_s=1,
                            max_duration_s=2, min_query_count=10, startup_timeout_s=150)
    return suite


def test_images_suite_runs_corruptions_export_and_serving(data_home, built_catalog: Path) -> None:  # noqa: ANN001
    home = data_home()
    copy_image_cards(home, built_catalog, "digits", "digits_pixels")
    add_suites(home, {"images": small_images_suite()},
               budgets={"tiny_images": {"time_s": 20, "cores": 1, "memory_mb": 4096}})

    # One core per job: the CNN's and hgb's jobs (and their evaluations) run side by side.
    finished = run_cli(home, "run", "images", "--budget", "tiny_images", "--frameworks", "cnn,hgb",
                       timeout=1200)
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    [execution] = executions(home, "images")
    found = job_runs(home, execution.info.run_id)
    runs = {(run.data.tags["dataset"], run.data.tags["framework"]): run for run in found}
    cnn, hgb = runs[("digits", "cnn")], runs[("digits_pixels", "hgb")]
    assert runs[("digits", "hgb")].data.tags["status"] == "skipped"  # hgb reads tables, not images
    for run in (cnn, hgb):
        assert run.data.tags["status"] == "ok", run.data.tags.get("error")
        assert run.data.tags["evaluation.robustness"] in ("ok", "partial"), run.data.tags
        # Every image family has its curve and breaking point, on the images and on their pixels.
        for name in IMAGES:
            assert 0 < run.data.metrics[f"robust_{name}_breaking"] <= 1, (run.data.tags["framework"], name)
        assert 0 <= run.data.metrics["robust_image_auc"] <= 1

    # The same corrupted images for both: each curve point's seed and changed cells match (a pixel
    # table's cells are the image's pixels, so a changed image counts once on the CNN's side).
    def cases(run: object) -> pd.DataFrame:
        folder = Path(client(home).download_artifacts(run.info.run_id, "evaluations/robustness"))
        table = pd.read_csv(folder / "cases.csv")
        return table[table["corruption"].isin(IMAGES) & (table["phase"] == "preset")].set_index(
            ["corruption", "severity"]).sort_index()

    on_images, on_pixels = cases(cnn), cases(hgb)
    assert len(on_images) == len(IMAGES) * 2
    assert on_images["corruption_seed"].equals(on_pixels.loc[on_images.index, "corruption_seed"])
    occluded = on_images.loc[("image_occlusion", 1.0)]
    assert occluded["cells_changed"] > 0 and on_pixels.loc[("image_occlusion", 1.0), "cells_changed"] > 0

    # ONNX: the CNN through torch.onnx.export, within the parity tolerance, timed against torch.
    assert cnn.data.tags["export_onnx"] == "ok", cnn.data.tags.get("export_onnx.reason")
    assert cnn.data.metrics["onnx_parity_max_abs"] <= 1e-4
    assert cnn.data.metrics["onnx_latency_p50_ms"] > 0 and cnn.data.metrics["native_latency_p50_ms"] > 0
    assert "export_onnx" in hgb.data.tags  # hgb's outcome is recorded too, whatever skl2onnx says

    # Serving: the image in the body as base64 text; the served model's signature says binary.
    assert cnn.data.tags["evaluation.serving"] == "ok", cnn.data.tags.get("evaluation.serving.reason")
    folder = Path(client(home).download_artifacts(cnn.info.run_id, "evaluations/serving"))
    served = json.loads((folder / "result.json").read_text())
    assert served["info"]["signature"] == [{"type": "binary", "name": "image", "required": True}]
    first = json.loads(served["info"]["first_answer"])["predictions"][0]
    assert first["prediction"] in {str(digit) for digit in range(10)}
    assert cnn.data.metrics["serve_c1_rps"] > 0 and cnn.data.metrics["serve_error_rate"] == 0
    assert "serve_max_qps_at_slo" in cnn.data.metrics

    # The report: the Images section, and the Robustness section with the CNN and hgb on the pixels
    # side by side under digits.
    [report_folder] = (home / "reports").glob(f"*-{execution.info.run_id[:8]}")
    report = (report_folder / "report.md").read_text()
    assert "## Images" in report and "hgb (pixels)" in report
    robustness = report[report.index("## Robustness"):]
    assert "image_occlusion" in robustness and "hgb (pixels)" in robustness
    breaking = pd.read_csv(report_folder / "robust_breaking_points.csv")
    rows = breaking[(breaking["dataset"] == "digits") & breaking["corruption"].isin(IMAGES)]
    assert set(rows["corruption"]) == set(IMAGES)
    assert rows[["cnn", "hgb (pixels)"]].notna().all().all()
