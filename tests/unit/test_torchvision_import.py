"""torchvision next to the CPU torch (tasks/frameworks/_torchvision.py): its architectures work, and its
compiled operators either work (a matching pair) or refuse loudly, never compute something wrong."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from tasks.frameworks._torchvision import extension_loaded, import_torchvision


def test_the_architectures_build_and_run_after_the_guarded_import() -> None:
    torchvision = import_torchvision()
    network = torchvision.models.get_model("resnet18", weights=None, num_classes=7)
    with torch.no_grad():
        out = network(torch.zeros(2, 3, 32, 32))
    assert tuple(out.shape) == (2, 7)
    # Weights are random (no download): two builds differ.
    other = torchvision.models.get_model("resnet18", weights=None, num_classes=7)
    assert not torch.equal(network.fc.weight, other.fc.weight)


def test_the_operators_compute_or_refuse_never_answer_wrongly() -> None:
    torchvision = import_torchvision()
    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 10.0, 10.0], [20.0, 20.0, 30.0, 30.0]])
    scores = torch.tensor([0.9, 0.8, 0.7])
    if extension_loaded():
        # A matching pair (GPU workers): nms drops the overlapping second box.
        assert torchvision.ops.nms(boxes, scores, 0.5).tolist() == [0, 2]
    else:
        with pytest.raises(RuntimeError, match=r"Couldn.t load custom C\+\+ ops"):
            torchvision.ops.nms(boxes, scores, 0.5)


def test_a_fresh_interpreter_imports_torchvision_through_the_guard() -> None:
    # Fresh: the plain import's outcome depends on what this process imported before.
    code = (
        "from tasks.frameworks._torchvision import import_torchvision\n"
        "tv = import_torchvision()\n"
        "import torchvision, torch\n"
        "assert torchvision is tv\n"
        "print(len(tv.models.list_models(module=tv.models)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.strip().splitlines()[-1]) > 50  # torchvision's classification models


def test_another_import_failure_is_not_swallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    # Only torchvision's known failure is handled; any other error reaches the caller as it was.
    import builtins

    real_import = builtins.__import__

    def failing(name: str, *args: object, **kwargs: object) -> object:
        if name == "torchvision":
            raise RuntimeError("some other torchvision failure")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", failing)
    with pytest.raises(RuntimeError, match="some other torchvision failure"):
        import_torchvision()
