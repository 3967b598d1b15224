"""The MLflow UI on a suite's record, as a user sees it in a real browser: the experiment opens on
its runs, a job run's page says what ran on what and how well, the Dataset column and filter hold
the dataset and its digest, and the report renders with its figures."""

from __future__ import annotations

import re
from typing import Any

import pytest
from ui_support import UI_DATASET, UI_FRAMEWORKS, UI_SUITE, EmbeddedUi

from tasks.tracking import store

pytestmark = [pytest.mark.integration, pytest.mark.ui]


@pytest.fixture
def links(embedded_ui: EmbeddedUi, monkeypatch: pytest.MonkeyPatch) -> EmbeddedUi:
    """The project's own links (what `make ui` and the Prefect artifacts print), on this server."""
    monkeypatch.setenv(store.UI_URL_ENV, embedded_ui.url)
    return embedded_ui


def test_the_suite_link_opens_the_experiment_on_its_runs(page: Any, links: EmbeddedUi) -> None:
    page.goto(store.experiment_url(links.experiment_id))
    page.get_by_text(f"{UI_SUITE} 20").first.wait_for()  # the parent run, named "SUITE yyyy-mm-dd hh:mm"
    assert "/runs" in page.url
    assert page.get_by_text("Run Name", exact=True).first.is_visible()
    assert page.get_by_text("Detect Issues").count() == 0  # not MLflow's GenAI traces overview


def test_clicking_the_suite_in_the_experiment_list_lands_on_its_runs(page: Any, links: EmbeddedUi) -> None:
    """MLflow 3.17 opens an experiment from the list as the sidebar's GenAI / Model training switch
    says (kept in the browser's storage, GenAI by default: an overview of traces with a "Detect
    issues" pop-up), whatever the experiment's kind tag. One click on Model training, once."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{links.home / 'mlflow' / 'mlflow.db'}")
    tags = client.get_experiment(links.experiment_id).tags
    assert tags[store.EXPERIMENT_KIND_TAG] == store.MODEL_TRAINING_KIND
    page.goto(f"{links.url}/#/experiments")
    page.get_by_text("Model training", exact=True).first.click()  # docs/reports.md's first click
    page.get_by_role("link", name=UI_SUITE, exact=True).first.click()
    page.get_by_text(f"{UI_SUITE} 20").first.wait_for()
    assert f"/experiments/{links.experiment_id}" in page.url
    assert page.get_by_text("Run Name", exact=True).first.is_visible()
    assert page.get_by_text("Detect Issues").count() == 0
    # The browser keeps the choice: the next visit to the list opens the suite on its runs too.
    again = page.context.new_page()
    again.goto(f"{links.url}/#/experiments")
    again.get_by_text("Time created", exact=True).first.wait_for()
    again.get_by_role("link", name=UI_SUITE, exact=True).first.click()
    again.get_by_text(f"{UI_SUITE} 20").first.wait_for()
    assert again.get_by_text("Detect Issues").count() == 0


def test_the_dataset_filter_lists_the_job_runs_framework_first_with_the_digest(
        page: Any, links: EmbeddedUi) -> None:
    """The comparison's first two clicks: Datasets, then the dataset; then the chart view."""
    page.goto(store.experiment_url(links.experiment_id))
    page.get_by_test_id("datasets-select-dropdown").click()
    page.get_by_test_id(f"dataset-dropdown-{UI_DATASET}").click()
    page.keyboard.press("Escape")
    for framework in UI_FRAMEWORKS:
        page.get_by_text(f"{framework} · {UI_DATASET} · f0 s0").first.wait_for()
    table = page.locator("main").inner_text()
    assert table.count(f"{UI_DATASET} ({links.data_version})") == len(UI_FRAMEWORKS)  # Dataset column
    page.locator("label:has(input[name=runs-view-mode][value=CHART])").click()
    page.get_by_placeholder("Search metric charts").fill("result")  # a bar chart per metric
    page.get_by_text("result", exact=True).first.wait_for()


def test_a_job_run_page_shows_framework_dataset_and_result(page: Any, links: EmbeddedUi) -> None:
    from mlflow.tracking import MlflowClient

    run_id = links.job_runs["hgb"]
    page.goto(store.run_url(links.experiment_id, run_id))
    page.get_by_text(f"hgb · {UI_DATASET} · f0 s0").first.wait_for()
    page.get_by_text("Metrics (").first.wait_for()
    text = page.locator("main").inner_text()
    assert re.search(r"framework\s*:\s*hgb", text)
    assert re.search(rf"dataset\s*:\s*{UI_DATASET}", text)
    assert f"{UI_DATASET} ({links.data_version})" in text  # the dataset input, with its digest
    client = MlflowClient(tracking_uri=f"sqlite:///{links.home / 'mlflow' / 'mlflow.db'}")
    result = client.get_run(run_id).data.metrics["result"]
    assert re.search(rf"\bresult\s+{re.escape(str(result))[:8]}", text)


def test_the_report_renders_with_its_figures_in_the_artifact_viewer(page: Any, links: EmbeddedUi) -> None:
    page.goto(store.run_url(links.experiment_id, links.execution_id).replace(
        "?", "/artifacts/report/report.html?"))
    page.get_by_text("report/report.html").first.wait_for()
    frame = page.frame_locator("iframe").first
    frame.get_by_text("Leaderboard per dataset").wait_for()
    viewer = next(f for f in page.frames if f != page.main_frame)
    viewer.wait_for_function("Array.from(document.images).every(i => i.complete)")
    sizes = viewer.evaluate("Array.from(document.images).map(i => i.naturalWidth)")
    assert len(sizes) >= 2 and all(width > 0 for width in sizes), sizes  # elo and win-rate plots at least
