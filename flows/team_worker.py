"""A long-lived team worker: `python -m flows.team_worker --name cpu-1 --kind cpu --limit 2`.

It is a Prefect background task worker: the suite flow hands each job to the server with
``task.delay()``, and this process, subscribed to the server over a websocket, takes up to
`--limit` jobs at once. No Python process starts per job: the worker keeps one warm fork server
(tasks/forkserver.py), so each job is still a fresh forked process of its own under the watchdog
(time, memory, cores, GPUs), exactly as in embedded mode, and all of them end in
``flows.dispatch.run_and_record``. Start more of these, on as many hosts as you like, to scale.

Kinds: a `cpu` worker serves the CPU job task; a `gpu` worker serves the GPU job task, so GPU jobs
reach only hosts with GPUs. A GPU job holds the Prefect global concurrency limit `gpu` (one slot
per GPU of the team) and file locks on its host's devices, and gets exactly those devices.

Every few seconds (AUTOML_EVAL_HEARTBEAT_S, default 5) the worker writes a heartbeat (a Prefect
variable named after it): host, kind, the jobs it holds (their task run ids), jobs done. The
suite reads them to notice a dead worker (`flows.team_dispatch`); `automl-eval team status`
prints them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import platform
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any
from uuid import UUID

from prefect import task
from prefect.client.orchestration import get_client
from prefect.concurrency.sync import concurrency
from prefect.runtime import task_run
from prefect.settings import PREFECT_API_URL
from prefect.task_worker import TaskWorker
from prefect.variables import Variable

from flows.dispatch import JobContext, record_not_run, run_and_record
from tasks.data.versions import data_version
from tasks.errors import UserError
from tasks.gpus import host_devices
from tasks.launch import FORK_SERVER, chosen_launcher
from tasks.plan import Job
from tasks.specs import load_dataset_spec

logger = logging.getLogger("automl_eval.team_worker")

KINDS = ("cpu", "gpu")
GPU_LIMIT = "gpu"  # the Prefect global concurrency limit: one slot per GPU of the team
HEARTBEAT_ENV = "AUTOML_EVAL_HEARTBEAT_S"
DEFAULT_HEARTBEAT_S = 5.0
# A worker whose heartbeat is older than this many of its intervals is taken as gone, with its jobs.
MISSED_BEATS = 6
BEAT_PREFIX = "automl-eval-worker--"
WORKER_NAME_ENV = "AUTOML_EVAL_WORKER_NAME"


@dataclass
class Heartbeat:
    """What a worker says about itself, every interval_s."""

    name: str
    host: str
    kind: str
    pid: int
    limit: int
    running: list[str] = field(default_factory=list)  # task run ids it holds (taken or running)
    done: int = 0
    started_unix: float = 0.0
    beat_unix: float = 0.0
    interval_s: float = DEFAULT_HEARTBEAT_S

    @property
    def lost_after_s(self) -> float:
        return MISSED_BEATS * self.interval_s

    def age_s(self, now: float | None = None) -> float:
        return (now or time.time()) - self.beat_unix

    def alive(self, now: float | None = None) -> bool:
        return self.age_s(now) <= self.lost_after_s


def heartbeat_interval_s() -> float:
    try:
        return max(0.5, float(os.environ.get(HEARTBEAT_ENV) or DEFAULT_HEARTBEAT_S))
    except ValueError:
        return DEFAULT_HEARTBEAT_S


def variable_name(worker: str) -> str:
    """Prefect variable names allow lowercase letters, digits, '-' and '_' only."""
    return BEAT_PREFIX + re.sub(r"[^a-z0-9_-]", "-", worker.lower())


def read_heartbeats(client: Any) -> list[Heartbeat]:
    """Every worker's last heartbeat (a sync Prefect client)."""
    beats = []
    for variable in client.read_variables():
        if variable.name.startswith(BEAT_PREFIX) and isinstance(variable.value, dict):
            try:
                beats.append(Heartbeat(**variable.value))
            except TypeError:  # written by another version: ignore it
                continue
    return sorted(beats, key=lambda beat: beat.name)


# ---------------------------------------------------------------- the job tasks it serves


def _identity() -> dict[str, Any]:
    return {"worker": os.environ.get(WORKER_NAME_ENV) or platform.node(), "host": platform.node(),
            "pid": os.getpid()}


def _still_ours() -> bool:
    """Whether the suite still waits for this task run (it marks a run it gave up on as final)."""
    if not task_run.get_id():
        return True
    try:
        with get_client(sync_client=True) as client:
            state = client.read_task_run(UUID(task_run.get_id())).state
    except Exception:  # the server is unreachable: record; the store keeps one run per key
        return True
    return state is None or not state.is_final()


