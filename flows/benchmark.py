"""The one flow every entry point runs: benchmark(suite, ...).

plan -> data gate per dataset (after its modality's step: multimodal cards are aligned) -> jobs, as
many at once as the cores allow -> each job recorded as a child run of this execution ->
leaderboard and summary as Prefect artifacts. Thin wiring only: the work is in tasks/.

Executions (see docs/reports.md): `execution="auto"` resumes the latest execution of
the suite if it did not finish, else starts a fresh one; `"new"` always starts a fresh one; any
other value names an execution (its parent run id) to resume. A job whose key is already recorded
as finished (ok or skipped) in that execution is not run again. `retry_failed=True` re-runs exactly
the failed, timeout and memory jobs of the latest execution, replacing their records.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from prefect import flow, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from flows.adaptive_run import previous_execution, record_rounds, run_in_rounds
from flows.dispatch import Dispatcher, JobContext
from flows.team_dispatch import choose_dispatcher
from tasks.data.folds import fold_settings
from tasks.data.validate import validate_dataset as gate
from tasks.data.versions import data_version as dvc_version
from tasks.errors import UserError
from tasks.evaluations.registry import all_evaluations
from tasks.frameworks.registry import find_environment, get_adapter
from tasks.gpus import visible_gpu_count
from tasks.modalities.base import modality_of
from tasks.paths import job_dir_for
from tasks.plan import (
    Job,
    MetricOptimiser,
    ScalingStep,
    check_suite_metrics,
    expand_scaling,
    make_jobs,
    not_applicable,
    scaling_steps,
)
from tasks.report import jobs as job_table
from tasks.report.build import default_folder
from tasks.report.leaderboard import leaderboard
from tasks.report.publish import after_execution
from tasks.results import JobResult
from tasks.specs import (
    AdaptiveSettings,
    Budget,
    DatasetSpec,
    FrameworkRef,
    ScalingSettings,
    Suite,
    check_plain_names,
    load_budget,
    load_dataset_spec,
    load_suite,
)
from tasks.tracking import breaker, suite_lock
from tasks.tracking.execution import (
    Execution,
    defer_finish,
    execution_selection,
    execution_url,
    finish_execution,
    is_execution_of,
    latest_execution,
    log_alignment_reports,
    mark_unfinished,
    open_execution,
    start_execution,
    start_offline_execution,
)
from tasks.tracking.job_run import job_run_name, sync_pending
from tasks.tracking.recorded import recorded_jobs, recorded_results
from tasks.tracking.store import run_url
from tasks.tracking.system_metrics import system_metrics
from tasks.vocabulary import FINISHED_STATUSES, RETRYABLE_STATUSES, STATUSES

logger = logging.getLogger("automl_eval.benchmark")


# ---------------------------------------------------------------- the plan (no Prefect, no MLflow)


@dataclass(frozen=True)
class Plan:
    suite: Suite
    datasets: list[DatasetSpec]
    frameworks: list[FrameworkRef]
    folds: int
    budget: Budget
    # Framework id -> why it cannot run here, for frameworks the suite marks `where_available`:
    # their jobs are recorded as skipped with that sentence, the rest of the suite runs.
    unavailable: dict[str, str] = field(default_factory=dict)

    @property
    def adaptive(self) -> AdaptiveSettings | None:
        """The suite's `adaptive:` block with its rounds within this run's folds; None with one
        framework (nothing to compare: the grid runs whole) or without the block."""
        settings = self.suite.adaptive
        if settings is None or len(self.frameworks) < 2:
            return None
        max_folds = min(settings.max_folds or self.folds, self.folds)
        return settings.model_copy(update={"max_folds": max_folds,
                                           "min_folds": min(settings.min_folds, max_folds)})

    @property
    def adaptive_note(self) -> str:
        """Why an `adaptive:` block does not apply to this run, in one sentence ("" when it does)."""
        if self.suite.adaptive is not None and self.adaptive is None:
            return (f"{self.suite.name}: adaptive has nothing to compare with one framework; "
                    "running the full grid.")
        return ""

    def selection(self) -> dict[str, Any]:
        """What an execution records so that a resume or retry re-plans the same jobs."""
        return {
            "datasets": [spec.name for spec in self.datasets],
            "frameworks": [ref.model_dump(exclude_defaults=True) for ref in self.frameworks],
            "folds": self.folds,
            "budget": self.budget.name,
        }


def _pick_frameworks(suite: Suite, names: list[str] | None) -> list[FrameworkRef]:
    if not names:
        return list(suite.frameworks)
    picked = []
    for name in names:
        from_suite = [ref for ref in suite.frameworks if name in (ref.id, ref.name)]
        if not from_suite:
            check_plain_names("--frameworks", frameworks=[name])
        picked.extend(from_suite or [FrameworkRef.parse(name)])
    unique: list[FrameworkRef] = []
    for ref in picked:  # keep order, drop repeats
        if ref not in unique:
            unique.append(ref)
    return unique


def _check_frameworks(
    refs: list[FrameworkRef], unavailable: dict[str, str] | None = None
) -> dict[str, MetricOptimiser]:
    """Unknown or unusable frameworks stop the run before anything starts, with one sentence.

    A framework named at a version (`hgb@1.7.2`) needs its environment installed and working: its
    Python is started once here (the framework imported at its version). A missing one is not
    installed on the fly (minutes of pip, perhaps failing, inside a nightly run): the sentence gives
    the command that installs it. A suite entry marked `where_available` is not refused: why it
    cannot run here goes into `unavailable` (framework id -> the sentence), and its jobs are
    recorded as skipped with it.
    """
    adapters: dict[str, MetricOptimiser] = {}  # by framework id, for the metric check
    for ref in refs:
        try:
            adapter = get_adapter(ref.name)
        except UserError:
            raise
        except (KeyError, LookupError, ValueError) as exc:
            raise UserError(f"unknown framework '{ref.name}': {exc}") from None
        # An unknown version is a mistake in the suite, where_available or not.
        environment = find_environment(ref.name, ref.version) if ref.version else None
        try:
            if environment is not None:
                environment.require_usable(probe=True)
            else:
                reason = adapter.unavailable_reason()
                if reason:
                    raise UserError(reason)
        except UserError as exc:
            if not ref.where_available or unavailable is None:
                raise
            # Runs where it can: here it cannot, and each of its jobs is recorded as refused, why said.
            unavailable[ref.id] = f"refused here: {exc}"
        try:
            if ref.variant:
                adapter.variant_params(ref.variant)
            adapter.check_params(ref.params)
        except ValueError as exc:
            raise UserError(f"{exc}; check the framework entries of the suite.") from None
        adapters[ref.id] = adapter
    return adapters


def _check_frameworks_take_datasets(refs: list[FrameworkRef], specs: list[DatasetSpec]) -> None:
    """A framework named with --frameworks must take at least one dataset of the run (its adapter's
    applies_to); otherwise every job of it would be skipped, and the sentence says why instead.
    The jobs it cannot take among others are planned and recorded as skipped with the reason."""
    for ref in refs:
        reasons = [get_adapter(ref.name).applies_to(spec) for spec in specs]
        if specs and all(reasons):
            why = "; ".join(dict.fromkeys(str(reason).rstrip(".") for reason in reasons))
            raise UserError(f"--frameworks {ref.id} takes none of this run's datasets ({why}); name "
                            "datasets it takes with --datasets, or another framework.")


def resolve_plan(
    suite: str,
    frameworks: list[str] | list[dict[str, Any]] | None = None,
    datasets: list[str] | None = None,
    folds: int | None = None,
    budget: str | None = None,
) -> Plan:
    """The suite with the caller's narrowing applied; every bad name is a UserError."""
    loaded = load_suite(suite, all_evaluations())
    recorded = [entry for entry in frameworks or [] if isinstance(entry, dict)]
    if recorded:
        refs = [FrameworkRef(**entry) for entry in recorded]  # as recorded by an execution
    else:
        refs = _pick_frameworks(loaded, [entry for entry in frameworks or [] if isinstance(entry, str)])
    unavailable: dict[str, str] = {}
    adapters = _check_frameworks(refs, unavailable)
    specs = [load_dataset_spec(name) for name in (datasets or loaded.datasets)]
    _check_adaptive_folds(loaded, specs)
    check_suite_metrics(loaded.name, specs, adapters)
    if frameworks and not isinstance(frameworks[0], dict):
        _check_frameworks_take_datasets(refs, specs)
    if folds is not None and folds < 1:
        raise UserError(f"--folds must be at least 1, not {folds}.")
    return Plan(loaded, specs, refs, folds or loaded.folds, load_budget(budget or loaded.budget), unavailable)


