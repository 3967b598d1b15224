"""A convolutional network trained from scratch on images: a torchvision architecture with random
initialisation, sized to the input, fed by a real ``torch.utils.data.DataLoader``.

The loader decodes one PNG per item, in its own worker processes when `_num_workers` > 0, so the
loader settings a suite gives (`_num_workers`, `_pin_memory`, `_persistent_workers`) change how
well the device is fed, which the per-epoch series shows: train and validation loss, images/s,
and the share of the epoch spent waiting for the next batch. On a granted GPU it trains with mixed
precision (bf16 where the device has it, else fp16 with a gradient scaler); on CPU with torch held
to the budget's cores. Training stops when the budget's time is spent (keeping time to validate
and save), and the weights with the best validation loss are kept. Each epoch that improves on that
best writes its weights to the work folder: the score-over-time curve's candidates
(tasks/frameworks/_checkpoints.py), scored by the harness on the test fold.

Sized to the input: a ResNet's stem takes the image's own channels, and on small images (MNIST's
28x28, digits' 8x8) its 7x7 stride-2 convolution becomes a 3x3 stride-1 one (the ResNet paper's
CIFAR variant), its max-pool dropped below 16 pixels, so the last stage still sees a feature map.
Other torchvision architectures get the image with its channels repeated to three.
"""

from __future__ import annotations

import copy
import io
import json
import math
import re
import time
import warnings
from pathlib import Path
from typing import Any, ClassVar, cast

import numpy as np
import pandas as pd

from tasks.frameworks._checkpoints import Checkpoint, ImprovementCheckpoints
from tasks.frameworks._checkpoints import candidates as checkpoint_candidates
from tasks.frameworks._torchvision import import_torchvision
from tasks.frameworks.base import FittedModel, FrameworkAdapter, TaskInfo, split_params
from tasks.frameworks.capabilities import AnytimeCandidate, OnnxGraph, TorchNetwork, not_offered
from tasks.images.codec import decode
from tasks.results import CURVE_INFO_KEY
from tasks.specs import Budget

WEIGHTS_FILE = "cnn.pt"  # the network's state_dict
SETTINGS_FILE = "cnn.json"  # architecture, input shape, labels: what load needs to rebuild it
ONNX_INPUT = "pixels"  # the exported graph's input: decoded pixels, rows x channels x height x width
ONNX_OPSET = 17
IMAGE_ROLE = "image"
# Below these sides (pixels) a ResNet's stem is made smaller so the last stage keeps a feature map.
SMALL_STEM_BELOW = 64
NO_MAXPOOL_BELOW = 16

# A loader setting as a variant, so a sweep lists each as its own framework: `cnn:w4_pin` is
# four loader workers with pinned memory, `cnn:w0` none and unpinned.
LOADER_VARIANT = re.compile(r"w(?P<workers>\d+)(?P<pin>_pin)?")

# Hyperparameters a suite may set (framework params, passed by name) and their defaults.
HYPERPARAMETERS: dict[str, Any] = {
    "architecture": "resnet18",  # any name of torchvision.models.list_models(torchvision.models)
    "learning_rate": 1e-3,
    "batch_size": 64,
    "epochs": 30,
    "weight_decay": 1e-4,
    "predict_batch_size": 256,
}
# Adapter settings (`_name` params): the loader's, set per suite, and the training's bookkeeping.
ADAPTER_SETTINGS: dict[str, Any] = {
    "num_workers": 0,  # DataLoader worker processes decoding images (0: in the training process)
    "pin_memory": None,  # None: on exactly when training on a GPU
    "persistent_workers": True,  # keep the loader's workers between epochs (with num_workers > 0)
    "validation_share": 0.1,
    "validation_rows": 1000,  # at most: validating a bigger split would eat the training time
    "max_steps": None,  # a hard cap on optimizer steps (the conformance test uses a few)
    "save_reserve_share": 0.1,  # of the budget kept back for the last validation and saving
}


def _now() -> float:
    """The clock the budget is read from: one name, so that a test can stand a fake clock in for
    the training loop alone (patching time.monotonic would also move the loader's own waits)."""
    return time.monotonic()