def data_refusal(job: Job) -> str | None:
    """Why this host must not run the job: its copy of the dataset is not the bytes the suite planned
    with (another md5, or none); a job is never run, nor recorded, on other data than its key says."""
    try:
        found = data_version(load_dataset_spec(job.dataset))
    except (UserError, FileNotFoundError):
        found = "missing"
    if found == job.data_version:
        return None
    identity = _identity()
    return (f"refused by worker {identity['worker']} on {identity['host']}: its copy of dataset "
            f"{job.dataset} hashes to {found}, the suite planned with {job.data_version}; run "
            f"`automl-eval datasets pull` on {identity['host']} (the team's DVC remote) and retry.")


def _run_here(job_dict: dict[str, Any], context: dict[str, Any], devices: list[int] | None) -> dict[str, Any]:
    started = time.time()
    job = Job.from_dict(job_dict)
    refusal = data_refusal(job)
    if refusal is not None:
        logger.error("%s: %s", job.label, refusal)
        result, outcome = record_not_run(job, JobContext(**context), refusal, status="failed")
    else:
        result, outcome = run_and_record(job, JobContext(**context), devices, still_ours=_still_ours)
    # A plain dict through Prefect's result storage; the suite reads it back with JobOutcome.from_dict.
    return {**outcome.to_dict(), **_identity(), "started_unix": started, "finished_unix": time.time(),
            "result": asdict(result)}


@task(name="team-job", task_run_name="{label}")
def run_team_job(job: dict[str, Any], context: dict[str, Any], label: str, attempt: str) -> dict[str, Any]:
    """One CPU job on this worker. `attempt` is unique per submission: Prefect caches a background
    task's result by its inputs, and a job submitted again must run again."""
    return _run_here(job, context, None)


@task(name="team-gpu-job", task_run_name="{label}")
def run_team_gpu_job(job: dict[str, Any], context: dict[str, Any], label: str,
                     attempt: str) -> dict[str, Any]:
    """One GPU job on this (GPU) worker: a slot of the team's `gpu` limit, then this host's devices."""
    gpus = int(job["budget"]["gpus"])
    with concurrency(GPU_LIMIT, occupy=gpus, strict=True), host_devices(gpus) as devices:
        # No devices here ([]): run_and_record's runner records the job as skipped with the reason.
        return _run_here(job, context, devices)


TASKS = {"cpu": run_team_job, "gpu": run_team_gpu_job}


# ---------------------------------------------------------------- the worker process


class HoldingTaskWorker(TaskWorker):
    """Prefect's task worker, also telling which task runs it took but has not started yet.

    At its limit it still takes one more from the server and waits for a free slot; the
    heartbeat must list that one too, or a worker dying then would lose it unnoticed. Taking one
    sends a heartbeat at once (`taken`), so a host that dies in its job's first second is still
    named as the one that held it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.waiting: set[UUID] = set()
        self.taken = asyncio.Event()

    async def _acquire_token(self, task_run_id: UUID) -> bool:
        self.waiting.add(task_run_id)
        self.taken.set()
        try:
            return await super()._acquire_token(task_run_id)
        finally:
            self.waiting.discard(task_run_id)


async def _beat(worker: Any, beat: Heartbeat) -> None:
    while True:
        held = {run_id for runs in worker.in_flight_task_runs.values() for run_id in runs} | worker.waiting
        beat.running = sorted(str(run_id) for run_id in held)
        beat.done = sum(worker.finished_task_runs.values())
        beat.beat_unix = time.time()
        try:
            await Variable.aset(variable_name(beat.name), asdict(beat), overwrite=True)
        except Exception as exc:  # the server is busy or away: the next beat tries again
            logger.warning("heartbeat not sent: %s", exc)
        with contextlib.suppress(TimeoutError):  # the interval, or sooner when a job is taken
            await asyncio.wait_for(worker.taken.wait(), timeout=beat.interval_s)
        worker.taken.clear()


async def serve(name: str, kind: str, limit: int) -> None:
    if chosen_launcher() == "warm":
        FORK_SERVER.warm_up()  # one warm fork server for every job of this worker
    worker = HoldingTaskWorker(TASKS[kind], limit=limit)
    beat = Heartbeat(name=name, host=platform.node(), kind=kind, pid=os.getpid(), limit=limit,
                     started_unix=time.time(), interval_s=heartbeat_interval_s())
    beating = asyncio.create_task(_beat(worker, beat))
    try:
        await worker.start()
    finally:
        beating.cancel()
        FORK_SERVER.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.team_worker", description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="this worker's name (unique in the team)")
    parser.add_argument("--kind", choices=KINDS, default="cpu", help="cpu: CPU jobs; gpu: GPU jobs")
    parser.add_argument("--limit", type=int, default=1, help="jobs at once (its cores / a job's cores)")
    args = parser.parse_args(argv)
    if args.limit < 1:
        parser.error("--limit must be at least 1")
    os.environ[WORKER_NAME_ENV] = args.name
    if not PREFECT_API_URL.value():
        print("a team worker needs a Prefect server: set PREFECT_API_URL (source .team/client.env).",
              file=sys.stderr)
        return 2
    asyncio.run(serve(args.name, args.kind, args.limit))
    return 0


if __name__ == "__main__":
    sys.exit(main())
