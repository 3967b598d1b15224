"""Team mode: a suite's jobs go to long-lived workers (flows/team_worker.py) through Prefect.

``TeamDispatcher.run`` hands each job to the Prefect server as a background task run
(``task.delay()``); any online worker of the right kind takes it over its websocket, so several
machines share a suite and no process starts per job. GPU jobs are runs of the GPU job task, which
only `gpu` workers serve. The dispatcher then watches the task runs and the workers' heartbeats:

- a run that ends is the job's outcome (the worker recorded it in MLflow);
- a run held by a worker whose heartbeat stopped for MISSED_BEATS of its intervals (or whose
  process on this host is gone) is lost: the dispatcher marks the run Failed, records the job
  `failed` with the reason, and `--retry-failed` re-runs exactly those jobs. The worker, should it
  come back, sees its run is final and does not record the job a second time.

Which dispatcher runs is decided in one place, ``choose_dispatcher``, by ``team_mode()``.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import shutil
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import TaskRunFilter, TaskRunFilterId
from prefect.exceptions import ObjectNotFound
from prefect.settings import PREFECT_API_URL, PREFECT_RESULTS_DEFAULT_STORAGE_BLOCK
from prefect.states import Failed

from flows.dispatch import (
    Dispatcher,
    EmbeddedDispatcher,
    JobContext,
    JobOutcome,
    ProgressListener,
    record_job,
    record_not_run,
)
from flows.scheduling_storage import cache_scheduling_storage, job_result
from flows.team_worker import DEFAULT_HEARTBEAT_S, GPU_LIMIT, MISSED_BEATS, TASKS, Heartbeat, read_heartbeats
from tasks.code_version import SHOWN_CHARS, code_fingerprint
from tasks.errors import UserError
from tasks.paths import job_dir_for
from tasks.plan import Job
from tasks.results import RESULT_FILE, JobResult
from tasks.tracking.execution import Execution, git_sha
from tasks.tracking.job_folder import TRACKING_FILE, write_pending

logger = logging.getLogger("automl_eval.team")

MODE_ENV = "AUTOML_EVAL_MODE"
POLL_S = 2.0  # how often the suite looks; workers get jobs pushed, so this delays only noticing the end
READ_BATCH = 200  # task runs per read (the server's default page)
PROBLEM_SHOWN_S = 24 * 3600  # a worker's refusal to start is told to suites for a day after it


def team_mode() -> bool:
    """Team mode when asked for: AUTOML_EVAL_MODE=team (the team stack sets it for its processes)."""
    return os.environ.get(MODE_ENV, "").strip().lower() == "team"


def choose_dispatcher(progress: ProgressListener | None = None, parallel: int | None = None) -> Dispatcher:
    """The one place that decides embedded or team."""
    if team_mode():
        return TeamDispatcher(progress)
    return EmbeddedDispatcher(progress, parallel)


def _require_api_url() -> str:
    url = PREFECT_API_URL.value()
    if not url:
        raise UserError(f"{MODE_ENV}=team needs a Prefect server: set PREFECT_API_URL "
                        "(e.g. `source .team/client.env` after `make team-up`).")
    return str(url)


def gpu_unavailable_reason(client: Any, beats: list[Heartbeat], gpus: int) -> str:
    """Why GPU jobs cannot run on this team, or '' when they can."""
    try:
        limit = client.read_global_concurrency_limit_by_name(GPU_LIMIT)
    except ObjectNotFound:
        return (f"no GPU in the team: the Prefect concurrency limit '{GPU_LIMIT}' is missing; "
                "start GPU workers and run `automl-eval deploy --gpus N`.")
    if limit.limit < gpus:
        return (f"no GPU for this job: it asks for {gpus} GPU(s) and the team's concurrency limit "
                f"'{GPU_LIMIT}' allows {limit.limit}; add GPU workers and run `automl-eval deploy --gpus N`.")
    if not any(beat.kind == "gpu" and beat.alive() for beat in beats):
        return "no GPU for this job: no gpu worker is online; start one on a GPU host (`--kind gpu`)."
    return ""


def worker_warnings(beats: list[Heartbeat], code: str, now: float | None = None) -> list[str]:
    """One sentence per worker this suite cannot count on: one that refused to start (and why), one
    whose code is not the suite's (it refuses the jobs it takes)."""
    now = now or time.time()
    said = []
    for beat in beats:
        if beat.problem and beat.age_s(now) <= PROBLEM_SHOWN_S:
            said.append(f"worker {beat.name} on {beat.host} refused to start {beat.age_s(now) / 60:.0f} min "
                        f"ago and takes no job: {beat.problem}")
        elif beat.alive(now) and beat.code and code and beat.code != code:
            said.append(f"worker {beat.name} on {beat.host} runs other code than this suite (fingerprint "
                        f"{beat.code[:SHOWN_CHARS]}, the suite's {code[:SHOWN_CHARS]}): it refuses the jobs "
                        "it takes; make its checkout the suite's and restart it.")
    return said


