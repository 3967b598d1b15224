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

Every few seconds (AUTOML_EVAL_HEARTBEAT_S, default 5) while it holds a job, and IDLE_BEATS times
as seldom while it holds none, the worker writes a heartbeat (a Prefect variable named after it):
host, kind, the jobs it holds (their task run ids), jobs done. The suite reads them to notice a dead
worker (`flows.team_dispatch`); `automl-eval team status` prints them. An idle worker has nothing to
lose, so its beats are spaced out: fifty idle workers beating every 5 s were most of the Prefect
server's work per job (docs/team.md, "Measured").
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

import httpx
from prefect import task
from prefect.blocks.core import Block
from prefect.client.orchestration import PrefectClient, get_client
from prefect.client.schemas.actions import VariableCreate, VariableUpdate
from prefect.concurrency.sync import concurrency
from prefect.runtime import task_run
from prefect.settings import PREFECT_API_URL, PREFECT_TASKS_SCHEDULING_DEFAULT_STORAGE_BLOCK
from prefect.task_worker import TaskWorker

from flows.dispatch import JobContext, record_not_run, run_and_record
from flows.scheduling_storage import cache_scheduling_storage
from tasks.code_version import SHOWN_CHARS, code_fingerprint
from tasks.data.versions import data_version
from tasks.errors import UserError
from tasks.gpus import host_devices
from tasks.launch import FORK_SERVER, chosen_launcher
from tasks.plan import Job
from tasks.specs import load_dataset_spec
from tasks.tracking import store

logger = logging.getLogger("automl_eval.team_worker")

KINDS = ("cpu", "gpu")
GPU_LIMIT = "gpu"  # the Prefect global concurrency limit: one slot per GPU of the team
HEARTBEAT_ENV = "AUTOML_EVAL_HEARTBEAT_S"
DEFAULT_HEARTBEAT_S = 5.0
# A worker whose heartbeat is older than this many of its intervals is taken as gone, with its jobs.
MISSED_BEATS = 6
# An idle worker beats this many times as seldom (and is taken as gone as much later). Taking a job
# beats at once, so a job is never held under the idle interval.
IDLE_BEATS = 6
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
    interval_s: float = DEFAULT_HEARTBEAT_S  # while it holds a job
    idle_interval_s: float = 0.0  # while it holds none (0: interval_s, as workers before it beat)
    code: str = ""  # tasks.code_version.code_fingerprint() of its checkout
    problem: str = ""  # why it refused to serve (it stopped at start); '' while it serves

    @property
    def next_beat_in_s(self) -> float:
        """When it beats next, by what it holds now."""
        return self.interval_s if self.running or not self.idle_interval_s else self.idle_interval_s

    @property
    def lost_after_s(self) -> float:
        return MISSED_BEATS * self.next_beat_in_s

    def age_s(self, now: float | None = None) -> float:
        return (now or time.time()) - self.beat_unix

    def alive(self, now: float | None = None) -> bool:
        return not self.problem and self.age_s(now) <= self.lost_after_s


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


def code_refusal(context: JobContext) -> str | None:
    """Why this worker must not run a job of this suite: its checkout's code is not the suite's (another
    commit, or changes the suite's has not); it would record the job made by other code."""
    if not context.code or context.code == code_fingerprint():
        return None
    identity = _identity()
    commit = f", commit {context.commit[:SHOWN_CHARS]}" if context.commit else ""
    return (f"refused by worker {identity['worker']} on {identity['host']}: its code (tasks/ and flows/, "
            f"fingerprint {code_fingerprint()[:SHOWN_CHARS]}) is not the suite's "
            f"({context.code[:SHOWN_CHARS]}{commit}); make its checkout the suite's, restart the worker, "
            "and run the suite again with --retry-failed.")


