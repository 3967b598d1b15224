"""A suite's `scaling:` block: planning (steps, caps, bad steps), the step on the job run, and the
report's Scaling section, checked by hand against real hgb jobs at 1 and 2 cores."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from jobs_support.tiny_project import make_project

from flows.benchmark import plan_jobs, resolve_plan
from flows.dispatch import jobs_at_once
from tasks.child_requests import JobRequest
from tasks.errors import UserError
from tasks.frameworks.registry import get_adapter
from tasks.jobs import run_job
from tasks.paths import job_dir_for
from tasks.plan import Job, ScalingStep, expand_scaling, make_jobs, not_applicable, scaling_steps
from tasks.report import scaling
from tasks.report.build import build_report
from tasks.specs import Budget, FrameworkRef, ScalingSettings
from tasks.tracking import read
from tasks.tracking.execution import start_execution
from tasks.tracking.job_folder import mark_result_final, write_pending
from tasks.tracking.job_run import log_job_dir

ROOT = Path(__file__).resolve().parents[2]
BUDGET = Budget(name="b", time_s=30, cores=1, memory_mb=2000)
# The thread variables the worker records in its info.environment (tasks/worker.py).
RECORDED_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def _suite(tmp_path: Path, block: str) -> Path:
    path = tmp_path / "scaled.yaml"
    path.write_text(f"datasets: [penguins]\nframeworks: [hgb]\nbudget: test\nscaling: {block}\n")
    return path


@pytest.mark.parametrize(("block", "sentence"), [
    ("{cores: [0, 2]}", "field 'scaling.cores': Value error, a step of 0 cores cannot run; give steps of 1 "
                        "core or more, e.g. [1, 2, 4, 8]."),
    ("{cores: [1], gpus: [0, -1]}", "field 'scaling.gpus': Value error, a step of -1 GPUs is negative; "
                                    "give steps of 0 GPUs or more, e.g. [0, 1]."),
    ("{cores: [1, 2], nodes: [2]}", "unknown field 'scaling.nodes'; remove it or check its spelling."),
    ("{}", "field 'scaling': Value error, name the steps: cores, gpus or both"),
])
def test_a_bad_step_is_one_sentence_at_planning_naming_the_field(tmp_path: Path, block: str,
                                                                  sentence: str) -> None:
    path = _suite(tmp_path, block)
    with pytest.raises(UserError) as raised:
        resolve_plan(str(path))
    assert str(raised.value) == f"{path}: {sentence}" or str(raised.value).startswith(f"{path}: {sentence}")


def test_the_cli_refuses_a_bad_step_with_exit_2(tmp_path: Path) -> None:
    path = _suite(tmp_path, "{cores: [0]}")
    completed = subprocess.run([sys.executable, "-m", "flows.cli", "run", str(path)], cwd=ROOT,
                               capture_output=True, text=True, timeout=120, check=False)
    assert completed.returncode == 2, completed.stderr
    assert "field 'scaling.cores'" in completed.stderr and "0 cores" in completed.stderr
    assert "Traceback" not in completed.stderr + completed.stdout


def test_steps_above_the_host_are_capped_with_a_note_not_refused() -> None:
    settings = ScalingSettings(cores=[8, 1, 2, 4, 2], gpus=[0, 1])
    steps = scaling_steps(settings, BUDGET, host_cores=2, host_gpus=0)
    note = ("cores 4, 8 capped at 2 (the host's cores); gpus 1 capped at 0 (no GPU is visible on the host)")
    assert steps == [ScalingStep(1, 0, note), ScalingStep(2, 0, note)]  # a capped step runs once, at the cap
    on_a_gpu_host = scaling_steps(settings, BUDGET, host_cores=16, host_gpus=1)
    assert [(step.cores, step.gpus) for step in on_a_gpu_host] == [
        (1, 0), (2, 0), (4, 0), (8, 0), (1, 1), (2, 1), (4, 1), (8, 1)]
    assert {step.capped for step in on_a_gpu_host} == {""}
    # A missing list keeps the budget's figure.
    assert scaling_steps(ScalingSettings(gpus=[0]), BUDGET.model_copy(update={"cores": 2}), host_cores=4,
                         host_gpus=0) == [ScalingStep(2, 0)]


def test_each_job_runs_once_per_step_with_the_step_recorded() -> None:
    jobs = make_jobs("s", {"penguins": "v"}, [FrameworkRef(name="hgb"), FrameworkRef(name="rf")], 1, [0],
                     BUDGET)
    steps = scaling_steps(ScalingSettings(cores=[1, 2], gpus=[0, 1]), BUDGET, host_cores=2, host_gpus=0)
    scaled = expand_scaling(jobs, steps)
    assert [(job.framework, job.budget.cores, job.budget.gpus) for job in scaled] == [
        ("hgb", 1, 0), ("hgb", 2, 0), ("rf", 1, 0), ("rf", 2, 0)]
    assert {job.budget.time_s for job in scaled} == {BUDGET.time_s}  # the same budget time at every step
    assert len({job.key for job in scaled}) == 4
    assert scaled[1].scaling == steps[1] and scaled[1].label.endswith("/2c0g")
    assert Job.from_dict(scaled[1].to_dict()) == scaled[1]  # crosses to workers and job folders
    request = JobRequest(job_key=scaled[1].key, job=scaled[1], spec=_penguins())
    assert JobRequest.model_validate_json(request.model_dump_json()).job.scaling == steps[1]
    # A job outside a scaling block keeps its key (resume of executions recorded before).
    assert jobs[0].scaling is None and Job.from_dict({**jobs[0].to_dict()}).key == jobs[0].key


def test_a_gpu_step_of_a_framework_that_uses_no_gpu_is_skipped_with_the_reason() -> None:
    spec = _penguins()
    jobs = make_jobs("s", {spec.name: "v"}, [FrameworkRef(name="rf"), FrameworkRef(name="xgboost")], 1, [0],
                     BUDGET)
    scaled = expand_scaling(jobs, scaling_steps(ScalingSettings(gpus=[0, 1]), BUDGET, host_cores=2,
                                                host_gpus=1))
    adapters = {name: get_adapter(name) for name in ("rf", "xgboost")}
    reasons = {(job.framework, job.budget.gpus): why
               for job in scaled if (why := not_applicable(scaled, {spec.name: spec}, adapters).get(job.key))}
    assert reasons == {("rf", 1): "rf uses no GPU, so its scaling step with 1 GPU(s) would repeat the step "
                                  "without; not run."}


def test_a_scaling_blocks_jobs_run_one_at_a_time_unless_told_otherwise() -> None:
    jobs = make_jobs("s", {"penguins": "v"}, [FrameworkRef(name="hgb"), FrameworkRef(name="rf")], 2, [0],
                     BUDGET)
    assert jobs_at_once(jobs, cpu_count=16, gpu_count=0) == 4  # 1-core jobs side by side
    scaled = expand_scaling(jobs, scaling_steps(ScalingSettings(cores=[1, 4]), BUDGET, host_cores=16,
                                                host_gpus=0))
    assert jobs_at_once(scaled, cpu_count=16, gpu_count=0) == 1
    assert jobs_at_once(scaled, 3, cpu_count=16, gpu_count=0) == 3  # --parallel wins
    # Without the scaling block, the largest budget of the jobs sets how many fit: 16 cores / 4.
    mixed = [replace(job, scaling=None) for job in scaled]
    assert jobs_at_once(mixed, cpu_count=16, gpu_count=0) == 4


def test_the_shipped_scaling_suite_plans_a_job_per_step_on_this_host() -> None:
    plan = resolve_plan("scaling", ["hgb"])
    jobs = plan_jobs(plan, {"default": "v"})
    assert {job.budget.gpus for job in jobs} <= {0, 1} and {job.budget.cores for job in jobs} <= {1, 2}
    assert all(job.scaling is not None and job.budget.time_s == plan.budget.time_s for job in jobs)


def _penguins():  # noqa: ANN202 - a DatasetSpec
    from tasks.specs import load_dataset_spec

    return load_dataset_spec("penguins")


def test_the_speedup_table_by_hand_on_a_fixed_work_job_at_1_and_2_cores(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "project"
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(home))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    spec = make_project(home, rows=200)["binary"]
    budget = Budget(name="scaled", time_s=60, cores=1, memory_mb=2000)
    steps = scaling_steps(ScalingSettings(cores=[1, 2], gpus=[0, 1]), budget, host_cores=2, host_gpus=0)
    base = make_jobs("scaling_unit", {spec.name: "v0"}, [FrameworkRef(name="hgb", params={"max_iter": 10})],
                     1, [0], budget)
    execution = start_execution("scaling_unit", budget=budget.name)
    info_by_cores: dict[int, dict[str, Any]] = {}
    for job in expand_scaling(base, steps):
        job_dir = job_dir_for(job)
        write_pending(job_dir, execution, job, problem_type=spec.problem_type, metric=str(spec.metric))
        result = run_job(job, spec, job_dir)
        assert result.status == "ok", result.error
        info_by_cores[job.budget.cores] = result.info
        mark_result_final(job_dir)
        log_job_dir(job_dir)

    # Each step ran on its cores, as its worker recorded them: the cores it was granted, the
    # affinity it really had, its thread variables and the size of every thread pool loaded.
    assert sorted(info_by_cores) == [1, 2]
    for cores, info in info_by_cores.items():
        assert len(info["cores"]) == cores and info["affinity"] == sorted(info["cores"])
        assert {name: info["environment"][name] for name in RECORDED_THREAD_VARIABLES} == dict.fromkeys(
            RECORDED_THREAD_VARIABLES, str(cores))
        assert info["thread_pools"], "the worker recorded no thread pool"
        assert {pool["threads"] for pool in info["thread_pools"]} == {cores}, info["thread_pools"]
        if info["launcher"] == "warm":
            # The fork server has scikit-learn loaded: hgb's OpenMP pool is held to the step's cores
            # too (a cold worker loads it only at the fit, after the record, under OMP_NUM_THREADS).
            assert "openmp" in {pool["api"] for pool in info["thread_pools"]}

    runs = read.job_runs(execution_id=execution.execution_id)
    assert sorted(runs["params.scaling_cores"]) == ["1", "2"] and set(runs["params.scaling_gpus"]) == {"0"}
    assert set(runs["scaling_work"]) == {"fixed"}  # hgb declares fixed work, and its 10 rounds were done
    by_cores = runs.set_index(runs["params.scaling_cores"].astype(int))
    fit_1, fit_2 = float(by_cores.loc[1, "fit_s"]), float(by_cores.loc[2, "fit_s"])
    rows_1, rows_2 = float(by_cores.loc[1, "fit_rows"]), float(by_cores.loc[2, "fit_rows"])

    report = build_report(runs, tmp_path / "report", title="scaling unit")
    table = pd.read_csv(tmp_path / "report" / "scaling_speedup.csv")
    assert table[["framework", "cores", "gpus", "jobs"]].to_dict("records") == [
        {"framework": "hgb", "cores": 1, "gpus": 0, "jobs": 1}, {"framework": "hgb", "cores": 2, "gpus": 0,
                                                                  "jobs": 1}]
    assert table["fit_s"].tolist() == pytest.approx([fit_1, fit_2])
    assert table["speedup"].tolist() == pytest.approx([1.0, fit_1 / fit_2])
    assert table["efficiency"].tolist() == pytest.approx([1.0, fit_1 / fit_2 / 2])
    assert table["fit_rows_per_s"].tolist() == pytest.approx([rows_1 / fit_1, rows_2 / fit_2])

    markdown = report.markdown
    assert "## Scaling (more cores and GPUs, the same budget time)" in markdown
    assert "| hgb | 1 | 0 | 1 |" in markdown.replace(f"| {spec.name} ", "")
    assert "Capped at the planning host, so not measured as asked: gpus 1 capped at 0 (no GPU is visible " \
           "on the host)." in markdown
    assert "No step with a GPU ran" in markdown
    host = runs["host"].iloc[0]
    assert f"- Measured steps: 1 cores/0 GPUs, 2 cores/0 GPUs, on {host}, " in markdown
    assert (tmp_path / "report" / "scaling.png").stat().st_size > 0 and "![scaling](scaling.png)" in markdown


def _rows(*rows: tuple[str, str, int, int, str, float | None, float | None]) -> pd.DataFrame:
    return pd.DataFrame([
        {"dataset": "d", "framework": framework, "status": status, "params.scaling_cores": str(cores),
         "params.scaling_gpus": str(gpus), "scaling_work": work, "fit_s": fit_s, "result": result,
         "fit_rows": 100.0, "scaling_capped": ""}
        for framework, status, cores, gpus, work, fit_s, result in rows])


def test_frameworks_that_fill_their_time_show_their_gain_and_limits_are_listed() -> None:
    jobs = _rows(("flaml", "ok", 1, 0, "fills_time", 60.0, 0.80),
                 ("flaml", "ok", 2, 0, "fills_time", 60.0, 0.83),
                 ("xgboost", "ok", 1, 0, "fixed", 8.0, 0.9), ("xgboost", "ok", 1, 1, "fixed", 2.0, 0.9),
                 ("hgb", "ok", 1, 0, "cut_short", 60.0, 0.7), ("rf", "failed", 2, 0, "", None, None))
    gains = scaling.gain_table(jobs)
    assert gains["cores"].tolist() == [1, 2] and gains["result"].tolist() == pytest.approx([0.80, 0.83])
    assert gains["gain"].tolist() == pytest.approx([0.0, 0.03])
    speedups = scaling.speedup_table(jobs)
    assert speedups["speedup"].tolist() == [1.0, 4.0]  # the GPU step: a speed-up ...
    assert speedups["efficiency"].isna().tolist() == [False, True]  # ... and no core ratio to divide by
    notes = " ".join(scaling.limits(jobs))
    assert "hgb on d at 1 cores, 0 GPUs" in notes and "cut_short" in notes
    assert "rf on d at 2 cores, 0 GPUs (failed)" in notes
    assert "One step only, so no speed-up or gain: hgb on d" in notes
    assert "No step with a GPU ran" not in notes  # xgboost ran one
    lines, figures = scaling.section(jobs.drop(columns=["params.scaling_cores"]), Path("."), str)
    assert figures == [] and lines[0] == "## Scaling" and "no `scaling:` block" in lines[2]
    assert scaling.section(jobs.iloc[:0].drop(columns=["params.scaling_cores"]), Path("."), str) == ([], [])
