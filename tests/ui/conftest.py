"""A real browser for the UI tests: Debian's chromium driven by Playwright (no browser download).

`.ci/run` installs chromium; a machine without it skips these tests with that reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from run_support.services import missing_service
from ui_support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    TIMEOUT_MS,
    UI_DATASET,
    UI_FRAMEWORKS,
    UI_SUITE,
    EmbeddedUi,
)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not CHROMIUM.is_file():
        missing_service(f"chromium is not installed at {CHROMIUM} (apt-get install -y chromium; "
                        ".ci/run does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A fresh page (own storage, so no earlier toggle decides what MLflow shows)."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    try:
        yield page
    finally:
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:  # what the browser showed, for the CI log's reader
            page.screenshot(path=str(tmp_path / "failure.png"))
            print(f"screenshot of the failure: {tmp_path / 'failure.png'}")
        context.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


def _free_port() -> int:
    from ops.team_stack import free_port

    return free_port()


def _wait_for(url: str, process: subprocess.Popen[bytes], timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the MLflow UI exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(1)
    raise RuntimeError(f"the MLflow UI did not answer at {url} within {timeout_s:.0f} s")


@pytest.fixture(scope="session")
def embedded_ui(built_catalog: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedUi]:
    """A suite run on the embedded store (2 frameworks, 1 dataset, 1 fold), then `mlflow server` on it."""
    from mlflow.tracking import MlflowClient

    home = tmp_path_factory.mktemp("ui-home")
    (home / "specs" / "datasets").mkdir(parents=True)
    (home / "specs" / "suites").mkdir()
    (home / "datasets").mkdir()
    shutil.copy(PROJECT_ROOT / "specs" / "budgets.yaml", home / "specs")
    shutil.copy(PROJECT_ROOT / "specs" / "datasets" / f"{UI_DATASET}.yaml", home / "specs" / "datasets")
    for suffix in (".csv", ".folds.csv"):
        shutil.copy(built_catalog / f"{UI_DATASET}{suffix}", home / "datasets")
    for name in ("params.yaml", ".dvcignore"):
        shutil.copy(PROJECT_ROOT / name, home / name)
    (home / "pyproject.toml").touch()
    suite = {"datasets": [UI_DATASET], "frameworks": UI_FRAMEWORKS, "folds": 1, "budget": "test"}
    (home / "specs" / "suites" / f"{UI_SUITE}.yaml").write_text(yaml.safe_dump(suite))

    env = {k: v for k, v in os.environ.items()
           if k not in ("MLFLOW_TRACKING_URI", "PREFECT_API_URL", "AUTOML_EVAL_MODE", "AUTOML_EVAL_RUNS_DIR")}
    env.update(AUTOML_EVAL_HOME=str(home), COLUMNS="200")
    ran = subprocess.run([sys.executable, "-m", "flows.cli", "run", UI_SUITE], cwd=PROJECT_ROOT, env=env,
                         capture_output=True, text=True, timeout=600, check=False)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]

    store = f"sqlite:///{home / 'mlflow' / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=store)
    experiment = client.get_experiment_by_name(UI_SUITE)
    runs = client.search_runs([experiment.experiment_id])
    execution = next(r for r in runs if "execution_state" in r.data.tags)
    jobs = {r.data.tags["framework"]: r for r in runs if "job_key" in r.data.tags}

    port = _free_port()
    server = subprocess.Popen(
        [str(BIN / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", store, "--default-artifact-root", str(home / "mlflow" / "artifacts")],
        cwd=home, env=env, stdout=subprocess.DEVNULL, stderr=(home / "mlflow-ui.log").open("wb"),
        start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_for(f"{url}/health", server)
        yield EmbeddedUi(url, home, experiment.experiment_id, execution.info.run_id,
                         {name: run.info.run_id for name, run in jobs.items()},
                         next(iter(jobs.values())).data.tags["data_version"])
    finally:
        from tasks.resources import kill_group

        kill_group(server.pid)
        server.wait(timeout=30)