def _process_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _dead_reason(beat: Heartbeat, now: float) -> str:
    """Why a worker is gone, or '' while it lives. On this host its process says so, at once and
    without doubt (a busy machine may delay heartbeats, never fake a live process); elsewhere its
    heartbeat going stale does."""
    if beat.host == platform.node():
        alive = _process_alive(beat.pid)
        return "" if alive else f"worker {beat.name} on {beat.host} stopped (its process {beat.pid} is gone)"
    if not beat.alive(now):
        return f"worker {beat.name} on {beat.host} sent no heartbeat for {beat.age_s(now):.0f} s"
    return ""


class TeamDispatcher:
    """Hands jobs to the team's long-lived workers and waits for them, noticing dead workers."""

    __slots__ = ("progress",)  # not a plain object: Prefect stores it as a placeholder

    def __init__(self, progress: ProgressListener | None = None) -> None:
        self.progress = progress

    def __reduce__(self) -> tuple[Any, ...]:
        # The suite's context travels with each job to the workers; the progress bar stays here.
        return (TeamDispatcher, ())

    def warm_up(self) -> None:
        """Nothing runs here: each worker keeps its own warm fork server."""

    def planned(self, count: int) -> None:
        if self.progress is not None:
            self.progress.jobs_planned(count)

    def skip(self, job: Job, context: JobContext, reason: str) -> JobOutcome:
        result, outcome = record_not_run(job, context, reason)
        self._finished(job, result)
        return outcome

    def _finished(self, job: Job, result: JobResult) -> None:
        if self.progress is not None:
            self.progress.job_finished(job, result)

    def run(self, jobs: list[Job], contexts: dict[str, JobContext]) -> list[JobOutcome]:
        if not jobs:
            return []
        _require_api_url()
        cache_scheduling_storage()  # the result-storage block: read once, not once per job
        outcomes: dict[str, JobOutcome] = {}
        waiting: dict[UUID, _Submitted] = {}
        code, commit = code_fingerprint(), git_sha()
        with get_client(sync_client=True) as client:
            beats = read_heartbeats(client)
            for warning in worker_warnings(beats, code):
                logger.warning("%s", warning)
            gpu_reasons = {gpus: gpu_unavailable_reason(client, beats, gpus)
                           for gpus in {job.budget.gpus for job in jobs if job.budget.gpus}}
            if any(not job.budget.gpus for job in jobs) and not any(
                    beat.kind == "cpu" and beat.alive() for beat in beats):
                raise UserError("no team worker is online to take the jobs: start them with `make team-up` "
                                "(or `python -m flows.team_worker --name NAME`) on the team's hosts.")
            try:
                for job in jobs:
                    reason = gpu_reasons.get(job.budget.gpus, "")
                    if reason:
                        outcomes[job.key] = self.skip(job, contexts[job.key], reason)
                        continue
                    task = TASKS["gpu" if job.budget.gpus else "cpu"]
                    submitted = time.time()
                    context = {**contexts[job.key].__dict__, "code": code,
                               "commit": commit if commit != "unknown" else ""}
                    try:
                        future = task.delay(job=job.to_dict(), context=context,
                                            label=job.label, attempt=uuid.uuid4().hex)
                    except Exception as exc:
                        if not is_store_failure(exc):
                            raise
                        raise UserError(f"{job.label}: {store_failure(exc, 'take its parameters')}; "
                                        "when it answers, run the suite again: it resumes, and jobs "
                                        "already recorded are not run twice.") from exc
                    waiting[future.task_run_id] = _Submitted(job, future.task_run_id, submitted)
                outcomes.update(self._wait(client, waiting, contexts))
            except BaseException:
                _give_up(client, [s.run_id for s in waiting.values() if s.job.key not in outcomes],
                         "the suite stopped")
                raise
        return [outcomes[job.key] for job in jobs]

    def _wait(self, client: Any, waiting: dict[UUID, _Submitted],
              contexts: dict[str, JobContext]) -> dict[str, JobOutcome]:
        outcomes: dict[str, JobOutcome] = {}
        pending = dict(waiting)
        while pending:
            runs = []
            ids = list(pending)
            for start in range(0, len(ids), READ_BATCH):
                by_id = TaskRunFilter(id=TaskRunFilterId(any_=ids[start:start + READ_BATCH]))
                runs += client.read_task_runs(task_run_filter=by_id, limit=READ_BATCH)
            beats = {beat.name: beat for beat in read_heartbeats(client)}
            holders = {run_id: beat for beat in beats.values() for run_id in beat.running}
            now = time.time()
            for run_id in set(ids) - {task_run.id for task_run in runs}:
                # A worker deletes a task run whose parameters it cannot read: no shared storage.
                submitted = pending.pop(run_id)
                outcomes[submitted.job.key] = self._failed(submitted, contexts[submitted.job.key], (
                    "a worker could not read the job's parameters and dropped it: the result storage "
                    "did not answer it (the worker's log says), or the suite and the workers do not share "
                    "one (PREFECT_LOCAL_STORAGE_PATH on one host, "
                    "PREFECT_TASKS_SCHEDULING_DEFAULT_STORAGE_BLOCK across hosts); once fixed, run the "
                    "suite again with --retry-failed"))
            for task_run in runs:
                submitted = pending[task_run.id]
                job, state = submitted.job, task_run.state
                if state is not None and state.is_final():
                    outcomes[job.key] = self._outcome(submitted, state, contexts[job.key])
                    del pending[task_run.id]
                    continue
                if state is not None and state.is_running() and not submitted.started:
                    submitted.started = True
                    if self.progress is not None:
                        self.progress.job_started(job)
                lost = submitted.lost_reason(holders.get(str(task_run.id)), beats, now)
                if lost:
                    fresh = client.read_task_run(task_run.id)  # it may have just finished after all
                    if fresh.state is not None and fresh.state.is_final():
                        outcomes[job.key] = self._outcome(submitted, fresh.state, contexts[job.key])
                    else:
                        _give_up(client, [task_run.id], f"lost: {lost}")
                        outcomes[job.key] = self._failed(submitted, contexts[job.key], f"lost: {lost}")
                    del pending[task_run.id]
            if pending:
                time.sleep(POLL_S)
        return outcomes

    def _outcome(self, submitted: _Submitted, state: Any, context: JobContext) -> JobOutcome:
        job = submitted.job
        if not state.is_completed():
            message = state.message or "no message"
            reason = (store_failure(message, "take the job's result") + "; when it answers, run the suite "
                      "again with --retry-failed") if is_store_failure(message) else (
                f"the job's task run ended {state.type.value}: {message}")
            return self._failed(submitted, context, reason)
        try:
            returned = job_result(state)
        except Exception as exc:  # kept on another host without shared result storage
            logger.info("result of %s not readable here (%s); MLflow has it.", job.label, exc)
            returned = None
        if not isinstance(returned, dict):
            self._finished(job, JobResult(job_key=job.key, status="unknown"))
            return JobOutcome(job_key=job.key, status="unknown", run_id=None, job_dir=str(job_dir_for(job)),
                              submitted_unix=submitted.submitted_unix)
        result = JobResult(**returned["result"]) if returned.get("result") else None
        local_dir = job_dir_for(job)
        if result is not None and not (local_dir / RESULT_FILE).is_file():
            # The job ran on another machine: keep its result here for the suite's leaderboard.
            local_dir.mkdir(parents=True, exist_ok=True)
            result.save(local_dir)
        self._finished(job, result or JobResult(job_key=job.key, status=str(returned.get("status"))))
        return replace(JobOutcome.from_dict(returned), submitted_unix=submitted.submitted_unix)

    def _failed(self, submitted: _Submitted, context: JobContext, reason: str) -> JobOutcome:
        outcome = _record_failure(submitted.job, context, reason)
        self._finished(submitted.job, JobResult.load(Path(outcome.job_dir)))
        return replace(outcome, submitted_unix=submitted.submitted_unix)


