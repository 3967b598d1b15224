"""xgboost trains on the GPU (`device="cuda"`) exactly when its job holds one and its build has CUDA;
otherwise on the CPU, with the sentence why where the budget granted a GPU. It declares `uses_gpu`, so
a GPU step of a suite is planned for it. This host's xgboost is the CPU-only build (xgboost-cpu)."""

from __future__ import annotations

import pytest

from tasks.frameworks import xgboost as xgboost_adapter
from tasks.frameworks.registry import get_adapter
from tasks.specs import Budget

CPU_BUDGET = Budget(name="cpu", time_s=20, cores=1, memory_mb=2048)
GPU_BUDGET = CPU_BUDGET.model_copy(update={"name": "gpu", "gpus": 1})


def test_xgboost_declares_that_it_uses_a_gpu() -> None:
    assert get_adapter("xgboost").uses_gpu is True


def test_the_device_follows_the_budget_the_visible_devices_and_the_build(
        monkeypatch: pytest.MonkeyPatch) -> None:
    xgboost = pytest.importorskip("xgboost")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert xgboost_adapter._device(CPU_BUDGET) == ("cpu", "")  # no GPU granted: no reason to give
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    hidden = ("cpu", "the budget grants a GPU but none is visible to the job")
    assert xgboost_adapter._device(GPU_BUDGET) == hidden
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    device, reason = xgboost_adapter._device(GPU_BUDGET)
    if xgboost.build_info().get("USE_CUDA"):
        assert (device, reason) == ("cuda", "")
    else:
        assert device == "cpu" and "has no CUDA; install the `xgboost` wheel" in reason
