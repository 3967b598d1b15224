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

Then the image track's real jobs (``--out FOLDER``): the project's CNN adapter (tasks/frameworks/cnn.py,
a torchvision ResNet-18 from scratch) on the digits card, run by the real worker under the real
watchdog (tasks.jobs.run_job; no MLflow, no Prefect), once per loader setting (`cnn:w0`, `cnn:w2`,
`cnn:w2_pin`, `cnn:w4_pin`) with `gpus: 1` where a GPU is, and again on the CPU. Each job's folder
(result.json, resources.csv, training_curve.csv) lands under FOLDER; the table printed gives
images/s, epochs, data-wait share, GPU utilisation mean/peak, the device's memory and torch's own
peak reserved memory, and the best loader setting against `num_workers=0`. With no GPU the same jobs
run on the CPU only, and it says so.

Nothing here is a test: figures only. ``--json PATH`` also writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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


GPU_VARIANTS = ("w0", "w2", "w2_pin", "w4_pin")
CPU_VARIANTS = ("w0", "w2")
JOB_FIGURES = ("acc", "train_images_per_s", "epochs", "data_wait_share", "gpu_util_mean_pct",
               "gpu_util_peak_pct", "gpu_mem_peak_mb", "torch_gpu_reserved_peak_mb", "fit_s", "peak_rss_mb")


def cnn_jobs(out: Path, gpu: bool, time_s: int, dataset: str = "digits") -> list[dict[str, Any]]:
    """The CNN adapter's jobs through the real worker and watchdog, one per loader setting, on the
    GPU (when there is one) and on the CPU; each job's folder under `out`."""
    home = out / "project"
    (home / "specs" / "datasets").mkdir(parents=True, exist_ok=True)
    for name in ("params.yaml", "pyproject.toml", "specs/budgets.yaml", f"specs/datasets/{dataset}.yaml"):
        shutil.copy(PROJECT_ROOT / name, home / name)
    os.environ["AUTOML_EVAL_HOME"] = str(home)
    # The project's data and job runner: imported once AUTOML_EVAL_HOME points at the scratch project.
    from tasks.data.materialize import materialize
    from tasks.jobs import run_job
    from tasks.plan import Job
    from tasks.specs import Budget, load_dataset_spec

    spec = load_dataset_spec(dataset)
    materialize(spec)  # the card's packaged source and its saved folds, in the scratch project
    cores = max(1, min(4, (os.cpu_count() or 1)))
    rows = []
    for device in (["cuda"] if gpu else []) + ["cpu"]:
        budget = Budget(name=f"gpu_check_{device}", time_s=time_s, cores=cores, memory_mb=16384,
                        gpus=1 if device == "cuda" else 0)
        for variant in GPU_VARIANTS if device == "cuda" else CPU_VARIANTS:
            job = Job("gpu_check", spec.name, "local", "cnn", variant, 0, 0, budget, {"batch_size": 256})
            result = run_job(job, spec, out / device / variant)
            figures = {**result.scores, **result.costs}
            row = {"device": device, "setting": variant, "status": result.status,
                   **{name: figures.get(name) for name in JOB_FIGURES}}
            if result.status != "ok":
                row["error"] = (result.error or "")[-300:]
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def jobs_table(rows: list[dict[str, Any]]) -> str:
    """The printed table: one line per job, then the best loader setting against num_workers=0."""
    header = (f"{'device':<6} {'setting':<8} {'status':<8} {'acc':>6} {'img/s':>8} {'epochs':>7} "
              f"{'wait':>6} {'util%':>6} {'peak%':>6} {'dev MB':>8} {'torch MB':>9}")
    lines = [header]

    def cell(value: Any, width: int, digits: int = 1) -> str:
        return f"{value:>{width}.{digits}f}" if isinstance(value, (int, float)) else f"{'-':>{width}}"

    for row in rows:
        lines.append(f"{row['device']:<6} {row['setting']:<8} {row['status']:<8} {cell(row['acc'], 6, 3)} "
                     f"{cell(row['train_images_per_s'], 8)} {cell(row['epochs'], 7, 2)} "
                     f"{cell(row['data_wait_share'], 6, 3)} {cell(row['gpu_util_mean_pct'], 6)} "
                     f"{cell(row['gpu_util_peak_pct'], 6)} {cell(row['gpu_mem_peak_mb'], 8)} "
                     f"{cell(row['torch_gpu_reserved_peak_mb'], 9)}")
    for device in ("cuda", "cpu"):
        done = [row for row in rows if row["device"] == device and row["status"] == "ok"]
        measure = "gpu_util_mean_pct" if device == "cuda" else "train_images_per_s"
        base = next((row for row in done if row["setting"] == "w0"), None)
        best = max(done, key=lambda row: row.get(measure) or 0.0, default=None)
        if base and best:
            lines.append(f"{device}: best loader setting {best['setting']} ({measure} {best[measure]}) "
                         f"against num_workers=0 ({base[measure]})")
    fastest = {device: max((row.get("train_images_per_s") or 0.0 for row in rows
                            if row["device"] == device and row["status"] == "ok"), default=0.0)
               for device in ("cuda", "cpu")}
    if fastest["cuda"] and fastest["cpu"]:
        lines.append(f"GPU/CPU training images/s (best settings): {fastest['cuda'] / fastest['cpu']:.1f}x")
    elif not fastest["cuda"]:
        lines.append("no GPU here: the CNN jobs ran on the CPU only (GPU figures pending)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--cpu-epochs", type=int, default=3)
    parser.add_argument("--loader-workers", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None,
                        help="run the CNN adapter's jobs (real worker and watchdog) and write them here")
    parser.add_argument("--job-seconds", type=int, default=45, help="each CNN job's time_s")
    parser.add_argument("--no-probe", action="store_true",
                        help="skip the bare-torch probe, run the jobs only")
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
    if inventory.available and not args.no_probe:
        gpu_run = measure("cuda", args.epochs, args.loader_workers, report["visible_gpu_ids"][:1])
        report["runs"].append(gpu_run)
        print(json.dumps(gpu_run), flush=True)
    if not args.no_probe:
        cpu_run = measure("cpu", args.cpu_epochs, args.loader_workers, [])
        report["runs"].append(cpu_run)
        print(json.dumps(cpu_run), flush=True)
    if args.out is not None:
        report["cnn_jobs"] = cnn_jobs(args.out, inventory.available, args.job_seconds)
        print(jobs_table(report["cnn_jobs"]), flush=True)
    rates = {run["device"]: run.get("images_per_s") for run in report["runs"]}
    if rates.get("cuda") and rates.get("cpu"):
        report["gpu_speedup_images_per_s"] = round(rates["cuda"] / rates["cpu"], 1)
        print(f"GPU/CPU training images/s: {report['gpu_speedup_images_per_s']}x", flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