def _check_adaptive_folds(suite: Suite, specs: list[DatasetSpec]) -> None:
    """`adaptive.min_folds` within every dataset's saved folds (its card's `folds: k` or params.yaml's)."""
    if suite.adaptive is None:
        return
    for spec in specs:
        if spec.folds_spec.user_given:
            continue  # the user's own folds: their count is known once read; the run narrows to them
        saved = fold_settings(spec).k
        if suite.adaptive.min_folds > saved:
            raise UserError(f"suite {suite.name}: field 'adaptive.min_folds': {suite.adaptive.min_folds} is "
                            f"above the {saved} folds of dataset {spec.name}; lower min_folds.")


def plan_jobs(plan: Plan, versions: dict[str, str]) -> list[Job]:
    folds = plan.adaptive.max_folds or plan.folds if plan.adaptive else plan.folds  # rounds stop there
    jobs = make_jobs(plan.suite.name, versions, plan.frameworks, folds, plan.suite.seeds, plan.budget)
    if plan.suite.scaling is None:
        return jobs
    return expand_scaling(jobs, plan_scaling_steps(plan.suite.name, plan.suite.scaling, plan.budget))


def plan_scaling_steps(suite: str, settings: ScalingSettings, budget: Budget) -> list[ScalingStep]:
    """The suite's `scaling:` steps on this host (its cores and visible GPUs), capped where above;
    the capped ones are said once here and carried by every job of the block into the report."""
    steps = scaling_steps(settings, budget, host_cores=len(os.sched_getaffinity(0)),
                          host_gpus=visible_gpu_count())
    if steps[0].capped:
        print(f"{suite}: scaling steps above this host: {steps[0].capped}.")
    return steps


