"""The MobileNetV2 fine-tune on tiny grey images, on the CPU: the pretrained ImageNet file read from
the installed wheel with its SHA-256 checked, a new head, the CNN's training loop and series, and
save -> load parity without the pretrained file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from jobs_support.tiny_project import make_image_project

from tasks.data.fold_data import load_fold
from tasks.errors import UserError
from tasks.frameworks import cnn, mobilenet_finetune
from tasks.frameworks.registry import get_adapter
from tasks.results import CURVE_INFO_KEY
from tasks.specs import Budget

BUDGET = Budget(name="mobilenet-test", time_s=60, cores=1, memory_mb=4096)


@pytest.fixture
def fold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201 - a FoldData
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path))
    specs = make_image_project(tmp_path, rows=40)
    return load_fold(specs["multiclass"], 0)


def test_fine_tunes_the_pretrained_backbone_with_the_cnns_loop(fold, tmp_path: Path) -> None:  # noqa: ANN001
    adapter = get_adapter("mobilenet_finetune")
    assert isinstance(adapter, cnn.CNNAdapter)  # one training loop: the CNN's
    params = {"input_side": 32, "batch_size": 8, "epochs": 1, "_validation_rows": 6}
    model = adapter.fit(fold.X_train, fold.y_train, task=fold.task, budget=BUDGET, params=params,
                        workdir=tmp_path, seed=0)
    info = model.info()
    assert info["architecture"] == "mobilenet_v2" and info["stopped_by"] == "epochs"
    assert info["pretrained"] == "ImageNet-1k mobilenet_v2-b0353104.pth"
    assert [row["step"] for row in info[CURVE_INFO_KEY]] == [1]
    assert model.training_costs()["train_images_per_s"] > 0
    # A new head with the dataset's classes; the grey image read as one channel.
    head = model.network[1].classifier[-1]
    assert head.out_features == len(fold.task.classes) and model.settings["input_channels"] == 1
    proba = model.predict_proba(fold.X_test)
    assert list(proba.columns) == list(fold.task.classes)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-5)
    model.save(tmp_path / "model")
    reloaded = adapter.load(tmp_path / "model", fold.task)
    np.testing.assert_allclose(reloaded.predict_proba(fold.X_test).to_numpy(), proba.to_numpy(), atol=1e-5)


def test_the_backbone_starts_from_the_imagenet_file() -> None:
    adapter = get_adapter("mobilenet_finetune")
    settings = adapter.network_settings({**mobilenet_finetune.HYPERPARAMETERS, "input_side": 32})
    network, channels = adapter.build(settings, 4, 1, 12, 12, pretrained=True)
    saved = torch.load(mobilenet_finetune.verified_weights_path(), map_location="cpu", weights_only=True)
    backbone = network[1].state_dict()
    layers = [name for name in saved if not name.startswith("classifier.")]
    assert channels == 1 and len(layers) > 100
    for name in layers:
        assert torch.equal(backbone[name], saved[name]), name
    untrained, _ = adapter.build(settings, 4, 1, 12, 12, pretrained=False)
    assert not torch.equal(untrained[1].state_dict()["features.0.0.weight"], saved["features.0.0.weight"])


def test_the_input_layer_resizes_and_normalises_grey_as_imagenet_rgb() -> None:
    layer = mobilenet_finetune.input_layer(1, 32)
    grey = torch.full((1, 1, 12, 12), 0.5)
    out = layer(grey)
    assert out.shape == (1, 3, 32, 32)
    mean, std = mobilenet_finetune.IMAGENET_MEAN, mobilenet_finetune.IMAGENET_STD
    expected = [(0.5 - m) / s for m, s in zip(mean, std, strict=True)]
    np.testing.assert_allclose(out[0, :, 5, 5].numpy(), expected, rtol=1e-5)
    assert not any(p.requires_grad for p in layer.parameters())  # fixed: not fine-tuned


def test_a_weights_file_that_is_not_the_pinned_one_is_refused_in_one_sentence() -> None:
    path = mobilenet_finetune.verified_weights_path()  # the installed file matches the pin
    assert path.name == "mobilenet_v2-b0353104.pth"
    with pytest.raises(UserError, match=r"has SHA-256 b0353104[0-9a-f]{56}, not the pinned 0{64}; reinstall"):
        mobilenet_finetune.verified_weights_path(expected_sha256="0" * 64)
