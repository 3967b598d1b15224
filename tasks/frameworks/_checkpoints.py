"""The weights of a network at each improvement of its validation loss, for the score-over-time curve.

A network trained epoch by epoch (the CNN, ``hf_finetune``) keeps its best weights by validation
loss. Each time that best changes, the weights are written to the job's work folder (not kept in
memory: a ResNet-18 is 45 MB a copy, and the memory budget is the framework's), with the fit second
they were ready. After the fit each becomes an anytime candidate: a copy of the network loaded with
those weights, predicting through the adapter's own model class, so the harness scores it on the
test fold like the job's model. The work folder goes when the job is saved.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks.frameworks.capabilities import AnytimeCandidate, NotOffered

FOLDER = "anytime_checkpoints"
TIMING = "fit seconds when the evaluation that found the better weights ended (saving them not counted)"
SOURCE = "the network's weights at that evaluation, kept on disk during the fit"


@dataclass(frozen=True)
class Checkpoint:
    name: str  # "epoch 3", "step 120"
    ready_s: float
    validation_loss: float
    path: Path


class ImprovementCheckpoints:
    """Writes a state dict at each improvement; ready_s counts from `fit_started` (time.monotonic())."""

    def __init__(self, workdir: Path, fit_started: float) -> None:
        self.folder = workdir / FOLDER
        self.fit_started = fit_started
        self.points: list[Checkpoint] = []
        self.saving_s = 0.0  # what writing them cost inside the fit

    def keep(self, state: dict[str, Any], name: str, validation_loss: float) -> None:
        """`state` is a CPU copy of the weights (the loop keeps one as its best already)."""
        import torch  # inside: the registry imports adapters without torch

        ready_s = time.monotonic() - self.fit_started
        if validation_loss != validation_loss:  # NaN: no validation split, nothing to rank by
            return
        started = time.monotonic()
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{len(self.points):04d}.pt"
        torch.save(state, path)
        self.points.append(Checkpoint(name, ready_s, float(validation_loss), path))
        self.saving_s += time.monotonic() - started


def candidates(points: list[Checkpoint], network: Any, device: str, model_at: Callable[[Any], Any],
               final: Any, is_classification: bool) -> list[AnytimeCandidate]:
    """One candidate per checkpoint, predicting through `model_at(network loaded with its weights)`,
    then `final` (the model the job returned: the best weights, restored) at the end of the fit.

    The checkpoints share one scratch copy of the network, loaded when a candidate is asked (the
    harness scores them one after another)."""
    if not points:
        raise NotOffered("the fit kept no weights along the way (no validation split to rank them by, "
                         "or a model loaded from its folder)")
    import torch

    scratch: dict[str, Any] = {}

    def loaded(path: Path) -> Any:
        if scratch.get("path") != path:
            if "model" not in scratch:
                scratch["network"] = copy.deepcopy(network)
                scratch["model"] = model_at(scratch["network"])
            scratch["network"].load_state_dict(torch.load(path, map_location=device, weights_only=True))
            scratch["path"] = path
        return scratch["model"]

    def predict(path: Path) -> Callable[[Any], Any]:
        return lambda X: loaded(path).predict(X)

    def proba(path: Path) -> Callable[[Any], Any] | None:
        return (lambda X: loaded(path).predict_proba(X)) if is_classification else None

    found = [AnytimeCandidate(
        name=point.name, ready_s=point.ready_s, validation=-point.validation_loss,
        predict=predict(point.path), predict_proba=proba(point.path),
        timing=TIMING, source=SOURCE) for point in points]
    best = min(points, key=lambda point: point.validation_loss)
    found.append(AnytimeCandidate(
        name=f"{best.name} (returned)", ready_s=points[-1].ready_s, validation=-best.validation_loss,
        predict=final.predict, predict_proba=final.predict_proba if is_classification else None,
        final=True, timing=TIMING, source="the job's model: the best weights, restored"))
    return found