# ---------------------------------------------------------------- data: align, version, gate


def data_version(spec: DatasetSpec) -> str:
    """The DVC md5 of the dataset's file, or "missing" (the gate then says why in one sentence)."""

    try:
        return dvc_version(spec)
    except (UserError, FileNotFoundError):
        return "missing"


@task(name="prepare-dataset", cache_policy=NO_CACHE)
def prepare_dataset(name: str) -> list[str]:
    """The modality's step before the gate (multimodal cards: put the streams on one clock);
    returns why it failed, if it did."""

    spec = load_dataset_spec(name)
    return modality_of(spec).before_gate(spec)


@task(name="validate-dataset", cache_policy=NO_CACHE)
def validate_dataset(name: str) -> dict[str, Any]:
    """The data gate; returns ok, why not, and the data version the jobs are keyed by."""
    spec = load_dataset_spec(name)
    try:
        if modality_of(spec).prepares:
            unprepared = prepare_dataset(name)
            if unprepared:
                return {"ok": False, "reason": "; ".join(unprepared), "version": "missing"}

        outcome = gate(spec)
    except UserError as exc:
        return {"ok": False, "reason": str(exc), "version": data_version(spec)}
    reason = "; ".join(outcome.failures)[:2000]
    return {"ok": bool(outcome.ok), "reason": reason, "version": data_version(spec),
            "accepted": "; ".join(outcome.accepted)[:2000]}


# ---------------------------------------------------------------- leaderboard and summary