class EncodedImages:
    """A map-style dataset of encoded images for the DataLoader: item i is (pixels as float32
    channels x height x width in 0..1, class index). Decoding happens here, in the loader's
    workers when it has some; a plain object (no torch import) so it pickles cheaply."""

    def __init__(self, images: list[bytes], targets: np.ndarray, channels: int) -> None:
        self.images = images
        self.targets = targets
        self.channels = channels

    def __len__(self) -> int:
        return len(self.images)

    def pixels(self, index: int) -> np.ndarray:
        pixels = decode(self.images[index])
        if pixels.shape[2] != self.channels:
            # Grey to colour by repeating the channel; an alpha channel dropped.
            pixels = np.repeat(pixels[:, :, :1], self.channels, axis=2) if pixels.shape[2] == 1 else (
                pixels[:, :, : self.channels] if pixels.shape[2] > self.channels else
                np.repeat(pixels.mean(axis=2, keepdims=True).astype(np.uint8), self.channels, axis=2))
        return np.ascontiguousarray(pixels.transpose(2, 0, 1), dtype=np.float32) / 255.0

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        return self.pixels(index), int(self.targets[index])


def image_column(X: pd.DataFrame, task: TaskInfo, framework: str = "cnn") -> str:
    columns = [c for c in X.columns if task.column_roles.get(c) == IMAGE_ROLE]
    if len(columns) != 1:
        raise ValueError(f"{framework}: the data has {len(columns)} image columns; it takes one "
                         "(role image).")
    return columns[0]


def build_network(
    architecture: str, classes: int, channels: int, height: int, width: int
) -> tuple[Any, int]:
    """The architecture with random weights and `classes` outputs, sized to the input; returns it
    and the channel count it reads."""
    from torch import nn

    torchvision = import_torchvision()
    known = torchvision.models.list_models(module=torchvision.models)
    if architecture not in known:
        raise ValueError(f"cnn: '{architecture}' is not a torchvision classification architecture; use "
                         f"one of {', '.join(sorted(k for k in known if k.startswith('resnet')))}, ...")
    network = torchvision.models.get_model(architecture, weights=None, num_classes=classes)
    stem = getattr(network, "conv1", None)
    if not isinstance(stem, nn.Conv2d):
        return network, 3
    side = min(height, width)
    small = side < SMALL_STEM_BELOW
    network.conv1 = nn.Conv2d(channels, stem.out_channels,
                              kernel_size=3 if small else _pair(stem.kernel_size),
                              stride=1 if small else _pair(stem.stride),
                              padding=1 if small else stem.padding if isinstance(stem.padding, str)
                              else _pair(stem.padding), bias=False)
    nn.init.kaiming_normal_(network.conv1.weight, mode="fan_out", nonlinearity="relu")  # torchvision's
    if side < NO_MAXPOOL_BELOW and isinstance(getattr(network, "maxpool", None), nn.MaxPool2d):
        network.maxpool = nn.Identity()
    return network, channels


