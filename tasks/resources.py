"""What a job costs and what the host has: process-tree CPU/RSS, GPUs (nvidia-ml-py), cores.

The job's process tree is the worker and everything it starts (H2O's JVM, joblib and Ray
workers); its RSS is summed over the live tree at each sample, and CPU seconds add up every
process ever seen. GPU figures come from NVML for exactly the job's devices; a host without an
NVIDIA GPU or driver says so instead of reporting zeros.
"""

from __future__ import annotations

import bisect
import contextlib
import math
import os
import platform
import signal
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psutil

if TYPE_CHECKING:
    import pandas as pd

NO_GPU = "no NVIDIA GPU/driver found"
# A job's resource samples as a small time series (resources.csv in its job folder).
SERIES_FILE = "resources.csv"
SERIES_TIME = "elapsed_s"  # seconds since the worker's launch, as in the job's timeline
SERIES_STAGE = "stage"  # the job's stage at the sample (tasks.worker's stages)
SERIES_COLUMNS = ("rss_mb", "cpu_pct", "gpu_util_pct", "gpu_mem_mb")
MAX_SERIES_SAMPLES = 2000  # a long job keeps every other sample once it has this many


class SampleSeries:
    """Samples kept evenly spaced and few: past MAX_SERIES_SAMPLES every other one is dropped and
    from then on only every other one is kept, so a long job's series stays small."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float, float]] = []
        self._stride = 1
        self._seen = 0

    def add(self, sample: tuple[float, float, float]) -> None:
        if self._seen % self._stride == 0:
            self.samples.append(sample)
            if len(self.samples) > MAX_SERIES_SAMPLES:
                del self.samples[1::2]
                self._stride *= 2
        self._seen += 1


# ------------------------------------------------------------------------------ process tree


def tree_processes(pid: int) -> list[psutil.Process]:
    """The process and all its descendants that are alive now."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


class ProcessTreeSampler:
    """Samples one process tree: current and peak RSS, CPU seconds of every process seen."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_rss_mb = 0.0
        self._cpu_by_process: dict[tuple[int, float], float] = {}  # (pid, create_time) -> cpu s
        self.series = SampleSeries()  # (unix time, RSS MB, CPU s so far)

    def sample(self) -> float:
        """Sum of the tree's RSS now, in MB; also updates the peak and the CPU seconds."""
        rss_bytes, seen = 0, False
        for process in tree_processes(self.pid):
            try:
                with process.oneshot():
                    rss_bytes += process.memory_info().rss
                    times = process.cpu_times()
                    identity = (process.pid, process.create_time())
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            # children_* holds CPU of descendants already exited and reaped by this process.
            cpu = times.user + times.system + times.children_user + times.children_system
            self._cpu_by_process[identity] = max(cpu, self._cpu_by_process.get(identity, 0.0))
            seen = True
        rss_mb = rss_bytes / 2**20
        self.peak_rss_mb = max(self.peak_rss_mb, rss_mb)
        if seen:  # a tree already gone is not a job using no memory
            self.series.add((time.time(), rss_mb, self.cpu_s))
        return rss_mb

    @property
    def cpu_s(self) -> float:
        return sum(self._cpu_by_process.values())

    def leftovers(self) -> list[psutil.Process]:
        """Processes once seen in the tree that still live (the same process, not a reused pid).

        H2O starts its JVM in a session of its own: if the worker dies without stopping it, the
        JVM is re-parented away from the tree and its process group, and only this list finds it.
        """
        alive = []
        for pid, created in self._cpu_by_process:
            try:
                process = psutil.Process(pid)
                if process.create_time() == created and process.status() != psutil.STATUS_ZOMBIE:
                    alive.append(process)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return alive


class SampledTree:
    """A process tree's CPU seconds and peak RSS over a `with` block, sampled on a thread every
    `every_s` (psutil): the serving evaluation's server under load."""

    def __init__(self, pid: int, every_s: float = 0.25) -> None:
        self.sampler = ProcessTreeSampler(pid) if pid else None
        self.every_s = every_s
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.cpu_start = 0.0
        self.started = self.wall_s = 0.0

    def __enter__(self) -> SampledTree:
        if self.sampler is not None:
            self.sampler.sample()
            self.cpu_start = self.sampler.cpu_s
        self.started = time.monotonic()
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop_event.set()
        self.thread.join()
        if self.sampler is not None:
            self.sampler.sample()
        self.wall_s = time.monotonic() - self.started

    def _run(self) -> None:
        while not self.stop_event.wait(self.every_s):
            if self.sampler is not None:
                self.sampler.sample()

    @property
    def cpu_s(self) -> float:
        """CPU seconds the tree used within the block (NaN when it was never seen)."""
        if self.sampler is None or not self.sampler.peak_rss_mb:
            return math.nan
        return self.sampler.cpu_s - self.cpu_start

    @property
    def peak_rss_mb(self) -> float:
        return self.sampler.peak_rss_mb if self.sampler is not None and self.sampler.peak_rss_mb else math.nan

    def figures(self) -> tuple[float, float]:
        """(CPU % of one core over the block, peak RSS MB); NaN for a tree never seen."""
        return 100 * self.cpu_s / max(self.wall_s, 1e-9), self.peak_rss_mb


