"""One supervisor for every child process of the harness: a job's worker and a post-job evaluation.

It starts the child (the job's worker warm from the fork server or cold, tasks/launch.py; an
evaluation cold), gives it its cores' thread counts and only its GPUs (CUDA_VISIBLE_DEVICES),
and watches it until it exits: every SAMPLE_INTERVAL_S it sums the RSS of the child's whole
process tree (tasks/resources.py) and samples its GPUs. Past the time limit, or once the tree's
RSS passes the memory limit (plus what the child declares as the harness's own share), it kills
the whole tree; whatever exits or not, it then ends the child's process group and every process
once seen in its tree (a crashed worker's JVM). The child's side of the contract is
tasks/child_process.py.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tasks import paths, resources
from tasks.launch import WorkerProcess, python_environment, start_cold, start_worker

SAMPLE_INTERVAL_S = 0.25
VerdictStatus = Literal["timeout", "memory"]


@dataclass(frozen=True)
class Verdict:
    """Why the supervisor killed a child: the status it gets, and the sentence saying why."""

    status: VerdictStatus
    reason: str


@dataclass(frozen=True)
class Limits:
    """Where the supervisor kills a child, and how it says so."""

    time_s: float  # seconds from the start
    memory_mb: float  # of the whole process tree's RSS
    timeout_reason: str
    memory_reason: Callable[[float, float], str]  # (tree RSS MB, allowance MB) -> the sentence
    # MB granted on top of memory_mb (a worker's loaded data), asked at each sample until non-zero.
    allowance_mb: Callable[[], float] = lambda: 0.0


@dataclass(frozen=True)
class Child:
    """How to start one child: `python -m MODULE FOLDER`, its output appended to `log`."""

    module: str
    folder: Path
    log: Path
    cwd: Path
    threads: int  # each thread pool's size (its cores)
    # NVML indices: the child sees only these ([]: none) and they are sampled; None: it inherits
    # this process's view and nothing is sampled (an evaluation, after its job's lease ended).
    gpus: list[int] | None = None
    python: Path | None = None  # another interpreter (a framework environment's); None: this one
    warm: bool = False  # may fork from the warm server (only the job's worker is preloaded there)


@dataclass
class Supervised:
    """What the supervisor saw of one child."""

    returncode: int
    verdict: Verdict | None  # set when the supervisor killed it
    sampler: resources.ProcessTreeSampler
    launcher: str  # warm (forked from the fork server) or cold (a fresh interpreter)
    exited_unix: float  # when the supervisor saw the exit
    wall_s: float
    gpu_costs: dict[str, float] = field(default_factory=dict)
    gpu_samples: list[tuple[float, float, float]] = field(default_factory=list)


def child_environment(threads: int, gpu_devices: list[int] | None) -> dict[str, str]:
    """A supervised child's environment: its thread pools held to `threads`, only its GPUs visible
    (all of this process's when `gpu_devices` is None)."""
    env = python_environment(threads)
    if gpu_devices is not None:
        # NVML and CUDA number devices alike only in PCI bus order.
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(d) for d in gpu_devices)
    env["AUTOML_EVAL_HOME"] = str(paths.project_root())
    return env


def start(child: Child) -> tuple[WorkerProcess, str]:
    """Start the child; returns it and how it started (warm or cold)."""
    env = child_environment(child.threads, child.gpus)
    if child.warm:
        return start_worker(child.folder, env, child.log, child.python)
    return start_cold(child.folder, env, child.log, child.python, module=child.module, cwd=child.cwd), "cold"


def supervise(child: Child, limits: Limits) -> Supervised:
    """Start `child` and watch it until it exits or is killed at its limits."""
    verdict: Verdict | None = None
    allowance_mb = 0.0
    gpu_sampler = resources.GpuSampler(child.gpus) if child.gpus else None
    started = time.monotonic()
    process, launcher = start(child)
    sampler = resources.ProcessTreeSampler(process.pid)
    if gpu_sampler:
        gpu_sampler.pid = process.pid  # its GPU memory: the per-process figures of this tree
        gpu_sampler.__enter__()
    try:
        while True:
            # Sample first: a child shorter than one interval still leaves a sample in its series.
            rss_mb = sampler.sample()
            allowance_mb = allowance_mb or limits.allowance_mb()
            if rss_mb > limits.memory_mb + allowance_mb:
                verdict = Verdict("memory", limits.memory_reason(rss_mb, allowance_mb))
            elif time.monotonic() - started > limits.time_s:
                verdict = Verdict("timeout", limits.timeout_reason)
            if verdict:
                resources.kill_tree(process.pid)
                process.wait()
                break
            try:
                # Wait for the exit itself (never judge by poll() when output closes).
                process.wait(timeout=SAMPLE_INTERVAL_S)
                break
            except subprocess.TimeoutExpired:
                pass
    finally:
        exited_unix = time.time()
        if process.poll() is None:  # the supervisor itself is being interrupted
            resources.kill_tree(process.pid)
            process.wait()
        # Whatever the child started and left behind goes too: its process group (a worker leaves
        # without waiting for helpers, an evaluation may leave a server) and processes once seen
        # in its tree (a crashed worker's JVM, re-parented away from it).
        resources.kill_group(process.pid)
        leftovers = sampler.leftovers()
        if leftovers:
            resources.kill_tree(process.pid, also=leftovers)
        if gpu_sampler:
            gpu_sampler.__exit__(None, None, None)
    wall_s = time.monotonic() - started
    gpu_costs = gpu_sampler.summary() if gpu_sampler else {}
    if gpu_costs:  # GPU-seconds: the devices were the job's for its whole wall time
        gpu_costs["gpu_s"] = wall_s * len(child.gpus or [])
    return Supervised(
        returncode=process.wait(), verdict=verdict, sampler=sampler, launcher=launcher,
        exited_unix=exited_unix, wall_s=wall_s,
        gpu_costs=gpu_costs,
        gpu_samples=gpu_sampler.series.samples if gpu_sampler else [],
    )