class CNNModel(FittedModel):
    def __init__(self, network: Any, settings: dict[str, Any], task: TaskInfo, device: str = "cpu",
                 history: dict[str, Any] | None = None, checkpoints: list[Checkpoint] | None = None) -> None:
        self.network = network
        self.settings = settings  # column, architecture, channels, input_channels, height, width, labels
        self.task = task
        self.device = device
        self.history = history or {}
        self.checkpoints = checkpoints or []  # the weights at each improving epoch (only after a fit)

    def anytime_candidates(self) -> list[AnytimeCandidate]:
        """The weights of each epoch that improved the validation loss, then the returned model."""
        return checkpoint_candidates(
            self.checkpoints, self.network, self.device,
            lambda network: CNNModel(network, self.settings, self.task, self.device), self, True)

    def pixels(self, X: pd.DataFrame) -> np.ndarray:
        """The network's input for a frame: float32 pixels in 0..1, rows x channels x height x width."""
        images = EncodedImages(X[self.settings["column"]].tolist(), np.zeros(len(X), dtype=np.int64),
                               int(self.settings["input_channels"]))
        if not len(X):
            return np.zeros((0, *self._shape()), dtype=np.float32)
        return np.stack([images.pixels(i) for i in range(len(X))])

    def _shape(self) -> tuple[int, int, int]:
        return int(self.settings["input_channels"]), int(self.settings["height"]), int(self.settings["width"])

    def torch_network(self) -> TorchNetwork:
        import torch  # inside, like every torch import here: the registry imports adapters cheaply

        self.network.eval()
        return TorchNetwork(module=self.network,
                            inputs=lambda X: torch.from_numpy(self.pixels(X)).to(self.device),
                            classes=[str(c) for c in self.settings["labels"]],
                            clip_values=(0.0, 1.0), input_shape=self._shape())

    def to_onnx(self, folder: Path) -> OnnxGraph:
        """The network with a softmax on top, exported by ``torch.onnx.export``: a graph from the decoded
        pixels (float32, rows x channels x height x width, in 0..1) to the class probabilities, any
        batch size. Decoding the PNG bytes stays in Python (``feed``), as it is for the torch model."""
        # torch and onnx are imported here, like every torch import of this module (see torch_network).
        import onnx
        import torch

        network = torch.nn.Sequential(copy.deepcopy(self.network).to("cpu"), torch.nn.Softmax(dim=1)).eval()
        example = torch.zeros((1, *self._shape()), dtype=torch.float32)
        buffer = io.BytesIO()
        try:
            with warnings.catch_warnings():
                # dynamo=False: the TorchScript exporter, still in torch 2.13 behind a DeprecationWarning.
                # The default (dynamo=True) exporter needs onnxscript, which this stack does not install.
                warnings.simplefilter("ignore", DeprecationWarning)
                # torch's hint names paths only; its TorchScript exporter writes to a file object too.
                torch.onnx.export(network, (example,), buffer,  # type: ignore[arg-type]
                                  dynamo=False, opset_version=ONNX_OPSET,
                                  input_names=[ONNX_INPUT], output_names=["probabilities"],
                                  dynamic_axes={ONNX_INPUT: {0: "rows"}, "probabilities": {0: "rows"}})
        except Exception as exc:  # noqa: BLE001 - any exporter failure is its verdict on this network
            raise not_offered(exc) from None
        return OnnxGraph(onnx.load_from_string(buffer.getvalue()), lambda X: {ONNX_INPUT: self.pixels(X)},
                         output=0, classes=list(self.settings["labels"]),
                         covers=f"the {self.settings['architecture']} network and its softmax "
                                "(torch.onnx.export); PNG decoding in Python")

    def _logits(self, X: pd.DataFrame) -> np.ndarray:
        import torch

        images = EncodedImages(X[self.settings["column"]].tolist(), np.zeros(len(X), dtype=np.int64),
                               int(self.settings["input_channels"]))
        batch_size = int(self.settings["predict_batch_size"])
        outputs = np.zeros((len(X), len(self.settings["labels"])), dtype=np.float32)
        self.network.eval()
        with torch.inference_mode():
            for start in range(0, len(X), batch_size):
                rows = range(start, min(start + batch_size, len(X)))
                batch = torch.from_numpy(np.stack([images.pixels(i) for i in rows])).to(self.device)
                outputs[start : start + len(rows)] = self.network(batch).float().cpu().numpy()
        return outputs

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return np.asarray(self.settings["labels"], dtype=object)[self._logits(X).argmax(axis=1)]

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        logits = self._logits(X)
        logits -= logits.max(axis=1, keepdims=True)
        proba = np.exp(logits)
        proba /= proba.sum(axis=1, keepdims=True)
        return pd.DataFrame(proba, columns=list(self.settings["labels"]))

    def save(self, model_dir: Path) -> None:
        import torch

        model_dir.mkdir(parents=True, exist_ok=True)
        weights = {k: v.detach().cpu() for k, v in self.network.state_dict().items()}
        torch.save(weights, model_dir / WEIGHTS_FILE)
        (model_dir / SETTINGS_FILE).write_text(json.dumps(self.settings, indent=2))

    def info(self) -> dict[str, Any]:
        return dict(self.history)

    def stopped_by_time(self) -> bool:
        return self.history.get("stopped_by") == "budget"

    def training_costs(self) -> dict[str, float]:
        figures = {"epochs": self.history.get("epochs_completed"),
                   "train_images_per_s": self.history.get("train_images_per_s"),
                   "time_per_epoch_s": self.history.get("time_per_epoch_s"),
                   "data_wait_share": self.history.get("data_wait_share"),
                   "torch_gpu_reserved_peak_mb": self.history.get("torch_max_memory_reserved_mb"),
                   "pretrained_parameters": self.history.get("pretrained_parameters")}
        return {name: float(value) for name, value in figures.items() if value is not None}


