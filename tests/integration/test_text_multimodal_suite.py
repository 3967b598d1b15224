"""One mini suite with a text dataset and a multimodal one, end to end through `automl-eval run`.

Text: the jobs reach MLflow with the same figures as tabular ones, a tabular-only framework is
recorded as skipped (never dropped), and the logged pyfunc model predicts from raw strings.
Multimodal: the flow aligns the streams before the jobs (gate passed, offset within 10 ms), and
every modality combination is a job of its own, which the modality table summarises.
One run for both, so Prefect and MLflow start once.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml
from run_support.project import add_suites, client, executions, job_runs, run_cli

pytestmark = [pytest.mark.integration, pytest.mark.heavy]  # over a minute each: make test-heavy (CI)

REPO_ROOT = Path(__file__).resolve().parents[2]
TEXT_ROWS = 240  # a slice of the reviews: fine-tuning, predicting and the latency calls stay short
COMBINATIONS = {"basic_motions[acc]", "basic_motions[gyro]", "basic_motions[acc+gyro]"}


def shrink(home: Path, name: str, rows: int) -> None:
    """Keep the first rows of a copied dataset, with its card's row count and its folds to match."""
    from tasks.data import folds
    from tasks.data.load import load_frame
    from tasks.specs import load_dataset_spec

    card = home / "specs" / "datasets" / f"{name}.yaml"
    fields = yaml.safe_load(card.read_text())
    fields["rows"] = rows
    card.write_text(yaml.safe_dump(fields, sort_keys=False))
    data = home / "datasets" / f"{name}.csv"
    pd.read_csv(data).head(rows).to_csv(data, index=False)
    spec = load_dataset_spec(name)
    assignment = folds.assign_folds(load_frame(spec), spec, folds.fold_settings(spec))
    folds.folds_path(spec).write_bytes(folds.folds_csv_bytes(assignment))


def finished_report(home: Path, execution_id: str) -> str:
    [folder] = (home / "reports").glob(f"*-{execution_id[:8]}")
    return (folder / "report.md").read_text()


def copy_streams(home: Path, catalog: Path, name: str) -> None:
    """A multimodal card with its stream files and label track (the flow aligns them again)."""
    shutil.copy(REPO_ROOT / "specs" / "datasets" / f"{name}.yaml", home / "specs" / "datasets")
    shutil.copytree(catalog / name, home / "datasets" / name)


def test_text_and_multimodal_suite_end_to_end(data_home, built_catalog: Path) -> None:  # noqa: ANN001
    home = data_home("food_reviews")
    shrink(home, "food_reviews", TEXT_ROWS)
    copy_streams(home, built_catalog, "basic_motions")
    tiny_finetune = {"name": "hf_finetune", "params": {"max_length": 32, "batch_size": 8, "_max_steps": 3}}
    suite = {
        "datasets": ["food_reviews", "basic_motions"],
        "modality_combinations": "all",
        "frameworks": ["tfidf_logreg", tiny_finetune, "rf"],
        "folds": 1,
        "budget": "mini",
    }
    add_suites(home, {"mixed": suite}, budgets={"mini": {"time_s": 30, "cores": 1, "memory_mb": 4096}})

    finished = run_cli(home, "run", "mixed")
    assert finished.returncode == 0, finished.stdout + finished.stderr
    [execution] = executions(home, "mixed")
    runs = {
        (r.data.tags["dataset"], r.data.tags["framework"]): r for r in job_runs(home, execution.info.run_id)
    }
    assert {dataset for dataset, _ in runs} == {"food_reviews", *COMBINATIONS}

    # ---- text
    for name in ("tfidf_logreg", "hf_finetune"):
        run = runs[("food_reviews", name)]
        assert run.data.tags["status"] == "ok", run.data.tags.get("error")
        for metric in ("result", "auc", "fit_s", "latency_p50_ms", "throughput_rows_s", "peak_rss_mb"):
            assert metric in run.data.metrics, (name, metric)
    skipped = runs[("food_reviews", "rf")].data.tags
    assert skipped["status"] == "skipped" and "text" in skipped["error"]

    import mlflow.pyfunc

    mlflow.set_tracking_uri(f"sqlite:///{home / 'mlflow' / 'mlflow.db'}")
    model = mlflow.pyfunc.load_model(f"runs:/{runs[('food_reviews', 'hf_finetune')].info.run_id}/model")
    predicted = model.predict(
        pd.DataFrame({"review": ["Delicious, my favourite snack.", "Stale and tasteless."]})
    )
    assert list(predicted.columns) == ["prediction", "proba_great", "proba_other"]
    assert set(predicted["prediction"]) <= {"great", "other"}
    assert ((predicted["proba_great"] + predicted["proba_other"]) - 1.0).abs().max() < 1e-5

    # ---- multimodal
    report = json.loads((home / "datasets" / "basic_motions.alignment.json").read_text())
    truth = json.loads((home / "datasets" / "basic_motions" / "streams" / "truth.json").read_text())
    gyro = report["streams"]["gyro"]
    assert report["passed"] is True
    assert abs(gyro["offset_ms"] - truth["gyro"]["offset_s"] * 1000) <= report["tolerance_ms"]
    for combination in COMBINATIONS:
        assert runs[(combination, "rf")].data.tags["status"] == "ok", runs[(combination, "rf")].data.tags
        # Text frameworks read no sensor table: skipped with the reason, like rf on text.
        assert runs[(combination, "tfidf_logreg")].data.tags["status"] == "skipped"
        # The alignment figures travel with every job of the dataset, and the report with the execution.
        figures = runs[(combination, "rf")].data.metrics
        assert figures["align_passed"] == 1.0
        assert figures["align_gyro_offset_ms"] == pytest.approx(gyro["offset_ms"])
    assert "align_passed" not in runs[("food_reviews", "rf")].data.metrics
    parent = execution.info.run_id
    assert execution.data.tags["trigger"] == "cli"
    artifacts = client(home).list_artifacts(parent, "datasets")
    assert [item.path for item in artifacts] == ["datasets/basic_motions.alignment.json"]
    # The flow closes with the report: its modality table in the folder and on the parent run.
    assert "report/modality.csv" in {item.path for item in client(home).list_artifacts(parent, "report")}
    assert "## Modality combinations" in finished_report(home, parent)

    from tasks.report.modality_table import modality_table

    jobs = pd.DataFrame(
        [
            {
                "dataset": dataset,
                "framework": framework,
                "ok": run.data.tags["status"] == "ok",
                **run.data.metrics,
            }
            for (dataset, framework), run in runs.items()
        ]
    )
    table = modality_table(jobs)
    assert set(table["combination"]) == {"acc", "gyro", "acc+gyro"} and set(table["framework"]) == {"rf"}
    assert table["on_front"].any()
    assert (table["result"] > 0.5).all()  # 4 balanced activities: guessing scores 0.25