@dataclass
class Record:
    """One job of the execution as the leaderboard needs it."""

    job: Job
    result: JobResult
    metric: str


FAILURE_STATUSES = tuple(status for status in STATUSES if status != "ok")


def leaderboard_rows(records: list[Record]) -> list[dict[str, Any]]:
    """The report's leaderboard (tasks/report/leaderboard.py) of these jobs, best first per dataset,
    as plain rows: None where a figure is missing (no job of the framework produced it)."""
    if not records:
        return []
    runs = pd.DataFrame([
        {"dataset": record.job.dataset, "framework": record.job.framework_id, "fold": record.job.fold,
         "seed": record.job.seed, "status": record.result.status, "metric": record.metric,
         **record.result.scores, **record.result.costs}
        for record in records
    ])
    board = leaderboard(job_table.prepare(runs))
    return board.astype(object).where(board.notna(), None).to_dict("records")


def table_row(row: Mapping[str, Any]) -> dict[str, str]:
    """One leaderboard row as the CLI, the summary and the Prefect table show it."""
    def fmt(value: float | None, digits: int = 4) -> str:
        return "" if value is None else f"{value:.{digits}f}"

    failed = sorted(status for status in FAILURE_STATUSES if row.get(status))
    failures = sum(int(row[status]) for status in failed)
    return {
        "dataset": row["dataset"],
        "framework": row["framework"],
        "result": fmt(row["result_mean"]),
        "± std": fmt(row["result_std"]),
        "metric": row["metric"],
        "fit_s": fmt(row["fit_s"], 1),
        "p99 latency ms": fmt(row["latency_p99_ms"], 2),
        "peak RSS MB": fmt(row["peak_rss_mb"], 0),
        "failures": f"{failures} ({', '.join(failed)})" if failures else "0",
    }


def best_frameworks(rows: list[dict[str, Any]]) -> dict[str, str]:
    """dataset -> the framework with the best mean result (rows come sorted best first)."""
    best: dict[str, str] = {}
    for row in rows:
        if row["result_mean"] is not None:
            best.setdefault(row["dataset"], row["framework"])
    return best