def kill_group(pgid: int) -> None:
    """SIGKILL what is left of a process group (a worker leads its own). Linux does not hand out a
    pid still in use as a group id, so the group of a finished worker is still its own."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def kill_tree(pid: int, also: list[psutil.Process] | None = None) -> None:
    """SIGKILL the process, its descendants, its process group and `also` (a JVM included)."""
    victims = tree_processes(pid) + list(also or [])
    for process in victims:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    # The worker leads its own session/process group: anything that re-parented itself away
    # from the tree but kept the group goes too.
    kill_group(pid)
    _wait_until_dead(victims, timeout_s=5.0)


def _dead(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_until_dead(processes: list[psutil.Process], timeout_s: float) -> None:
    """Wait until each process has exited. A zombie counts as exited: it holds no memory or CPU,
    and only its parent can reap it (for an orphaned JVM that is init, which may take seconds;
    psutil.wait_procs would wait for that too)."""
    deadline = time.monotonic() + timeout_s
    remaining = list(processes)
    while remaining and time.monotonic() < deadline:
        remaining = [process for process in remaining if not _dead(process)]
        if remaining:
            time.sleep(0.02)


# ------------------------------------------------------------------------------ cores


class CorePool:
    """Hands out CPU cores to concurrent jobs, least-used cores first, so jobs spread out.

    When more cores are asked for than the machine has free, cores are shared rather than the
    job waiting: the budget's thread count still holds, only the affinity overlaps.
    """

    def __init__(self, cores: list[int] | None = None) -> None:
        self.cores = sorted(cores if cores is not None else os.sched_getaffinity(0))
        self._leases: Counter[int] = Counter()
        self._lock = threading.Lock()

    def acquire(self, count: int) -> list[int]:
        with self._lock:
            chosen = sorted(self.cores, key=lambda core: (self._leases[core], core))[: max(1, count)]
            self._leases.update(chosen)
            return sorted(chosen)

    def release(self, cores: list[int]) -> None:
        with self._lock:
            self._leases.subtract(cores)


CORE_POOL = CorePool()


# ------------------------------------------------------------------------------ GPUs


@dataclass
class GpuInventory:
    available: bool
    reason: str = ""  # why not, when not available
    devices: list[dict[str, Any]] = field(default_factory=list)  # index, name, memory_total_mb


def _nvml() -> Any:
    import pynvml  # from nvidia-ml-py

    return pynvml


def gpu_inventory() -> GpuInventory:
    """The host's NVIDIA GPUs, or why there are none (no library, no driver, no device)."""
    try:
        nvml = _nvml()
        nvml.nvmlInit()
    except ImportError:
        return GpuInventory(False, f"{NO_GPU} (nvidia-ml-py is not installed)")
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return GpuInventory(False, f"{NO_GPU} ({exc})")
    try:
        devices = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            name = nvml.nvmlDeviceGetName(handle)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            devices.append({
                "index": index,
                "name": name.decode() if isinstance(name, bytes) else str(name),
                "memory_total_mb": memory.total / 2**20,
            })
    finally:
        nvml.nvmlShutdown()
    if not devices:
        return GpuInventory(False, f"{NO_GPU} (the driver reports 0 devices)")
    return GpuInventory(True, devices=devices)


def job_gpu_memory_mb(nvml: Any, handles: list[Any], pids: set[int]) -> float | None:
    """The GPU memory NVML attributes to the given processes on these devices, summed (MB); None
    where it attributes none to them (they hold none yet, or the driver lists processes of another
    pid namespace, as inside some containers)."""
    total, matched = 0.0, False
    for handle in handles:
        for process in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
            used = getattr(process, "usedGpuMemory", None)  # None: not available (MIG, some drivers)
            if process.pid in pids and used is not None:
                total += used / 2**20
                matched = True
    return total if matched else None


