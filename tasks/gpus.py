"""GPU leases: which of this host's devices a job may use, so two jobs never share one.

Two holders, one idea: ``GpuPool`` hands devices to the jobs of one process (embedded mode, or the
jobs of one long-lived worker), and ``host_devices`` locks devices with file locks, so workers that
are separate processes on one host never hand out the same device. Either gives the job its device
indices; tasks.jobs puts exactly those in the job's CUDA_VISIBLE_DEVICES and samples exactly those.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

LOCK_DIR_ENV = "AUTOML_EVAL_GPU_LOCKS"
DEFAULT_LOCK_DIR = Path("/tmp/automl-eval-gpu-locks")


def visible_gpu_count() -> int:
    """GPUs this host offers jobs (CUDA_VISIBLE_DEVICES narrows them); 0 without a GPU driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            count = pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver, no library: a CPU host
        return 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip()])
    return count


class GpuPool:
    """Hands each running GPU job of this process its own devices, and takes them back when it ends."""

    def __init__(self, device_count: int) -> None:
        self._free = list(range(device_count))
        self._lock = threading.Lock()

    def take(self, count: int) -> list[int] | None:
        """`count` free devices; None for a job that asks for none; [] when too few are free (the
        job runner then records the job as skipped with the reason)."""
        if count <= 0:
            return None
        with self._lock:
            if len(self._free) < count:
                return []
            taken, self._free = self._free[:count], self._free[count:]
            return taken

    def give_back(self, devices: list[int] | None) -> None:
        if devices:
            with self._lock:
                self._free.extend(devices)


def lock_dir() -> Path:
    return Path(os.environ.get(LOCK_DIR_ENV) or DEFAULT_LOCK_DIR)


@contextmanager
def host_devices(count: int, locks: Path | None = None, timeout_s: float = 3600) -> Iterator[list[int]]:
    """Lock `count` of this host's GPUs for the caller (one file lock per device, released when the
    block ends or the process dies); yields their indices, or [] when the host has fewer."""
    available = visible_gpu_count()
    if count <= 0 or available < count:
        yield []
        return
    folder = locks or lock_dir()
    folder.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    with ExitStack() as stack:
        taken: list[int] = []
        while len(taken) < count:
            for device in range(available):
                if device in taken:
                    continue
                handle = stack.enter_context((folder / f"gpu{device}.lock").open("w"))
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                taken.append(device)
                if len(taken) == count:
                    break
            if len(taken) < count:
                if time.monotonic() > deadline:
                    break
                time.sleep(1)
        yield taken if len(taken) == count else []