class _Submitted:
    """One job handed to the team: its task run, and what the dispatcher saw of it."""

    def __init__(self, job: Job, run_id: UUID, submitted_unix: float) -> None:
        self.job = job
        self.run_id = run_id
        self.submitted_unix = submitted_unix
        self.started = False
        self.holder = ""  # the last worker seen holding it
        self.unheld_since: float | None = None

    def lost_reason(self, holder: Heartbeat | None, beats: dict[str, Heartbeat], now: float) -> str:
        """Why this job will never finish, or ''. Held by a dead worker: at once. Held before and by
        no worker now (its worker restarted without it), or running unheld: after the beats that
        would have listed it were missed."""
        if holder is not None:
            self.holder, self.unheld_since = holder.name, None
            return _dead_reason(holder, now)
        if not (self.holder or self.started):
            return ""  # still queued: no worker took it yet
        self.unheld_since = self.unheld_since or now
        last = beats.get(self.holder)
        # The busy interval: the beat after it took the job (sent at once) would have listed it.
        grace = MISSED_BEATS * (last.interval_s if last is not None else DEFAULT_HEARTBEAT_S)
        if now - self.unheld_since <= grace:
            return ""  # a heartbeat may not list it yet
        why = _dead_reason(last, now) if last is not None else ""
        return why or f"worker {self.holder or 'unknown'} no longer holds the job (it restarted or stopped)"


