"""`python -m bench.gpu_check`: what a GPU job costs, read the way the harness reads it.

Run once on a machine with an NVIDIA GPU (the project's GPU check); on a CPU host it says so and
measures the CPU path only. It trains a small CNN on scikit-learn's digits (1,797 real 8x8 images,
upscaled to 32x32) through a real ``DataLoader`` in a child process, on the GPU and then on the CPU,
while the parent samples the child with the harness's own samplers (tasks.resources). It prints:

- the host's GPUs as the harness sees them (NVML inventory, visible devices);
- images/s in training, the share of a step spent waiting for data, test accuracy;
- GPU memory three ways: the device's "used" (what GpuSampler records today), the child process's
  own (NVML's per-process accounting, when the driver exposes it inside this container), and
  PyTorch's peak reserved memory inside the child;
- the CPU-to-GPU speed-up.

Nothing here is a test: figures only. ``--json PATH`` also writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parent.parent
if str(PROJECT_ROOT) not in sys.path:  # `python bench/gpu_check.py` as well as `-m`
    sys.path.insert(0, str(PROJECT_ROOT))

from tasks.gpus import visible_gpu_ids  # noqa: E402 - after the path fix above
from tasks.resources import GpuSampler, ProcessTreeSampler, gpu_inventory  # noqa: E402

IMAGE_SIDE = 32
BATCH_SIZE = 128


def train_child(device: str, epochs: int, loader_workers: int) -> dict[str, Any]:
    """The child's work: a CNN from scratch on digits through a DataLoader; returns its figures."""
    # torch and scikit-learn load only in the child: the parent samples, it does not train.
    import numpy as np
    import torch
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    digits = load_digits()
    images = torch.tensor(digits.images / 16.0, dtype=torch.float32).unsqueeze(1)
    images = nn.functional.interpolate(images, size=(IMAGE_SIDE, IMAGE_SIDE), mode="bilinear")
    labels = torch.tensor(digits.target, dtype=torch.long)
    train_idx, test_idx = train_test_split(
        np.arange(len(labels)), test_size=0.25, random_state=0, stratify=digits.target)
    train = DataLoader(TensorDataset(images[train_idx], labels[train_idx]), batch_size=BATCH_SIZE,
                       shuffle=True, num_workers=loader_workers, pin_memory=device == "cuda",
                       persistent_workers=loader_workers > 0)
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(128, 10),
    ).to(device)
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()

    def synchronise() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    seen, wait_s, started = 0, 0.0, time.perf_counter()
    for _ in range(epochs):
        fetch_started = time.perf_counter()
        for batch, target in train:
            wait_s += time.perf_counter() - fetch_started
            batch = batch.to(device, non_blocking=True)
            target = target.to(device, non_blocking=True)
            optimiser.zero_grad(set_to_none=True)
            loss_fn(model(batch), target).backward()
            optimiser.step()
            seen += len(target)
            synchronise()
            fetch_started = time.perf_counter()
    train_s = time.perf_counter() - started
    model.eval()
    with torch.no_grad():
        predicted = model(images[test_idx].to(device)).argmax(1).cpu()
    figures: dict[str, Any] = {
        "device": device,
        "torch": torch.__version__,
        "epochs": epochs,
        "train_images": int(len(train_idx)),
        "train_s": round(train_s, 3),
        "images_per_s": round(seen / train_s, 1),
        "data_wait_share": round(wait_s / train_s, 3),
        "test_accuracy": round(float((predicted == labels[test_idx]).float().mean()), 4),
    }
    if device == "cuda":
        figures["torch_max_reserved_mb"] = round(torch.cuda.max_memory_reserved() / 2**20, 1)
        figures["torch_max_allocated_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        figures["cuda_device_name"] = torch.cuda.get_device_name(0)
    return figures


def process_gpu_memory_mb(pids: set[int]) -> float | None:
    """NVML's own accounting of the given processes' GPU memory; None where it reports none of them
    (inside some containers NVML sees other pid namespaces, or none)."""
    import pynvml  # from nvidia-ml-py; only reached on a host whose inventory found a GPU

    pynvml.nvmlInit()
    try:
        total, matched = 0.0, False
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            for process in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if process.pid in pids and process.usedGpuMemory is not None:
                    total += process.usedGpuMemory / 2**20
                    matched = True
        return total if matched else None
    finally:
        pynvml.nvmlShutdown()


def measure(device: str, epochs: int, loader_workers: int, gpu_indices: list[int]) -> dict[str, Any]:
    """Runs one child and samples it as the harness samples a job."""
    command = [sys.executable, "-m", "bench.gpu_check", "--child", device, "--epochs", str(epochs),
               "--loader-workers", str(loader_workers)]
    child = subprocess.Popen(command, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, text=True)
    tree = ProcessTreeSampler(child.pid)
    peak_process_gpu_mb: float | None = None
    sampler = GpuSampler(gpu_indices, interval_s=0.2) if gpu_indices else None
    if sampler:
        sampler.__enter__()
    try:
        while child.poll() is None:
            tree.sample()
            if sampler:
                pids = {process.pid for process in tree.leftovers()} | {child.pid}
                current = process_gpu_memory_mb(pids)
                if current is not None:
                    peak_process_gpu_mb = max(peak_process_gpu_mb or 0.0, current)
            time.sleep(0.2)
    finally:
        if sampler:
            sampler.__exit__()
    output, _ = child.communicate(timeout=60)
    if child.returncode != 0:
        return {"device": device, "status": "failed", "returncode": child.returncode}
    figures = json.loads(output.strip().splitlines()[-1])
    figures["peak_rss_mb"] = round(tree.peak_rss_mb, 1)
    figures["cpu_s"] = round(tree.cpu_s, 1)
    if sampler:
        summary = sampler.summary()
        figures["gpu_util_mean_pct"] = round(summary.get("gpu_util_mean_pct", 0.0), 1)
        figures["gpu_util_peak_pct"] = round(summary.get("gpu_util_peak_pct", 0.0), 1)
        figures["device_used_mem_peak_mb"] = round(summary.get("gpu_mem_peak_mb", 0.0), 1)
        figures["process_gpu_mem_peak_mb"] = (
            None if peak_process_gpu_mb is None else round(peak_process_gpu_mb, 1))
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--cpu-epochs", type=int, default=3)
    parser.add_argument("--loader-workers", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(train_child(args.child, args.epochs, args.loader_workers)), flush=True)
        return 0

    inventory = gpu_inventory()
    report: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "gpus": inventory.devices if inventory.available else inventory.reason,
        "visible_gpu_ids": visible_gpu_ids(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "runs": [],
    }
    print(json.dumps({key: report[key] for key in ("when", "gpus", "visible_gpu_ids")}), flush=True)
    if inventory.available:
        gpu_run = measure("cuda", args.epochs, args.loader_workers, report["visible_gpu_ids"][:1])
        report["runs"].append(gpu_run)
        print(json.dumps(gpu_run), flush=True)
    cpu_run = measure("cpu", args.cpu_epochs, args.loader_workers, [])
    report["runs"].append(cpu_run)
    print(json.dumps(cpu_run), flush=True)
    rates = {run["device"]: run.get("images_per_s") for run in report["runs"]}
    if rates.get("cuda") and rates.get("cpu"):
        report["gpu_speedup_images_per_s"] = round(rates["cuda"] / rates["cpu"], 1)
        print(f"GPU/CPU training images/s: {report['gpu_speedup_images_per_s']}x", flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