def _run_here(job_dict: dict[str, Any], context_dict: dict[str, Any],
              devices: list[int] | None) -> dict[str, Any]:
    started = time.time()
    job, context = Job.from_dict(job_dict), JobContext(**context_dict)
    refusal = code_refusal(context) or data_refusal(job)
    if refusal is not None:
        logger.error("%s: %s", job.label, refusal)
        result, outcome = record_not_run(job, context, refusal, status="failed")
    else:
        result, outcome = run_and_record(job, context, devices, still_ours=_still_ours)
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
# The keys the server matches submissions and workers by. Prefect derives a task's key from its code
# object, file path and line included: a worker whose checkout lies elsewhere, or whose file moved a
# line, would never be offered a job, and nobody would say why. A stable key puts every worker in
# reach, and the worker itself refuses a job its code does not match (code_refusal). Raise the
# version when these tasks' parameters change: older workers then take none of the new jobs.
TASK_PROTOCOL = 1
for _task in TASKS.values():
    _task.task_key = f"{_task.name.replace('-', '_')}-automl_eval_{TASK_PROTOCOL}"


# ---------------------------------------------------------------- the worker process


class HoldingTaskWorker(TaskWorker):
    """Prefect's task worker, also telling which task runs it took but has not started yet.

    At its limit it still takes one more from the server and waits for a free slot; the
    heartbeat must list that one too, or a worker dying then would lose it unnoticed. Taking one
    sends a heartbeat at once (`taken`), so a host that dies in its job's first second is still
    named as the one that held it."""

    def __init__(self, *tasks: Any, **kwargs: Any) -> None:
        super().__init__(*tasks, **kwargs)
        # Its registry holds copies (with_options), which get Prefect's own key again: give them ours.
        for copy, original in zip(self.tasks, tasks, strict=True):
            copy.task_key = original.task_key
        self.waiting: set[UUID] = set()
        self.taken = asyncio.Event()

    async def _acquire_token(self, task_run_id: UUID) -> bool:
        self.waiting.add(task_run_id)
        self.taken.set()
        try:
            return await super()._acquire_token(task_run_id)
        finally:
            self.waiting.discard(task_run_id)


async def write_beat(client: PrefectClient, beat: Heartbeat) -> None:
    """One PATCH of the worker's variable; a POST the first time (the server answers 404 then).

    Prefect's `Variable.aset` reads the variable, writes it and reads it back, each on a client of its
    own: three requests and a TLS handshake per beat, the largest share of a waiting worker's cost to
    the Prefect server."""
    name = variable_name(beat.name)
    try:
        await client.update_variable(VariableUpdate(name=name, value=asdict(beat)))
    except httpx.HTTPStatusError as exc:
        if exc.response.status_code != 404:
            raise
        await client.create_variable(VariableCreate(name=name, value=asdict(beat)))


async def _beat(worker: Any, beat: Heartbeat) -> None:
    async with get_client() as client:  # one connection for every beat of this worker
        while True:
            in_flight = worker.in_flight_task_runs.values()
            held = {run_id for runs in in_flight for run_id in runs} | worker.waiting
            beat.running = sorted(str(run_id) for run_id in held)
            beat.done = sum(worker.finished_task_runs.values())
            beat.beat_unix = time.time()
            try:
                await write_beat(client, beat)
            except Exception as exc:  # the server is busy or away: the next beat tries again
                logger.warning("heartbeat not sent: %s", exc)
            with contextlib.suppress(TimeoutError):  # the interval, or sooner when a job is taken
                await asyncio.wait_for(worker.taken.wait(), timeout=beat.next_beat_in_s)
            worker.taken.clear()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]


def tracking_problem() -> str:
    """Why this worker could not record a job in the team's MLflow, or '': asked once, at start, so a
    wrong credential or an unreachable server refuses the worker, not each job it would take."""
    uri = store.tracking_uri()
    if not store.is_server():
        return ""
    try:
        store.client().search_experiments(max_results=1)
    except Exception as exc:
        text = str(exc)
        if "401" in text or "403" in text or "Unauthorized" in text or "Permission" in text:
            return (f"the MLflow server {uri} refused this worker's credential ({_first_line(exc)}); set "
                    "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD as the team's client.env does.")
        return (f"cannot reach the MLflow server {uri} ({_first_line(exc)}); check that it runs and that "
                "this host reaches it, then start the worker again.")
    return ""


