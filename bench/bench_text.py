"""Fine-tune throughput of hf_finetune (samples/s) on CPU, and on a GPU where there is one.

Trains the default checkpoint (MiniLM, 6 layers) on Amazon fine-food reviews for a fixed number
of optimizer steps, batch 16, 128 tokens, then predicts; prints one JSON line per device.
Run: `python -m bench.bench_text [--steps N] [--cores N]`. Figures, not a test: they depend on
the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import pandas as pd

from tasks.frameworks.base import TaskInfo
from tasks.frameworks.hf_finetune import ADAPTER
from tasks.specs import Budget

# The smoke run of tests/integration/test_bench_smoke.py: one optimizer step on a few short texts.
SMOKE_ARGS: tuple[str, ...] = ("--steps", "1", "--cores", "1", "--batch-size", "4", "--max-length", "16")


def reviews(rows: int) -> tuple[pd.DataFrame, pd.Series]:
    from tasks.data.sources_text import food_reviews

    frame = food_reviews(None).head(rows)  # type: ignore[arg-type]  # the source ignores the card
    return frame[["review"]], frame["score"].astype(object)


def measure(device: str, steps: int, cores: int, batch_size: int, max_length: int) -> dict[str, object]:
    X, y = reviews(batch_size * steps + 64)
    task = TaskInfo("binary", "score", "auc", {"review": "text"}, ("great", "other"))
    gpus = 1 if device == "cuda" else 0
    budget = Budget(name="bench", time_s=3600, cores=cores, memory_mb=16384, gpus=gpus)
    params = {"batch_size": batch_size, "max_length": max_length, "epochs": 1,
              "_max_steps": steps, "_validation_rows": 32, "_evaluations_per_epoch": 1}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as workdir:
        model = ADAPTER.fit(X, y, task=task, budget=budget, params=params, workdir=Path(workdir), seed=0)
    fit_s = time.perf_counter() - started
    started = time.perf_counter()
    model.predict_proba(X.head(256))
    predict_s = time.perf_counter() - started
    history = model.info()
    return {
        "device": device,
        "cores": cores,
        "batch_size": batch_size,
        "max_length": max_length,
        "steps": history["steps"],
        "train_samples_per_s": history["train_samples_per_s"],
        "train_samples_per_cpu_s": history["train_samples_per_cpu_s"],
        "fit_s_including_load_and_validation": round(fit_s, 2),
        "predict_rows_per_s": round(256 / predict_s, 2),
        "amp": history["amp"],
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=128)
    args = parser.parse_args()
    import torch

    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    if "cuda" not in devices:
        print(json.dumps({"device": "cuda", "skipped": "no CUDA device visible to torch on this host"}))
    for device in devices:
        figures = measure(device, args.steps, args.cores, args.batch_size, args.max_length)
        print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
