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


def visible_gpu_ids() -> list[int]:
    """The NVML indices of the GPUs this process may hand to jobs; [] without a GPU driver.

    NVML numbers every device on the host whatever CUDA_VISIBLE_DEVICES says, so a worker started
    with CUDA_VISIBLE_DEVICES=2,3 offers devices 2 and 3 (not 0 and 1): its jobs then get those
    in their own CUDA_VISIBLE_DEVICES (with CUDA_DEVICE_ORDER=PCI_BUS_ID, CUDA's numbering is
    NVML's), their locks name those, and the sampler reads those.
    """
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            count = pynvml.nvmlDeviceGetCount()
            uuids = {}
            for index in range(count):
                uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(index))
                uuids[uuid.decode() if isinstance(uuid, bytes) else str(uuid)] = index
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver, no library: a CPU host
        return []
    return parse_visible_devices(os.environ.get("CUDA_VISIBLE_DEVICES"), count, uuids)


def parse_visible_devices(visible: str | None, count: int, uuids: dict[str, int]) -> list[int]:
    """CUDA_VISIBLE_DEVICES as NVML indices: entries are indices or (prefixes of) UUIDs; as CUDA
    does, the list stops at the first entry that names no device."""
    if visible is None:
        return list(range(count))
    found: list[int] = []
    for entry in (part.strip() for part in visible.split(",")):
        if entry.isdigit() and int(entry) < count:
            index: int | None = int(entry)
        else:
            matches = [i for uuid, i in uuids.items() if entry and uuid.startswith(entry)]
            index = matches[0] if len(matches) == 1 else None
        if index is None:
            break
        if index not in found:
            found.append(index)
    return found


def visible_gpu_count() -> int:
    """GPUs this host offers jobs (CUDA_VISIBLE_DEVICES narrows them); 0 without a GPU driver."""
    return len(visible_gpu_ids())


class GpuPool:
    """Hands each running GPU job of this process its own devices, and takes them back when it ends."""

    def __init__(self, devices: list[int]) -> None:
        self._free = list(devices)  # NVML indices (visible_gpu_ids)
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
    available = visible_gpu_ids()
    if count <= 0 or len(available) < count:
        yield []
        return
    folder = locks or lock_dir()
    folder.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    with ExitStack() as stack:
        taken: list[int] = []
        while len(taken) < count:
            for device in available:
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
