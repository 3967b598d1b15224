"""The job's GPU memory is its own: NVML's per-process usage summed over the job's process tree, with
the device-wide "used" figure beside it. This host has no GPU, so NVML is a fake module object (the
issue allows one for NVML); the process tree is real (a worker with a child, as a loader worker)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from types import SimpleNamespace
from typing import Any

import psutil
import pytest

from tasks import resources
from tasks.vocabulary import COST_METRICS

MB = 2**20
FOREIGN_MB = 5000  # another job's process on the same device


class FakeNvml:
    """nvidia-ml-py's calls the sampler makes, answering for one device whose processes are given."""

    def __init__(self, processes: list[tuple[int, int | None]], device_used_mb: int) -> None:
        self.processes = processes  # (pid, used bytes or None)
        self.device_used_mb = device_used_mb
        self.initialised = 0

    def nvmlInit(self) -> None:  # noqa: N802 - NVML's names
        self.initialised += 1

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.initialised -= 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:  # noqa: N802
        return f"device{index}"

    def nvmlDeviceGetUtilizationRates(self, handle: str) -> Any:  # noqa: N802
        return SimpleNamespace(gpu=70)

    def nvmlDeviceGetMemoryInfo(self, handle: str) -> Any:  # noqa: N802
        return SimpleNamespace(used=self.device_used_mb * MB, total=80_000 * MB)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: str) -> list[Any]:  # noqa: N802
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in self.processes]


@pytest.fixture
def job_tree():  # noqa: ANN201 - (worker pid, its child's pid)
    # A worker that starts a child of its own (as a DataLoader worker) and waits.
    code = ("import subprocess, sys, time; "
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); "
            "print(child.pid, flush=True); time.sleep(30)")
    worker = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    child_pid = int(worker.stdout.readline())
    yield worker.pid, child_pid
    resources.kill_tree(worker.pid)
    worker.wait()


def test_the_job_memory_sums_its_tree_and_leaves_other_processes_out(job_tree, monkeypatch) -> None:  # noqa: ANN001
    worker_pid, child_pid = job_tree
    assert child_pid in {p.pid for p in psutil.Process(worker_pid).children(recursive=True)}
    fake = FakeNvml([(worker_pid, 900 * MB), (child_pid, 100 * MB), (os.getpid(), FOREIGN_MB * MB),
                     (1, 7 * MB), (child_pid + 100_000, None)], device_used_mb=7000)
    monkeypatch.setattr(resources, "_nvml", lambda: fake)
    with resources.GpuSampler([0], interval_s=0.01, pid=worker_pid) as sampler:
        deadline = time.monotonic() + 5
        while len(sampler.series.samples) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    summary = sampler.summary()
    assert summary["gpu_mem_peak_mb"] == pytest.approx(1000.0)  # the worker and its child, nothing else
    assert summary["gpu_device_used_mem_peak_mb"] == pytest.approx(7000.0)  # the device's, named so
    assert summary["gpu_util_mean_pct"] == pytest.approx(70.0)
    assert {sample[2] for sample in sampler.series.samples} == {1000.0}  # the series is the job's own
    assert fake.initialised == 0
    assert {"gpu_mem_peak_mb", "gpu_device_used_mem_peak_mb", "gpu_s"} <= set(COST_METRICS)


def test_a_job_nvml_attributes_nothing_to_has_no_own_figure(job_tree, monkeypatch) -> None:  # noqa: ANN001
    worker_pid, _ = job_tree
    fake = FakeNvml([(os.getpid(), FOREIGN_MB * MB)], device_used_mb=FOREIGN_MB)
    monkeypatch.setattr(resources, "_nvml", lambda: fake)
    with resources.GpuSampler([0], interval_s=0.01, pid=worker_pid) as sampler:
        deadline = time.monotonic() + 5
        while not sampler.series.samples and time.monotonic() < deadline:
            time.sleep(0.01)
    summary = sampler.summary()
    assert "gpu_mem_peak_mb" not in summary  # not zero: unknown (none held, or another pid namespace)
    assert summary["gpu_device_used_mem_peak_mb"] == pytest.approx(FOREIGN_MB)
