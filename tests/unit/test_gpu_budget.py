"""The named GPU budget `5m1c1g` (specs/budgets.yaml) grants one GPU; on a host without one, every
GPU framework's job under it (the CNN, the MobileNetV2 fine-tune, hf_finetune, xgboost) is skipped
with the reason, naming the budget, and nothing is run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.frameworks.registry import get_adapter
from tasks.jobs import run_job
from tasks.plan import Job
from tasks.resources import NO_GPU, gpu_inventory
from tasks.results import RESULT_FILE
from tasks.specs import load_budget, load_dataset_spec

GPU_JOBS = {"cnn": "digits", "mobilenet_finetune": "digits", "hf_finetune": "food_reviews",
            "xgboost": "digits_pixels"}


def test_the_gpu_budget_grants_one_gpu_and_the_gpu_frameworks_declare_they_use_it() -> None:
    budget = load_budget("5m1c1g")
    assert (budget.gpus, budget.cores, budget.time_s) == (1, 1, 300)
    assert all(get_adapter(name).uses_gpu for name in GPU_JOBS)


@pytest.mark.parametrize("framework", sorted(GPU_JOBS))
def test_a_gpu_budget_job_on_a_host_without_a_gpu_is_skipped_with_the_reason(framework: str,
                                                                                tmp_path: Path) -> None:
    if gpu_inventory().available:
        pytest.skip("this host has an NVIDIA GPU")
    spec = load_dataset_spec(GPU_JOBS[framework])
    job = Job("gpu", spec.name, "v", framework, None, 0, 0, load_budget("5m1c1g"))
    result = run_job(job, spec, tmp_path / framework)
    assert result.status == "skipped"
    assert result.error.startswith(f"budget '5m1c1g' asks for 1 GPU(s) but here: {NO_GPU}")
    assert (tmp_path / framework / RESULT_FILE).is_file()  # recorded, not lost