def summary_markdown(suite: str, execution_id: str, rows: list[dict[str, Any]], counts: dict[str, int],
                     gate_failures: dict[str, str], *, execution_url: str = "",
                     job_links: list[tuple[str, str, str]] | None = None) -> str:
    """The execution's summary; `execution_url` links its MLflow parent run, `job_links` lists
    (run name, status, URL) of each job run."""
    title = f"[{execution_id}]({execution_url})" if execution_url else f"`{execution_id}`"
    lines = [f"# {suite}: execution {title}", ""]
    if execution_url:
        lines += [f"MLflow: [the execution]({execution_url}) (parent run; its job runs are its children)", ""]
    lines.append("Jobs: " + ", ".join(f"{status} {count}" for status, count in sorted(counts.items())))
    if gate_failures:
        lines += ["", "Datasets skipped by the data gate:"]
        lines += [f"- **{name}**: {why}" for name, why in sorted(gate_failures.items())]
    table = [table_row(row) for row in rows]
    if table:
        headers = list(table[0])
        lines += ["", "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(str(row[h]) for h in headers) + " |" for row in table]
    if job_links:
        lines += ["", "Job runs in MLflow:", ""]
        lines += [f"- [{name}]({url}) {status}" for name, status, url in job_links]
    return "\n".join(lines) + "\n"


def _artifact_key(suite: str, kind: str) -> str:
    cleaned = "".join(ch if ch.isalnum() else "-" for ch in suite.lower()).strip("-")
    return f"{kind}-{cleaned or 'suite'}"


# ---------------------------------------------------------------- executions


def check_execution_choice(suite: str, execution: str = "auto", retry_failed: bool = False) -> None:
    """Before anything runs: the execution to resume or retry must exist (one sentence if not)."""
    name = load_suite(suite, all_evaluations()).name
    if retry_failed and latest_execution(name) is None:
        raise UserError(f"suite '{name}' has no execution to retry; run it first.")
    if execution not in ("auto", "new") and not is_execution_of(execution, name):
        raise UserError(f"no execution '{execution}' of suite '{name}'; "
                        f"its id is the parent run id shown by `automl-eval run {name}`.")


def _choose_execution(suite: str, plan: Plan, execution: str, retry_failed: bool, team: str,
                      trigger: str) -> Execution:
    if retry_failed:
        latest = latest_execution(suite)
        if latest is None:
            raise UserError(f"suite '{suite}' has no execution to retry; run it first.")
        return open_execution(latest)
    if execution not in ("auto", "new"):
        check_execution_choice(suite, execution)
        return open_execution(execution)
    try:
        if execution == "auto":
            unfinished = latest_execution(suite, unfinished_only=True)
            if unfinished is not None:
                return open_execution(unfinished)
        return start_execution(suite, team=team, selection=plan.selection(),
                                        budget=plan.budget.name, trigger=trigger)
    except Exception as exc:
        if not breaker.is_unreachable(exc):
            raise
        # The store is away: run anyway, results on disk; the parent run is made when it answers.
        offline = start_offline_execution(suite, team=team, selection=plan.selection(),
                                                   budget=plan.budget.name, trigger=trigger)
        breaker.open_from_start(offline.execution_id, breaker.describe(exc))
        return offline


@flow(name="benchmark", flow_run_name="{suite}", log_prints=True)
def benchmark(
    suite: str,
    frameworks: list[str] | None = None,
    datasets: list[str] | None = None,
    folds: int | None = None,
    budget: str | None = None,
    team: str | None = None,
    execution: str = "auto",
    retry_failed: bool = False,
    parallel: int | None = None,
    trigger: str = "cli",
    dispatcher: Any = None,
    report: bool = True,
) -> dict[str, Any]:
    """Run a suite (narrowed by the other arguments), record every job in MLflow, publish the leaderboard
    and the report.

    execution: "auto" (resume the latest unfinished execution, else start one), "new", or an
    execution id to resume. retry_failed: re-run the failed/timeout/memory jobs of the latest execution.
    trigger: what started it (cli, manual, nightly), tagged on a fresh execution.
    dispatcher: what runs the jobs (a flows.dispatch.Dispatcher); default: as the mode says
    (flows.team_dispatch.choose_dispatcher), `parallel` at once in embedded mode.
    report: build and publish the execution's report (the mixes of an attribution are reported
    together by flows/explain_regression.py instead).
    """
    try:
        sync_pending()  # results that finished but were never logged go in first
    except Exception as exc:
        logger.warning("some finished jobs could not be logged yet (%s); `automl-eval sync` retries.", exc)

    plan = resolve_plan(suite, frameworks, datasets, folds, budget)
    suite_lock.hold(plan.suite.name)  # held by the CLI already; a deployment's run takes it here
    runner: Dispatcher = dispatcher or choose_dispatcher(parallel=parallel)
    runner.warm_up()
    chosen = _choose_execution(suite, plan, execution, retry_failed, team or "", trigger)
    narrowed = any(v is not None for v in (frameworks, datasets, folds, budget))
    recorded_selection = {} if chosen.offline else execution_selection(chosen.execution_id)
    if recorded_selection and not narrowed:
        # A resumed execution plans the jobs it was started with, whatever the suite says now.
        plan = resolve_plan(suite, recorded_selection.get("frameworks"), recorded_selection.get("datasets"),
                            recorded_selection.get("folds"), recorded_selection.get("budget"))
    # A narrowed run of a resumed execution covers only part of it: the execution stays unfinished.
    covers_execution = not recorded_selection or plan.selection() == recorded_selection

    gates = {spec.name: validate_dataset(spec.name) for spec in plan.datasets}
    versions = {name: gate["version"] for name, gate in gates.items()}
    gate_failures = {
        name: gate["reason"] or "data gate failed" for name, gate in gates.items() if not gate["ok"]
    }
    aligned = [name for name, gate in gates.items() if gate["ok"]]
    try:
        log_alignment_reports(chosen, aligned)  # multimodal only; others have none
    except Exception as exc:
        logger.warning("alignment reports not attached to execution %s: %s", chosen.execution_id, exc)
    jobs = plan_jobs(plan, versions)
    specs = {spec.name: spec for spec in plan.datasets}
    contexts = {
        job.key: JobContext(execution=chosen.__dict__, problem_type=specs[job.dataset].problem_type,
                            metric=str(specs[job.dataset].metric),
                            evaluations=plan.suite.evaluation_blocks())
        for job in jobs
    }

    already = {} if chosen.offline else recorded_jobs(chosen.execution_id)
    if retry_failed:
        to_run = [job for job in jobs if already.get(job.key) and
                  already[job.key].status in RETRYABLE_STATUSES]
    else:
        to_run = [job for job in jobs if job.key not in already
                  or already[job.key].status not in FINISHED_STATUSES]
    not_taken = not_applicable(to_run, specs, {ref.name: get_adapter(ref.name) for ref in plan.frameworks})
    for job in to_run:  # a framework the suite runs where available, and that cannot run here
        if job.framework_id in plan.unavailable and job.key not in not_taken:
            not_taken[job.key] = plan.unavailable[job.framework_id]
    runnable = [job for job in to_run if job.dataset not in gate_failures and job.key not in not_taken]
    in_rounds = plan.adaptive is not None and not retry_failed  # a retry re-runs exactly the failures
    # In rounds, the progress bar's total grows by each round's jobs (run_in_rounds).
    runner.planned(len(to_run) - len(runnable) if in_rounds else len(to_run))
    for job in to_run:
        if job.dataset in gate_failures:
            runner.skip(job, contexts[job.key], f"data gate failed: {gate_failures[job.dataset]}")
        elif job.key in not_taken:
            runner.skip(job, contexts[job.key], not_taken[job.key])
    print(f"{plan.suite.name}: {len(jobs)} jobs planned, {len(runnable)} to run, "
          f"execution {chosen.execution_id}")
    if plan.adaptive_note:
        print(plan.adaptive_note)
    ran = len(runnable)
    try:
        with system_metrics(chosen):
            if in_rounds and plan.adaptive is not None:
                ran = _run_adaptive(runner, chosen, plan.adaptive, jobs, runnable, contexts,
                                    counted=len(to_run) - len(runnable))
            else:
                runner.run(runnable, contexts)
    except BaseException:
        if not breaker.is_open(chosen.execution_id):
            mark_unfinished(chosen)
        raise

    # The store had its chance during the run; what still waits is kept on disk, with why.
    waiting = breaker.settle(chosen.execution_id)
    found, store_away = results_of(chosen, jobs)
    records = [Record(job, found[job.key], contexts[job.key].metric) for job in jobs if job.key in found]
    rows = leaderboard_rows(records)
    counts: dict[str, int] = {}
    for record in records:
        counts[record.result.status] = counts.get(record.result.status, 0) + 1
    parent_url, job_links = _mlflow_links(chosen, jobs)
    markdown = summary_markdown(plan.suite.name, chosen.execution_id, rows, counts, gate_failures,
                                execution_url=parent_url, job_links=job_links)
    create_table_artifact(key=_artifact_key(plan.suite.name, "leaderboard"),
                          table=[table_row(row) for row in rows],
                          description=f"Leaderboard of {plan.suite.name}, execution "
                                      f"[{chosen.execution_id}]({parent_url}) in MLflow")
    create_markdown_artifact(key=_artifact_key(plan.suite.name, "summary"), markdown=markdown,
                             description=f"Summary of {plan.suite.name}, with links to MLflow")
    accepted = {name: gate["accepted"] for name, gate in gates.items() if gate.get("accepted")}
    if not store_away:
        try:
            if covers_execution:
                finish_execution(chosen, summary_markdown=markdown, data_gate_failures=gate_failures,
                                          data_gate_accepted=accepted, counts=counts,
                                          best=best_frameworks(rows))
            else:
                mark_unfinished(chosen)
        except Exception as exc:
            if not breaker.is_unreachable(exc):
                raise
            store_away = True
    if store_away:  # `automl-eval sync` ends the execution once its results are logged
        defer_finish(chosen, finished=covers_execution, summary_markdown=markdown,
                              data_gate_failures=gate_failures)
    report_folder = "" if store_away or not report else report_and_publish(chosen.execution_id,
                                                                            plan.suite.name)
    return {
        "suite": plan.suite.name,
        "execution_id": chosen.execution_id,
        "planned": len(jobs),
        "ran": ran,
        "counts": counts,
        "gate_failures": gate_failures,
        "leaderboard": rows,
        "summary": markdown,
        "report": report_folder,
        "waiting": {"count": waiting.count, "reason": waiting.reason},
        "execution_url": execution_url(chosen),
    }


def _run_adaptive(runner: Dispatcher, chosen: Execution, settings: AdaptiveSettings, jobs: list[Job],
                  runnable: list[Job], contexts: dict[str, JobContext], counted: int) -> int:
    """The rounds, with the execution's settings recorded on it and the previous execution's settled
    cells at hand for reopening (none while the store is away: the rounds run without)."""
    previous = None
    if not chosen.offline:
        record_rounds(chosen.execution_id, settings)
        try:
            previous = previous_execution(chosen.execution_id, settings)
        except Exception as exc:
            logger.warning("no previous execution to reopen regressed cells from: %s", exc)
    done = run_in_rounds(runner, jobs, runnable, contexts, settings, lambda: results_of(chosen, jobs)[0],
                         counted=counted, previous=previous,
                         on_reopen=lambda cells: record_rounds(chosen.execution_id, settings, cells))
    return done.ran


def results_of(chosen: Execution, jobs: list[Job]) -> tuple[dict[str, JobResult], bool]:
    """job_key -> its result, and whether the store is away. The record is the truth (job folders may
    be on other machines); a job not logged yet is read from its folder, so it still counts."""
    store_away = breaker.is_open(chosen.execution_id)
    recorded: dict[str, JobResult] = {}
    if not store_away:
        try:
            recorded = recorded_results(chosen.execution_id)
        except Exception as exc:  # it went away just now (or, in team mode, while workers recorded)
            if not breaker.is_unreachable(exc):
                raise
            store_away = True
    found: dict[str, JobResult] = {}
    for job in jobs:
        job_dir = job_dir_for(job)
        if job.key in recorded:
            found[job.key] = recorded[job.key]
        elif (job_dir / "result.json").is_file():
            found[job.key] = JobResult.load(job_dir)
    return found, store_away


def _mlflow_links(execution: Execution, jobs: list[Job]) -> tuple[str, list[tuple[str, str, str]]]:
    """The execution's MLflow URL, and (run name, status, URL) of each of its recorded job runs."""
    try:
        recorded = recorded_jobs(execution.execution_id)
    except Exception as exc:  # the store is away: the results wait on disk, and so do their links
        logger.warning("no MLflow links in the summary: the tracking store did not answer (%s).",
                       str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__)
        return "", []
    links = [(job_run_name(job), recorded[job.key].status,
              run_url(execution.experiment_id, recorded[job.key].run_id))
             for job in jobs if job.key in recorded]
    return run_url(execution.experiment_id, execution.execution_id), links


def report_and_publish(execution_id: str, suite: str) -> str:
    """The report (folder, `report/` on the parent run, Prefect artifacts); its folder, or "" if none.

    A report that cannot be built (e.g. no job ran) must not fail a benchmark whose jobs are
    recorded: `automl-eval report` can build it later.
    """
    try:
        after_execution(execution_id, suite, compare_previous=False)  # a nightly compares by itself
        return str(default_folder(f"{suite}-{execution_id[:8]}"))
    except Exception as exc:
        logger.warning("no report for execution %s: %s", execution_id, exc)
        return ""

