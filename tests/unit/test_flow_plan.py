"""Planning a run: names checked up front, narrowing, parallelism, the leaderboard."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from flows.benchmark import (
    Record,
    best_frameworks,
    leaderboard_rows,
    resolve_plan,
    summary_markdown,
    table_row,
)
from flows.dispatch import max_parallel_jobs
from tasks.errors import UserError
from tasks.evaluations.registry import all_evaluations
from tasks.frameworks.registry import all_adapters, get_adapter
from tasks.gpus import GpuPool
from tasks.plan import Job, make_jobs, not_applicable
from tasks.results import JobResult
from tasks.specs import Budget, FrameworkRef, load_budget, load_dataset_spec, load_suite

ROOT = Path(__file__).resolve().parents[2]
ONE_CORE = Budget(name="b", time_s=10, cores=1, memory_mb=1024)


def test_shipped_suites_name_only_known_frameworks_and_datasets() -> None:
    smoke = load_suite("smoke", all_evaluations())
    assert {load_dataset_spec(name).problem_type for name in smoke.datasets} == {
        "binary", "multiclass", "regression"}
    assert smoke.folds == 2 and smoke.budget == "smoke"
    for suite in (smoke, load_suite("nightly", all_evaluations())):
        assert {ref.name for ref in suite.frameworks} <= set(all_adapters())
    assert {ref.name for ref in smoke.frameworks} >= {"constant", "hgb", "rf", "autogluon", "h2o", "flaml"}


def test_narrowing_keeps_the_suites_entries() -> None:
    plan = resolve_plan("smoke", ["hgb", "constant"], ["penguins"], 1, "test")
    assert [ref.id for ref in plan.frameworks] == ["hgb", "constant"]
    assert [spec.name for spec in plan.datasets] == ["penguins"]
    assert plan.folds == 1 and plan.budget.name == "test"
    assert plan.selection()["frameworks"] == [{"name": "hgb"}, {"name": "constant"}]
    # what an execution recorded plans the same jobs again
    again = resolve_plan("smoke", plan.selection()["frameworks"], ["penguins"], 1, "test")
    assert again.frameworks == plan.frameworks


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        (("no_such_suite",), "unknown suite 'no_such_suite'"),
        (("smoke", ["no_such_framework"]), "unknown framework 'no_such_framework'"),
        (("smoke", None, ["no_such_dataset"]), "unknown dataset 'no_such_dataset'"),
        (("smoke", None, None, None, "no_such_budget"), "unknown budget 'no_such_budget'"),
        (("smoke", None, None, 0), "--folds must be at least 1"),
        (("smoke", ["hgb:no_such_variant"]), "no_such_variant"),
        (("smoke", [{"name": "autogluon", "params": {"_max_train_rows": "many"}}]),
         "autogluon's param _max_train_rows is 'many': give a positive number of rows, or 'all' for no "
         "cap; check the framework entries of the suite."),
    ],
)
def test_bad_names_are_one_sentence(arguments: tuple, fragment: str) -> None:
    with pytest.raises(UserError, match=fragment.replace("(", r"\(")):
        resolve_plan(*arguments)


def test_a_suite_with_a_wrong_field_is_a_user_error(tmp_path: Path) -> None:
    suite = tmp_path / "bad.yaml"
    suite.write_text("datasets: [penguins]\nframeworks: [constant]\nfolds: two\n")
    with pytest.raises(UserError, match="field 'folds'"):
        resolve_plan(str(suite))


def test_cli_bad_suite_exits_2_with_one_sentence() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "flows.cli", "run", "no_such_suite"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )
    assert completed.returncode == 2
    assert "unknown suite 'no_such_suite'" in completed.stderr
    assert "Traceback" not in completed.stderr + completed.stdout


def test_cli_conflicting_execution_options_exit_2() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "flows.cli", "run", "smoke", "--new", "--retry-failed"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )
    assert completed.returncode == 2 and "at most one of" in completed.stderr


@pytest.mark.parametrize(("cores", "cpus", "expected"), [(1, 2, 2), (2, 2, 1), (4, 2, 1), (2, 16, 8)])
def test_parallel_jobs_follow_the_cores(cores: int, cpus: int, expected: int) -> None:
    budget = ONE_CORE.model_copy(update={"cores": cores})
    assert max_parallel_jobs(budget, cpu_count=cpus, gpu_count=0) == expected


def test_parallel_gpu_jobs_follow_the_devices() -> None:
    budget = ONE_CORE.model_copy(update={"gpus": 1})
    assert max_parallel_jobs(budget, cpu_count=16, gpu_count=2) == 2
    # no GPU at all: the jobs are skipped quickly, so they need not queue
    assert max_parallel_jobs(budget, cpu_count=16, gpu_count=0) == 16


def test_gpu_pool_hands_out_distinct_devices() -> None:
    pool = GpuPool([0, 1, 2])
    first, second = pool.take(2), pool.take(1)
    assert first == [0, 1] and second == [2]
    assert pool.take(1) == []  # too few free: the job is skipped with the reason, never given a busy device
    pool.give_back(first)
    assert sorted(pool.take(2) or []) == [0, 1]


def _record(dataset: str, framework: str, fold: int, status: str, result: float | None) -> Record:
    job = Job("s", dataset, "v", framework, None, fold, 0, ONE_CORE)
    scores = {"result": result} if result is not None else {}
    return Record(job, JobResult(job.key, status=status, scores=scores, costs={"fit_s": 1.0}), "auc")


def test_leaderboard_ranks_by_mean_result_and_counts_failures() -> None:
    """The run's leaderboard is the report's (tasks/report/leaderboard.py), shown as the CLI prints it."""
    rows = leaderboard_rows([
        _record("d", "a", 0, "ok", 0.8), _record("d", "a", 1, "ok", 0.6),
        _record("d", "b", 0, "ok", 0.9), _record("d", "b", 1, "timeout", None),
        _record("d", "c", 0, "failed", None),
    ])
    assert [row["framework"] for row in rows] == ["b", "a", "c"]
    a = rows[1]
    assert a["result_mean"] == pytest.approx(0.7) and a["result_std"] == pytest.approx(0.1414, abs=1e-3)
    cells = [table_row(row) for row in rows]
    assert cells[0]["failures"] == "1 (timeout)" and cells[1]["failures"] == "0"
    assert cells[1]["result"] == "0.7000" and cells[1]["± std"] == "0.1414" and cells[1]["fit_s"] == "1.0"
    assert rows[2]["result_mean"] is None and cells[2]["result"] == ""
    assert cells[2]["failures"] == "1 (failed)"
    assert best_frameworks(rows) == {"d": "b"}
    assert leaderboard_rows([]) == []
    markdown = summary_markdown("s", "e1", rows, {"ok": 3, "failed": 1}, {"x": "too few rows"})
    assert "| d | b |" in markdown and "**x**: too few rows" in markdown


def test_h2o_without_java_is_one_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no java on it
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(UserError, match="Java"):
        resolve_plan("smoke", ["h2o"])


def test_retry_or_resume_needs_an_execution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.benchmark import check_execution_choice
    from tasks.tracking.execution import start_execution

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    with pytest.raises(UserError, match="no execution to retry"):
        check_execution_choice("smoke", retry_failed=True)
    with pytest.raises(UserError, match="no execution 'nope' of suite 'smoke'"):
        check_execution_choice("smoke", "nope")
    execution = start_execution("smoke")
    check_execution_choice("smoke", retry_failed=True)
    check_execution_choice("smoke", execution.execution_id)
    with pytest.raises(UserError, match="of suite 'nightly'"):
        check_execution_choice("nightly", execution.execution_id)  # another suite's execution


def test_a_worker_restricted_to_some_gpus_hands_out_those_devices() -> None:
    """NVML numbers every device on the host; CUDA_VISIBLE_DEVICES=2,3 means devices 2 and 3."""
    from tasks.gpus import parse_visible_devices

    uuids = {f"GPU-{k}abc": k for k in range(4)}
    assert parse_visible_devices(None, 4, uuids) == [0, 1, 2, 3]
    assert parse_visible_devices("2,3", 4, uuids) == [2, 3]
    assert parse_visible_devices("GPU-3, 1", 4, uuids) == [3, 1]  # UUID prefixes, as CUDA takes them
    assert parse_visible_devices("1,7,2", 4, uuids) == [1]  # CUDA stops at the first unknown entry
    assert parse_visible_devices("", 4, uuids) == []
    pool = GpuPool(parse_visible_devices("2,3", 4, uuids))
    assert pool.take(1) == [2] and pool.take(1) == [3] and pool.take(1) == []


def test_jobs_a_framework_cannot_take_are_planned_as_skipped_with_its_reason() -> None:
    specs = {name: load_dataset_spec(name) for name in ("penguins", "food_reviews")}
    budget = load_budget("test")
    refs = [FrameworkRef.parse(name) for name in ("hgb", "tfidf_logreg", "statsforecast")]
    jobs = make_jobs("unit", {name: "v0" for name in specs}, refs, 1, [0], budget)
    adapters = {ref.name: get_adapter(ref.name) for ref in refs}
    reasons = {(job.dataset, job.framework): why
               for job in jobs if (why := not_applicable(jobs, specs, adapters).get(job.key))}
    assert reasons == {
        ("penguins", "tfidf_logreg"): "tfidf_logreg does not handle tabular multiclass problems.",
        ("penguins", "statsforecast"): "statsforecast does not handle tabular multiclass problems.",
        ("food_reviews", "hgb"): "hgb does not handle text binary problems.",
        ("food_reviews", "statsforecast"): "statsforecast does not handle text binary problems.",
    }


def test_a_named_framework_that_takes_none_of_the_datasets_is_one_sentence() -> None:
    with pytest.raises(UserError, match=r"--frameworks statsforecast takes none of this run's datasets "
                                        r"\(statsforecast does not handle tabular binary problems; "):
        resolve_plan("smoke", ["statsforecast"])
    # One dataset it takes is enough: the others' jobs are planned and skipped with the reason.
    assert [ref.id for ref in resolve_plan("smoke", ["constant"], ["penguins"]).frameworks] == ["constant"]


def test_a_framework_run_where_available_is_refused_per_job_not_for_the_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOML_EVAL_VENVS_DIR", str(tmp_path / "venvs"))  # no environment installed
    plan = resolve_plan("images", budget="test")
    entry = next(ref for ref in plan.frameworks if ref.name == "autogluon_mm")
    assert entry.where_available and entry.id == "autogluon_mm@1.6.3"
    assert plan.unavailable == {"autogluon_mm@1.6.3": (
        "refused here: framework environment 'autogluon_mm@1.6.3' is not installed; install it with "
        "`automl-eval frameworks install autogluon_mm@1.6.3` (or `make setup-frameworks` for all of them).")}
    assert {"cnn", "mobilenet_finetune", "hgb"} <= {ref.id for ref in plan.frameworks}
    # What an execution records re-plans it the same way (resume, retry).
    again = resolve_plan("images", plan.selection()["frameworks"], budget="test")
    assert again.unavailable == plan.unavailable
    # Without the mark the same framework refuses the whole run, in one sentence.
    with pytest.raises(UserError, match="framework environment 'autogluon_mm@1.6.3' is not installed"):
        resolve_plan("images", [{"name": "autogluon_mm", "version": "1.6.3"}], budget="test")
    # An unknown version is the suite's mistake, marked or not.
    with pytest.raises(UserError, match="has no environment for version '9.9'"):
        resolve_plan("images", [{"name": "autogluon_mm", "version": "9.9", "where_available": True}])
