"""Serving stacks answer the test fold as the model does in process, before any load: the
onnxruntime stack (the model's ONNX graph behind a minimal ASGI app) on a small random forest (rf)
and on hgb with a categorical column and missing values;
a stack whose answers differ fails with the largest difference and reports no figure; a model
without an ONNX graph is skipped with the reason. (The mlflow stack's parity is asserted by
test_evaluations_serving.py, on every serving run.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from jobs_support.tiny_project import make_project

from tasks.evaluations.base import EvaluationContext
from tasks.evaluations.serving import ServingSettings, parity_gap
from tasks.evaluations.stacks import all_stacks
from tasks.evaluations.stage import run_evaluations
from tasks.frameworks.capabilities import NotOffered
from tasks.jobs import run_job
from tasks.paths import datasets_dir, venvs_dir
from tasks.plan import Job
from tasks.results import JobResult
from tasks.specs import Budget, DatasetSpec

BUDGET = Budget(name="stacks-test", time_s=5, cores=1, memory_mb=3000)
CHECKOUT_VENVS = venvs_dir()  # the checkout's stack environments, before a test moves the project
pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, DatasetSpec]:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    return make_project(tmp_path / "project", rows=80)


def _complete(spec: DatasetSpec) -> None:
    """The tiny dataset without its missing values: ONNX's tree ensembles route a missing value
    differently from scikit-learn's trees, so only complete rows can agree within the export's parity."""
    path = datasets_dir() / spec.file
    frame = pd.read_csv(path)
    frame.fillna({"x1": 0.0}).to_csv(path, index=False)


def _context(project: dict[str, DatasetSpec], tmp_path: Path, framework: str, kind: str) -> EvaluationContext:
    spec = project[kind]
    job = Job("stacks", spec.name, "v0", framework, None, 0, 0, BUDGET, {})
    job_dir = tmp_path / "runs" / job.key
    assert run_job(job, spec, job_dir).status == "ok"
    folder = job_dir / "evaluations" / "serving-stack-test"
    folder.mkdir(parents=True)
    settings = ServingSettings(enabled=True, stacks=["onnxruntime"])
    return EvaluationContext(job=job, spec=spec, job_dir=job_dir, folder=folder, settings=settings, cores=[])


def _served_by_onnxruntime(context: EvaluationContext,
                           also_ask: bytes | None = None) -> tuple[float, float, tuple[int, str] | None]:
    """The job's model behind the onnxruntime stack: its parity gap on the test fold and that gap's
    bound, and the answer to `also_ask` (a request body) while it is up."""
    stack = all_stacks()["onnxruntime"]
    server = stack.server(context, context.folder, [], healthcheck_s=60)
    with server:
        server.start()
        server.wait_until_up(60)
        gap, limit = parity_gap(server, context, stack)
        answer = server.invoke(also_ask) if also_ask is not None else None
    return gap, limit, answer


def test_the_onnxruntime_stack_answers_the_test_fold_as_the_model_does(project: dict[str, DatasetSpec],
                                                                       tmp_path: Path) -> None:
    _complete(project["binary"])
    context = _context(project, tmp_path, "rf", "binary")
    gap, limit, (status, answer) = _served_by_onnxruntime(context, also_ask=b'{"rows": []}')
    assert gap <= limit and limit >= all_stacks()["onnxruntime"].parity_tolerance
    assert (context.folder / "model.onnx").is_file()
    # A body that is not MLflow's format is the client's fault: HTTP 400 with the format it takes.
    assert status == 400 and "dataframe_split" in json.loads(answer)["message"]


def test_hgb_with_categories_and_missing_values_is_served_by_onnxruntime_with_parity(
        project: dict[str, DatasetSpec], tmp_path: Path) -> None:
    # The tiny data as it is: a categorical column and missing values, which hgb's own graph routes
    # as its trees do.
    context = _context(project, tmp_path, "hgb", "binary")
    gap, limit, _ = _served_by_onnxruntime(context)
    assert gap <= limit


def test_a_model_without_an_onnx_graph_is_skipped_with_the_reason(project: dict[str, DatasetSpec],
                                                                   tmp_path: Path) -> None:
    # EBM offers no ONNX conversion.
    context = _context(project, tmp_path, "ebm", "binary")
    with pytest.raises(NotOffered, match="no ONNX converter for this model"):
        all_stacks()["onnxruntime"].server(context, context.folder, [], healthcheck_s=60)


def test_a_stack_whose_answers_differ_fails_with_the_largest_difference_and_no_figures(
        project: dict[str, DatasetSpec], tmp_path: Path) -> None:
    # The tiny data's missing values: rf's ONNX graph routes them otherwise, so its answers differ.
    context = _context(project, tmp_path, "rf", "binary")
    block = {"enabled": True, "stacks": ["onnxruntime"], "startup_timeout_s": 60, "time_s": 200,
             "concurrency": [1], "duration_s": 1.0, "search_steps": 0}
    evaluated = run_evaluations(context.job, context.spec, context.job_dir, JobResult.load(context.job_dir),
                                {"serving": block})
    outcome = evaluated.evaluations["serving"]
    assert outcome["status"] == "failed"
    assert re.match(r"the onnxruntime stack's answers on the test fold differ from the model's in process by "
                    r"up to 0\.\d+, over its tolerance 0\.0001, so none of its figures is reported",
                    outcome["reason"]), outcome["reason"]
    assert outcome["metrics"] == {}


def test_the_mlserver_stack_without_its_environment_is_skipped_naming_the_install_command(
        project: dict[str, DatasetSpec], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOML_EVAL_VENVS_DIR", str(tmp_path / "no-venvs"))
    context = _context(project, tmp_path, "constant", "binary")
    block = {"enabled": True, "stacks": ["mlserver"], "startup_timeout_s": 60, "time_s": 200,
             "concurrency": [1], "duration_s": 1.0, "search_steps": 0}
    evaluated = run_evaluations(context.job, context.spec, context.job_dir, JobResult.load(context.job_dir),
                                {"serving": block})
    outcome = evaluated.evaluations["serving"]
    assert outcome["status"] == "ok" and outcome["metrics"] == {}
    folder = tmp_path / "no-venvs" / "mlserver-1.7.1"
    assert outcome["reason"] == (f"the mlserver stack's environment {folder} is not installed; install it "
                                 "with `python -m tasks.evaluations.stacks.mlserver_stack install`")


@pytest.mark.skipif(not all_stacks()["mlserver"].installed(),
                    reason="the mlserver stack's environment is not installed here "
                           "(python -m tasks.evaluations.stacks.mlserver_stack install)")
def test_the_mlserver_stack_answers_the_test_fold_as_the_model_does(
        project: dict[str, DatasetSpec], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # MLServer's V2 protocol, one tensor per column, the tiny data's missing values sent as null.
    monkeypatch.setenv("AUTOML_EVAL_VENVS_DIR", str(CHECKOUT_VENVS))  # the tiny project has none
    context = _context(project, tmp_path, "hgb", "binary")
    stack = all_stacks()["mlserver"]
    server = stack.server(context, context.folder, [], healthcheck_s=90)
    server.request_path = stack.request_path
    with server:
        server.start()
        server.wait_until_up(90)
        gap, limit = parity_gap(server, context, stack)
    assert gap <= limit == stack.parity_tolerance