# A store just started may refuse a moment longer than its buckets take to appear: a worker once
# refused to start on "Access Denied" under load, its buckets already served. A probe that fails fast
# is tried again for this long before the worker refuses; one that times out (50 to 80 s, the block's
# bound) is not tried again.
PROBE_PATIENCE_S = 30.0
PROBE_PAUSE_S = 3.0


async def storage_problem(name: str) -> str:
    """Why this worker could not read a job's parameters or hand back its result, or '': a probe
    written to and read back from the team's result storage (a Prefect block), when one is set."""
    slug = PREFECT_TASKS_SCHEDULING_DEFAULT_STORAGE_BLOCK.value()
    if not slug:
        return ""  # one host: the results folder (PREFECT_LOCAL_STORAGE_PATH)
    started = time.monotonic()
    while True:
        problem = await _probe_storage(slug, name)
        if not problem or time.monotonic() - started >= PROBE_PATIENCE_S:
            return problem
        logger.warning("%s (trying again for up to %.0f s)", problem, PROBE_PATIENCE_S)
        await asyncio.sleep(PROBE_PAUSE_S)


async def _probe_storage(slug: str, name: str) -> str:
    probe = f"probes/{name}"
    try:
        storage: Any = await Block.aload(slug)  # a file system block (remote-file-system, local-file-system)
        await storage.awrite_path(probe, b"ok")
        if await storage.aread_path(probe) != b"ok":
            return f"the team's result storage (block {slug}) gave back another probe than it was given."
    except Exception as exc:
        if isinstance(exc, ValueError) and "Unable to find block document" in str(exc):
            return (f"the result storage block {slug} is not on the Prefect server; save it there (the "
                    "cluster command does) or unset PREFECT_TASKS_SCHEDULING_DEFAULT_STORAGE_BLOCK.")
        return (f"cannot use the team's result storage (block {slug}): {_first_line(exc)}; check the object "
                "store (`automl-eval cluster status` on a cluster) and this host's route to it.")
    return ""


async def refuse(beat: Heartbeat, problem: str) -> None:
    """Say why in the worker's log and in its heartbeat (suites starting later read it), then stop."""
    logger.error("worker %s on %s refuses to serve: %s", beat.name, beat.host, problem)
    beat.problem, beat.beat_unix = problem, time.time()
    try:
        async with get_client() as client:
            await write_beat(client, beat)
    except Exception as exc:  # the Prefect server refused or is away: the log is all there is
        logger.error("its heartbeat could not say so either: %s", _first_line(exc))


async def serve(name: str, kind: str, limit: int) -> int:
    beat = Heartbeat(name=name, host=platform.node(), kind=kind, pid=os.getpid(), limit=limit,
                     started_unix=time.time(), interval_s=heartbeat_interval_s(),
                     idle_interval_s=IDLE_BEATS * heartbeat_interval_s(), code=code_fingerprint())
    cache_scheduling_storage()  # the result-storage block: read once, not once per job
    problem = tracking_problem() or await storage_problem(name)
    if problem:
        await refuse(beat, problem)
        return 2
    if chosen_launcher() == "warm":
        FORK_SERVER.warm_up()  # one warm fork server for every job of this worker
    worker = HoldingTaskWorker(TASKS[kind], limit=limit)
    beating = asyncio.create_task(_beat(worker, beat))
    try:
        # prefect's sync_compatible decorator types start() as "a coroutine or None"; awaited, it is one.
        await worker.start()  # type: ignore[misc]
    finally:
        beating.cancel()
        FORK_SERVER.shutdown()
    return 0


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
    return asyncio.run(serve(args.name, args.kind, args.limit))


if __name__ == "__main__":
    sys.exit(main())
