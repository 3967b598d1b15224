"""Team mode without servers: when the dispatcher takes a job as lost, from the workers' heartbeats."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import platform
import subprocess
import sys
import time
from uuid import uuid4

from prefect.settings import PREFECT_API_URL, temporary_settings

from flows.dispatch import JobContext
from flows.team_dispatch import PROBLEM_SHOWN_S, _Submitted, worker_warnings
from flows.team_worker import (
    IDLE_BEATS,
    MISSED_BEATS,
    TASKS,
    Heartbeat,
    HoldingTaskWorker,
    code_refusal,
    variable_name,
)
from tasks.code_version import code_fingerprint
from tasks.plan import Job
from tasks.specs import Budget

JOB = Job("s", "penguins", "v", "constant", None, 0, 0, Budget(name="test", time_s=5, cores=1, memory_mb=512))


def _beat(name: str, *, host: str = "elsewhere", pid: int = 1, age_s: float = 0.0,
          holds: str = "") -> Heartbeat:
    return Heartbeat(name=name, host=host, kind="cpu", pid=pid, limit=1, running=[holds] if holds else [],
                     beat_unix=time.time() - age_s, interval_s=5.0)


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_queued_job_is_never_lost() -> None:
    submitted = _Submitted(JOB, uuid4(), time.time())
    assert submitted.lost_reason(None, {}, time.time() + 3600) == ""


def test_a_job_held_by_a_live_worker_is_not_lost() -> None:
    submitted = _Submitted(JOB, uuid4(), time.time())
    beat = _beat("w1", holds=str(submitted.run_id))
    assert submitted.lost_reason(beat, {"w1": beat}, time.time()) == ""


def test_a_job_held_by_a_worker_elsewhere_is_lost_when_its_heartbeat_goes_stale() -> None:
    submitted = _Submitted(JOB, uuid4(), time.time())
    stale = _beat("w1", age_s=MISSED_BEATS * 5.0 + 1, holds=str(submitted.run_id))
    reason = submitted.lost_reason(stale, {"w1": stale}, time.time())
    assert "w1" in reason and "heartbeat" in reason


def test_a_job_held_by_a_dead_process_on_this_host_is_lost_at_once() -> None:
    submitted = _Submitted(JOB, uuid4(), time.time())
    beat = _beat("w1", host=platform.node(), pid=_dead_pid(), holds=str(submitted.run_id))
    assert "stopped" in submitted.lost_reason(beat, {"w1": beat}, time.time())


def test_a_busy_host_delaying_heartbeats_does_not_lose_a_live_local_worker() -> None:
    import os

    submitted = _Submitted(JOB, uuid4(), time.time())
    late = _beat("w1", host=platform.node(), pid=os.getpid(), age_s=600, holds=str(submitted.run_id))
    assert submitted.lost_reason(late, {"w1": late}, time.time()) == ""


def test_a_job_its_restarted_worker_no_longer_holds_is_lost_after_the_missed_beats() -> None:
    submitted = _Submitted(JOB, uuid4(), time.time())
    held = _beat("w1", holds=str(submitted.run_id))
    now = time.time()
    assert submitted.lost_reason(held, {"w1": held}, now) == ""
    restarted = _beat("w1")  # same name, a fresh process: it does not hold the job
    restarted.idle_interval_s = IDLE_BEATS * 5.0  # idle, it beats seldom; the grace is still the busy one
    assert submitted.lost_reason(None, {"w1": restarted}, now + 1) == ""  # a beat may lag
    later = now + 2 + MISSED_BEATS * 5.0
    restarted.beat_unix = later  # it keeps beating, without the job
    reason = submitted.lost_reason(None, {"w1": restarted}, later)
    assert "w1" in reason and "no longer holds" in reason


def test_an_idle_worker_beats_seldom_and_a_busy_one_at_its_interval() -> None:
    """Fifty idle workers beating every 5 s were most of the Prefect server's work per job; an idle
    worker holds nothing to lose, so it beats IDLE_BEATS times as seldom and is lost as much later."""
    idle = _beat("w1", age_s=MISSED_BEATS * 5.0 + 1)
    idle.idle_interval_s = IDLE_BEATS * 5.0
    assert idle.next_beat_in_s == IDLE_BEATS * 5.0 and idle.alive()
    gone = _beat("w1", age_s=MISSED_BEATS * IDLE_BEATS * 5.0 + 1)
    gone.idle_interval_s = IDLE_BEATS * 5.0
    assert not gone.alive()
    busy = _beat("w1", age_s=MISSED_BEATS * 5.0 + 1, holds="a-task-run")
    busy.idle_interval_s = IDLE_BEATS * 5.0
    assert busy.next_beat_in_s == 5.0 and not busy.alive()
    older = _beat("w1", age_s=MISSED_BEATS * 5.0 + 1)  # a worker from before idle beats: one interval
    assert older.next_beat_in_s == 5.0 and not older.alive()


def test_heartbeat_variable_names_are_valid_prefect_variable_names() -> None:
    name = variable_name("GPU Host.1/a")
    assert name.startswith("automl-eval-worker--")
    assert set(name) <= set("abcdefghijklmnopqrstuvwxyz0123456789-_")


def test_the_suite_names_workers_that_refused_to_start_or_run_other_code() -> None:
    code = code_fingerprint()
    refused = _beat("w1", age_s=120)
    refused.problem = "the MLflow server https://10.0.0.1:5000 refused this worker's credential (401)"
    other = _beat("w2")
    other.code = "0" * 64
    same = _beat("w3")
    same.code = code
    assert not refused.alive()  # a worker that refused takes no job, however fresh its beat
    said = worker_warnings([refused, other, same], code)
    assert len(said) == 2
    assert said[0].startswith("worker w1 on elsewhere refused to start 2 min ago") and "401" in said[0]
    assert said[1].startswith("worker w2 on elsewhere runs other code than this suite (fingerprint 0000")
    old = _beat("w4", age_s=PROBLEM_SHOWN_S + 60)
    old.problem = "long ago"
    assert worker_warnings([old], code) == []


def test_a_worker_refuses_a_job_of_a_suite_whose_code_is_not_its_own() -> None:
    assert code_refusal(JobContext(execution={}, problem_type="binary", metric="auc")) is None  # not asked
    same = JobContext(execution={}, problem_type="binary", metric="auc", code=code_fingerprint())
    assert code_refusal(same) is None
    other = JobContext(execution={}, problem_type="binary", metric="auc", code="f" * 64, commit="a" * 40)
    refusal = code_refusal(other)
    assert refusal is not None and refusal.startswith("refused by worker ")
    assert "(ffffffffffff, commit aaaaaaaaaaaa)" in refusal and "--retry-failed" in refusal


def test_task_keys_do_not_depend_on_where_the_checkout_lies() -> None:
    # Prefect's own key hashes the function's code object, its file path included.
    keys = {task.task_key for task in TASKS.values()}
    assert keys == {"team_job-automl_eval_1", "team_gpu_job-automl_eval_1"}

    async def worker() -> HoldingTaskWorker:  # Prefect's task worker is made inside an event loop
        return HoldingTaskWorker(*TASKS.values(), limit=1)

    # A server address that is never called: without one, Prefect's client would start a server.
    # In a thread of its own: an earlier test in the same process may have left an event loop
    # running in this one (asyncio.run refuses then); the settings travel with the copied context.
    with temporary_settings({PREFECT_API_URL: "http://127.0.0.1:9/api"}), \
            concurrent.futures.ThreadPoolExecutor(1) as pool:
        made = pool.submit(contextvars.copy_context().run, asyncio.run, worker()).result(timeout=60)
    # The worker's registry (copies of the tasks) matches the runs by the same keys it subscribes to.
    assert {task.task_key for task in made.tasks} == made.task_keys == keys
