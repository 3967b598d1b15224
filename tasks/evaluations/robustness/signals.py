"""Effectiveness signals: how well the generated cases probe a model, not how well it does on them.

- boundary density: the share of generated rows whose margin (top-two probability gap) is under
  delta; a suite of cases that never comes near the decision boundary tests little;
- anomaly capture: the AUROC of (1 - confidence) for telling the wrong predictions on generated
  rows from the right ones; 0.5 means the model's confidence says nothing about its own failures;
- activation coverage (torch models): the share of neurons activated above a threshold by at
  least one generated input, recorded through forward hooks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score


@dataclass
class Observation:
    """Per row of one scored copy: the top-two probability gap, the top probability, and whether
    the predicted class is the truth (None where truth is unknown, e.g. a boundary sample); and the
    corruption cell the copy came from, (corruption, target, severity), where it came from one."""

    margin: np.ndarray
    confidence: np.ndarray
    correct: np.ndarray | None
    source: tuple[str, str, float] | None = None

    @classmethod
    def of(cls, proba: np.ndarray, predictions: np.ndarray | None, truth: np.ndarray | None,
           source: tuple[str, str, float] | None = None) -> Observation:
        values = np.asarray(proba, dtype=float)
        ordered = np.sort(values, axis=1)
        second = ordered[:, -2] if values.shape[1] > 1 else np.zeros(len(values))
        correct = None
        if predictions is not None and truth is not None:
            correct = np.asarray(predictions).astype(str) == np.asarray(truth).astype(str)
        return cls(ordered[:, -1] - second, ordered[:, -1], correct, source)


def margins(observed: list[Observation]) -> np.ndarray:
    return np.concatenate([o.margin for o in observed]) if observed else np.zeros(0)


def boundary_density(observed: list[Observation], delta: float) -> float:
    """Share of observed rows whose margin is under delta (NaN when nothing was observed)."""
    values = margins(observed)
    return float((values < delta).mean()) if len(values) else float("nan")


def anomaly_capture(observed: list[Observation]) -> float:
    """AUROC of (1 - confidence) for separating wrong predictions from right ones over the rows
    whose truth is known; NaN when they are all right or all wrong (nothing to separate)."""
    known = [o for o in observed if o.correct is not None]
    if not known:
        return float("nan")
    wrong = ~np.concatenate([o.correct for o in known if o.correct is not None])
    doubt = 1.0 - np.concatenate([o.confidence for o in known])
    if wrong.all() or not wrong.any():
        return float("nan")
    return float(roc_auc_score(wrong, doubt))


def capture_by_source(observed: list[Observation]) -> dict[tuple[str, str, float], tuple[float, int, int]]:
    """Anomaly capture per corruption cell: source -> (AUROC, wrong predictions, labelled rows),
    over the observations that carry truth and a source. The AUROC is NaN where the cell's rows are
    all right or all wrong."""
    groups: dict[tuple[str, str, float], list[Observation]] = {}
    for observation in observed:
        if observation.source is not None and observation.correct is not None:
            groups.setdefault(observation.source, []).append(observation)
    found = {}
    for source, group in groups.items():
        correct = np.concatenate([o.correct for o in group if o.correct is not None])
        found[source] = (anomaly_capture(group), int((~correct).sum()), len(correct))
    return found


def activation_coverage(module: Any, inputs: Any, threshold: float = 0.0, units: str = "flat") -> float:
    """Share of neurons (output units of every leaf layer) whose activation exceeds `threshold`
    for at least one of `inputs`, recorded with forward hooks. `module` is a torch.nn.Module;
    `inputs` one input (a tensor, or a mapping of tensors passed as keywords) or a list of them
    (batches of generated cases: a neuron counts once it fires in any). `units`: "flat", every
    value of a case's output is a neuron (fixed-size inputs: images); "last_axis", a neuron is a
    unit of the output's last axis, fired at any position (sequences, whose length varies)."""
    if units not in ("flat", "last_axis"):
        raise ValueError(f"units is 'flat' or 'last_axis', not '{units}'")
    # torch is imported here, not at the top: only torch models have this signal, and importing
    # torch costs seconds in every robustness job that has none.
    import torch

    fired: dict[str, torch.Tensor] = {}
    handles = []

    def hook(name: str) -> Any:
        def record(_module: Any, _inputs: Any, output: Any) -> None:
            if not isinstance(output, torch.Tensor) or not output.is_floating_point() or output.dim() < 1:
                return
            values = output.detach()
            values = values.reshape(-1, values.shape[-1]) if units == "last_axis" else values.reshape(
                values.shape[0], -1)
            above = (values > threshold).any(dim=0).cpu()
            if name in fired and fired[name].shape != above.shape:
                raise ValueError(f"layer {name} answered {above.numel()} units, then {fired[name].numel()}: "
                                 "inputs of varying size need units='last_axis'")
            fired[name] = above | fired[name] if name in fired else above

        return record

    for name, layer in module.named_modules():
        if not list(layer.children()):  # leaf layers: their outputs are the neurons
            handles.append(layer.register_forward_hook(hook(name)))
    batches = inputs if isinstance(inputs, list) else [inputs]
    try:
        with torch.no_grad():
            for batch in batches:
                if isinstance(batch, Mapping):
                    module(**batch)
                else:
                    module(batch)
    finally:
        for handle in handles:
            handle.remove()
    total = sum(int(v.numel()) for v in fired.values())
    return float(sum(int(v.sum()) for v in fired.values()) / total) if total else float("nan")