class CNNAdapter(FrameworkAdapter):
    """The image training shared by every network here: a subclass (the MobileNetV2 fine-tune,
    tasks/frameworks/mobilenet_finetune.py) changes only the network it builds, its hyperparameters
    and its settings; the DataLoader, the training loop, the budget's clock, the per-epoch series,
    predicting, saving and loading are this class's."""

    name = "cnn"
    package = "torchvision"
    hyperparameters: ClassVar[dict[str, Any]] = HYPERPARAMETERS
    install_hint = "pip install -c requirements.lock torch torchvision (make setup)"
    problem_types = frozenset({"binary", "multiclass"})
    modalities = frozenset({"image"})
    uses_gpu = True
    fixed_work = True  # its epochs (or _max_steps), unless the budget's time runs out first
    serving_packages = ("torch",)

    def variant_params(self, variant: str) -> dict[str, Any]:
        match = LOADER_VARIANT.fullmatch(variant)
        if match is None:
            raise ValueError(f"{self.name} has no variant '{variant}'; its variants are loader settings: wN "
                             f"(N loader workers) or wN_pin (with pinned memory), e.g. {self.name}:w4_pin")
        return {"_num_workers": int(match["workers"]), "_pin_memory": match["pin"] is not None}

    def check_params(self, params: dict[str, Any]) -> None:
        adapter_params, framework_params = split_params(params)
        for given, known, kind in (
            (framework_params, self.hyperparameters, ""),
            (adapter_params, ADAPTER_SETTINGS, "_"),
        ):
            unknown = sorted(kind + k for k in set(given) - set(known))
            if unknown:
                raise ValueError(f"{self.name}: unknown params {unknown}; known: "
                                 f"{sorted(kind + k for k in known)}.")

    def network_settings(self, hyper: dict[str, Any]) -> dict[str, Any]:
        """What of the hyperparameters the saved model needs to rebuild its network."""
        return {"architecture": str(hyper["architecture"])}

    def build(self, settings: dict[str, Any], classes: int, channels: int, height: int, width: int, *,
              pretrained: bool) -> tuple[Any, int]:
        """The network for these settings (network_settings) and input, and the channel count it
        reads; `pretrained` is False when load() is about to put saved weights into it."""
        return build_network(str(settings["architecture"]), classes, channels, height, width)

    def pretrained_parameters(self, network: Any) -> int:
        """How many of the network's parameters start from pretrained weights: none, from scratch."""
        return 0

    def fit(
        self,
        X: pd.DataFrame,
        y: pd.Series,
        *,
        task: TaskInfo,
        budget: Budget,
        params: dict[str, Any],
        workdir: Path,
        seed: int,
    ) -> CNNModel:
        started = _now()
        self.check_params(params)
        adapter_params, framework_params = split_params(params)
        hyper = {**self.hyperparameters, **framework_params}
        settings = {**ADAPTER_SETTINGS, **adapter_params}

        import torch

        torch.manual_seed(seed)
        torch.set_num_threads(max(1, budget.cores))
        device = "cuda" if budget.gpus > 0 and torch.cuda.is_available() else "cpu"
        column = image_column(X, task, self.name)
        images = X[column].tolist()
        height, width, channels = decode(images[0]).shape
        labels = [str(c) for c in task.classes]
        index = {label: i for i, label in enumerate(labels)}
        targets = np.asarray([index[str(v)] for v in y], dtype=np.int64)
        network_settings = self.network_settings(hyper)
        network, input_channels = self.build(network_settings, len(labels), channels, height, width,
                                             pretrained=True)
        network.to(device)
        model_settings = {
            "column": column, **network_settings, "channels": int(channels),
            "input_channels": int(input_channels), "height": int(height), "width": int(width),
            "labels": labels, "predict_batch_size": int(hyper["predict_batch_size"]),
        }
        train_rows, valid_rows = _validation_split(targets, settings, seed)
        deadline = started + budget.time_s * (1.0 - float(settings["save_reserve_share"]))
        checkpoints = ImprovementCheckpoints(workdir, started)
        history = _train(network, EncodedImages(images, targets, input_channels), train_rows, valid_rows,
                         hyper, settings, device=device, deadline=deadline, seed=seed, cores=budget.cores,
                         checkpoints=checkpoints, framework=self.name)
        history.update(device=device, pretrained_parameters=self.pretrained_parameters(network),
                       anytime_checkpoint_s=round(checkpoints.saving_s, 3), **network_settings)
        return CNNModel(network, model_settings, task, device=device, history=history,
                        checkpoints=checkpoints.points)

    def load(self, model_dir: Path, task: TaskInfo) -> CNNModel:
        import torch

        settings = json.loads((model_dir / SETTINGS_FILE).read_text())
        network, _ = self.build(settings, len(settings["labels"]), settings["channels"], settings["height"],
                                settings["width"], pretrained=False)
        network.load_state_dict(torch.load(model_dir / WEIGHTS_FILE, map_location="cpu", weights_only=True))
        return CNNModel(network, settings, task)

    def test_params(self) -> dict[str, Any]:
        # A small torchvision network (channels repeated to three): the ResNet path has its own tests.
        return {"architecture": "mobilenet_v3_small", "batch_size": 16, "epochs": 1, "_max_steps": 2,
                "_validation_rows": 16}