# botocore's words for a request the object store did not answer (a timeout, a refused or reset
# connection): every one names the store's "endpoint URL".
_STORE_UNANSWERED = "endpoint URL"


def is_store_failure(error: BaseException | str) -> bool:
    """Whether a job's parameters or result failed to travel because the team's object store did not
    answer (Prefect's result storage in the store: the cluster's remote-file-system block)."""
    return bool(PREFECT_RESULTS_DEFAULT_STORAGE_BLOCK.value()) and _STORE_UNANSWERED in str(error)


def store_failure(error: BaseException | str, what: str) -> str:
    """One sentence: the store, by its block, did not `what` within its retries (the block's bound)."""
    text = str(error).strip().splitlines()
    block = PREFECT_RESULTS_DEFAULT_STORAGE_BLOCK.value()
    return (f"the team's object store (Prefect block {block}) did not {what} within its retries "
            f"({text[-1][:200] if text else type(error).__name__})")


def _record_failure(job: Job, context: JobContext, reason: str) -> JobOutcome:
    """A job whose task run failed or was lost is recorded as failed, so `--retry-failed` finds it.

    The job folder is keyed by job, not by execution: what an earlier execution left there is
    replaced; a result this execution's job wrote before it was lost is kept and recorded."""
    job_dir = job_dir_for(job)
    if not (_belongs_to(job_dir / TRACKING_FILE, context) and (job_dir / RESULT_FILE).is_file()):
        shutil.rmtree(job_dir, ignore_errors=True)
        write_pending(job_dir, Execution(**context.execution), job, problem_type=context.problem_type,
                      metric=context.metric)
        JobResult(job_key=job.key, status="failed", error=reason).save(job_dir)
    try:
        run_id = record_job(str(job_dir))
    except Exception as exc:
        logger.warning("could not record %s (%s); it waits on disk.", job.label, exc)
        run_id = None
    status = JobResult.load(job_dir).status
    return JobOutcome(job_key=job.key, status=status, run_id=run_id, job_dir=str(job_dir), error=reason)


def _belongs_to(tracking_file: Path, context: JobContext) -> bool:
    """Whether a job folder's record was written for this execution (not left by an earlier one)."""
    try:
        record = json.loads(tracking_file.read_text())
    except (OSError, ValueError):
        return False
    return record.get("execution", {}).get("execution_id") == context.execution.get("execution_id")


def _give_up(client: Any, run_ids: list[UUID], reason: str) -> None:
    """Mark task runs the suite no longer waits for as final, so a late worker does not record them."""
    for run_id in run_ids:
        try:
            client.set_task_run_state(run_id, Failed(message=reason), force=True)
        except Exception as exc:
            logger.warning("could not mark task run %s failed: %s", run_id, exc)