class GpuSampler:
    """Samples utilisation and memory of the given NVML device indices in a thread.

    The job's GPU memory is its own: NVML's per-process usage summed over the job's process tree
    (`pid` and its descendants, loader workers included), so another job on a shared device does
    not inflate it. The device-wide "used" figure is recorded beside it, named as such."""

    def __init__(self, indices: list[int], interval_s: float = 0.5, pid: int | None = None) -> None:
        self.indices = indices
        self.interval_s = interval_s
        self.pid = pid  # the job's process, set once it started (None: no per-process figure)
        self._util: list[float] = []
        self._peak_device_used_mb = 0.0
        self._peak_job_mb: float | None = None
        self.series = SampleSeries()  # (unix time, mean util %, the job's own MB, 0 where none)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpu-sampler", daemon=True)

    def __enter__(self) -> GpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        nvml = _nvml()
        nvml.nvmlInit()
        try:
            handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in self.indices]
            while not self._stop.is_set():
                self.sample(nvml, handles)
                self._stop.wait(self.interval_s)
        finally:
            nvml.nvmlShutdown()

    def sample(self, nvml: Any, handles: list[Any]) -> None:
        """One sample of the devices and of the job's processes on them."""
        utils, used_mb = [], 0.0
        for handle in handles:
            utils.append(float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu))
            used_mb += nvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20
        job_mb = None
        if self.pid is not None:
            pids = {process.pid for process in tree_processes(self.pid)}
            try:
                job_mb = job_gpu_memory_mb(nvml, handles, pids) if pids else None
            except Exception:  # noqa: BLE001 - NVMLError_NotSupported: no per-process accounting here
                job_mb = None
        # The job's utilisation is the mean over its devices at this instant.
        self._util.append(sum(utils) / len(utils))
        self._peak_device_used_mb = max(self._peak_device_used_mb, used_mb)
        if job_mb is not None:
            self._peak_job_mb = max(self._peak_job_mb or 0.0, job_mb)
        self.series.add((time.time(), self._util[-1], job_mb or 0.0))

    def summary(self) -> dict[str, float]:
        """COST_METRICS names; empty when nothing was sampled. gpu_mem_peak_mb (the job's own) is
        absent where NVML attributed no memory to the job's processes."""
        if not self._util:
            return {}
        figures = {
            "gpu_util_mean_pct": sum(self._util) / len(self._util),
            "gpu_util_peak_pct": max(self._util),
            "gpu_device_used_mem_peak_mb": self._peak_device_used_mb,
        }
        if self._peak_job_mb is not None:
            figures["gpu_mem_peak_mb"] = self._peak_job_mb
        return figures


# ------------------------------------------------------------------------------ the series


def series_frame(
    tree: list[tuple[float, float, float]],
    gpu: list[tuple[float, float, float]],
    stage_started_unix: dict[str, float],
    launched_unix: float,
) -> pd.DataFrame:
    """The job's samples as SERIES_TIME, SERIES_STAGE and SERIES_COLUMNS (GPU ones where sampled).

    CPU is a percentage of one core over the interval since the previous sample (200 = two cores
    busy); each GPU sample joins the nearest tree sample in time.
    """
    import pandas as pd

    columns = [SERIES_TIME, SERIES_STAGE, "rss_mb", "cpu_pct"]
    if not tree:
        return pd.DataFrame(columns=columns)
    frame = pd.DataFrame(tree, columns=["unix", "rss_mb", "cpu_s"])
    interval = frame["unix"].diff()
    frame["cpu_pct"] = (100 * frame["cpu_s"].diff() / interval).where(interval > 0).clip(lower=0)
    frame["cpu_pct"] = frame["cpu_pct"].bfill().fillna(0.0)
    order = sorted(stage_started_unix.items(), key=lambda item: item[1])
    starts = [at for _, at in order]
    names = ["launching"] + [name for name, _ in order]
    frame[SERIES_STAGE] = [names[bisect.bisect_right(starts, at)] for at in frame["unix"]]
    if gpu:
        gpu_frame = pd.DataFrame(gpu, columns=["unix", "gpu_util_pct", "gpu_mem_mb"])  # the job's own MB
        frame = pd.merge_asof(frame, gpu_frame, on="unix", direction="nearest")
        columns += ["gpu_util_pct", "gpu_mem_mb"]
    frame[SERIES_TIME] = frame["unix"] - launched_unix
    return frame[columns].round(3)


# ------------------------------------------------------------------------------ host


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def host_info(gpu_devices: list[int] | None = None, inventory: GpuInventory | None = None) -> dict[str, str]:
    """{host, cpu_model, gpu_model}: gpu_model names the given devices, or 'none'."""
    gpu_model = "none"
    if gpu_devices:
        inventory = inventory or gpu_inventory()
        names = sorted({d["name"] for d in inventory.devices if d["index"] in gpu_devices})
        gpu_model = ", ".join(names) or "none"
    return {"host": socket.gethostname(), "cpu_model": cpu_model(), "gpu_model": gpu_model}