def _validation_split(
    targets: np.ndarray, settings: dict[str, Any], seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Row positions for training and for choosing the best weights, dealt class by class."""
    rows = np.arange(len(targets))
    share = float(settings["validation_share"])
    size = min(int(settings["validation_rows"]), max(1, round(len(rows) * share)))
    if len(rows) < 4:
        return rows, rows[:0]
    shuffled = np.random.default_rng(seed).permutation(rows)
    order = shuffled[np.argsort(targets[shuffled], kind="stable")]
    valid = order[:: max(1, len(rows) // size)][:size]
    return np.setdiff1d(rows, valid), np.sort(valid)


def _train(
    network: Any,
    dataset: EncodedImages,
    train_rows: np.ndarray,
    valid_rows: np.ndarray,
    hyper: dict[str, Any],
    settings: dict[str, Any],
    *,
    device: str,
    deadline: float,
    seed: int,
    cores: int,
    checkpoints: ImprovementCheckpoints | None = None,
    framework: str = "cnn",
) -> dict[str, Any]:
    """Epochs over a DataLoader until the epochs, the step cap or the budget's time run out: the
    training loop of every image network here (CNNAdapter and its subclasses); the weights of each
    improving epoch go to `checkpoints`."""
    import torch
    from torch.utils.data import DataLoader, Dataset, Subset

    use_gpu = device == "cuda"
    workers = int(settings["num_workers"])
    pin_memory = use_gpu if settings["pin_memory"] is None else bool(settings["pin_memory"])
    generator = torch.Generator().manual_seed(seed)
    persistent = workers > 0 and bool(settings["persistent_workers"])
    batch_size = int(hyper["batch_size"])
    # EncodedImages is a map-style dataset by its methods (len, getitem), not a torch subclass, so that
    # this module imports without torch; torch's hints want the subclass.
    images = cast("Dataset[tuple[np.ndarray, int]]", dataset)
    # A last batch of one image breaks batch normalisation in training: drop the remainder.
    loader: DataLoader[tuple[np.ndarray, int]] = DataLoader(
        Subset(images, train_rows.tolist()), batch_size=batch_size, shuffle=True, num_workers=workers,
        pin_memory=pin_memory, generator=generator, drop_last=len(train_rows) > batch_size,
        persistent_workers=persistent)
    optimizer = torch.optim.AdamW(network.parameters(), lr=float(hyper["learning_rate"]),
                                  weight_decay=float(hyper["weight_decay"]))
    amp_dtype = torch.bfloat16 if use_gpu and torch.cuda.is_bf16_supported() else torch.float16
    scaler = torch.amp.GradScaler("cuda", enabled=use_gpu and amp_dtype == torch.float16)
    loss_function = torch.nn.CrossEntropyLoss()
    max_steps = int(settings["max_steps"]) if settings["max_steps"] is not None else None
    valid_batches = [valid_rows[i : i + int(hyper["predict_batch_size"])]
                     for i in range(0, len(valid_rows), int(hyper["predict_batch_size"]))]

    def synchronise() -> None:
        if use_gpu:
            torch.cuda.synchronize()

    def validation_loss() -> float:
        if not len(valid_rows):
            return float("nan")
        network.eval()
        total = 0.0
        with torch.inference_mode(), torch.autocast(device_type=device, dtype=amp_dtype, enabled=use_gpu):
            for rows in valid_batches:
                batch = torch.from_numpy(np.stack([dataset.pixels(int(i)) for i in rows])).to(device)
                target = torch.from_numpy(dataset.targets[rows]).to(device)
                total += float(loss_function(network(batch).float(), target)) * len(rows)
        network.train()
        return total / len(valid_rows)

    curve: list[dict[str, float]] = []
    best_loss, best_state, best_epoch = math.inf, None, 0
    step = images_seen = 0
    train_s = wait_s = validate_s = last_step_s = 0.0
    stopped_by: str | None = None
    training_started = _now()
    if use_gpu:
        torch.cuda.reset_peak_memory_stats()
    for epoch in range(1, int(hyper["epochs"]) + 1):
        network.train()
        epoch_started = fetch_started = time.perf_counter()
        epoch_wait = epoch_loss = 0.0
        epoch_images = 0
        for batch, target in loader:
            epoch_wait += time.perf_counter() - fetch_started
            # Stop early enough that the next step and validating the last steps still fit in the
            # budget: a step is measured, a validation too once one ran (until then, guessed as a
            # forward pass, a third of a training step, per image). The first step always runs: the
            # loader's workers start before it, and a model of no step is no model.
            if curve:
                reserve = validate_s / len(curve)
            else:
                reserve = last_step_s / max(1, len(target)) * len(valid_rows) / 3
            if step and _now() + last_step_s + reserve >= deadline:
                stopped_by = "budget"
                break
            step_started = time.perf_counter()
            batch = batch.to(device, non_blocking=pin_memory)
            target = target.to(device, non_blocking=pin_memory)
            with torch.autocast(device_type=device, dtype=amp_dtype, enabled=use_gpu):
                loss = loss_function(network(batch).float(), target)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            step += 1
            epoch_images += len(target)
            epoch_loss += float(loss.detach()) * len(target)  # waits for the device: honest step times
            last_step_s = time.perf_counter() - step_started
            if max_steps is not None and step >= max_steps:
                stopped_by = "max_steps"
                break
            fetch_started = time.perf_counter()
        synchronise()
        epoch_s = time.perf_counter() - epoch_started
        if epoch_images == 0:
            break
        train_s, wait_s, images_seen = train_s + epoch_s, wait_s + epoch_wait, images_seen + epoch_images
        tick = time.perf_counter()
        current = validation_loss()
        validate_s += time.perf_counter() - tick
        curve.append({
            "step": epoch, "elapsed_s": round(_now() - training_started, 3),
            "epoch_share": round(epoch_images / max(1, len(train_rows)), 4),
            "train_loss": round(epoch_loss / epoch_images, 6),
            "validation_loss": round(current, 6) if current == current else float("nan"),
            "images_per_s": round(epoch_images / epoch_s, 3) if epoch_s else 0.0,
            "data_wait_share": round(epoch_wait / epoch_s, 4) if epoch_s else 0.0,
            "epoch_s": round(epoch_s, 3),
        })
        if not current >= best_loss:  # NaN (no validation split): keep the latest weights
            best_loss, best_epoch = current, epoch
            best_state = {k: v.detach().to("cpu", copy=True) for k, v in network.state_dict().items()}
            if checkpoints is not None:
                checkpoints.keep(best_state, f"epoch {epoch}", current)
        if stopped_by is not None:
            break
    del loader  # its worker processes end with it
    if step == 0:
        raise RuntimeError(f"{framework}: no training step ran (an empty training part); give it images "
                           "to train on.")
    if best_state is not None and best_epoch != len(curve):
        network.load_state_dict(best_state)
    figures: dict[str, Any] = {
        "steps": step,
        "epochs_completed": round(images_seen / max(1, len(train_rows)), 3),
        "train_images": int(images_seen),
        "train_images_per_s": round(images_seen / train_s, 3) if train_s else 0.0,
        "data_wait_share": round(wait_s / train_s, 4) if train_s else 0.0,
        "time_per_epoch_s": round(train_s / max(1e-9, images_seen / max(1, len(train_rows))), 3),
        "best_epoch": best_epoch,
        "best_validation_loss": None if not best_loss < math.inf else round(best_loss, 6),
        "validation_rows": int(len(valid_rows)),
        "stopped_by": stopped_by or "epochs",
        "amp": str(amp_dtype).replace("torch.", "") if use_gpu else False,
        "loader": {"num_workers": workers, "pin_memory": pin_memory, "persistent_workers": persistent,
                   "cores": cores},
        CURVE_INFO_KEY: curve,
    }
    if use_gpu:
        figures["torch_max_memory_reserved_mb"] = round(torch.cuda.max_memory_reserved() / 2**20, 1)
    return figures


ADAPTER = CNNAdapter()


def _pair(value: tuple[int, ...]) -> tuple[int, int]:
    """A 2-D convolution's (height, width) setting, as torch stores it."""
    return value[0], value[1]
