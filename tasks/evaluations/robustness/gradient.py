"""Attacks in a torch network's own input space (pixels), for models that offer their network
(`FittedModel.torch_network`): FGSM and PGD, which follow the loss's gradient, and HopSkipJump,
which only reads the network's decisions (the black-box search of adversarial.py, in pixel space).
All three through the Adversarial Robustness Toolbox's PyTorchClassifier.

Each attack tries to flip the network's own prediction on the same seeded rows, within an L-inf
budget of `eps` (pixels in 0..1). FGSM runs in ART's minimal mode (eps grown by eps_step until the
row flips), so its perturbation of a flipped row is the smallest FGSM step that flips it; PGD and
HopSkipJump report the perturbation they ended on. An attack that raises is recorded with its error
and the others go on; figures stay apart from the tabular black-box ones (robust_adv_*).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tasks.frameworks.capabilities import TorchNetwork

ATTACKS = ("fgsm", "pgd", "pixel_hsj")


@dataclass(frozen=True)
class GradientSettings:
    eps: float = 0.1  # L-inf budget in input units (pixels in 0..1)
    eps_step: float = 0.01  # FGSM's minimal-mode step; PGD's step is eps / 4
    pgd_iter: int = 10
    hsj_iter: int = 5  # HopSkipJump iterations per row
    hsj_evals: int = 50  # gradient-estimate evaluations per HopSkipJump iteration
    batch_size: int = 64
    chunk: int = 4  # rows per generate call: the time is checked between chunks
    seed: int = 0


@dataclass
class PixelAttack:
    """One attack over the rows: which flipped, and the L-inf and L2 perturbation of each row. The
    flip share counts flips within eps (HopSkipJump is unbounded); the medians are over every flip."""

    name: str
    eps: float = 0.0
    flipped: list[bool] = field(default_factory=list)
    linf: list[float] = field(default_factory=list)
    l2: list[float] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""
    skipped: str = ""  # why it did not run, or not on every row (time)

    def metrics(self) -> dict[str, float]:
        if self.error or not self.flipped:
            return {}
        flipped = np.asarray(self.flipped)
        within = flipped & (np.asarray(self.linf) <= self.eps * (1 + 1e-4))
        out = {f"robust_{self.name}_flip_share": float(within.mean()), f"robust_{self.name}_s": self.seconds}
        if flipped.any():
            out[f"robust_{self.name}_linf_median"] = float(np.median(np.asarray(self.linf)[flipped]))
            out[f"robust_{self.name}_l2_median"] = float(np.median(np.asarray(self.l2)[flipped]))
        return out


@dataclass
class PixelOutcome:
    attacks: list[PixelAttack]
    adversarial: list[np.ndarray]  # every attack's perturbed inputs: generated cases for the signals

    def metrics(self) -> dict[str, float]:
        rows = max((len(a.flipped) for a in self.attacks), default=0)
        out: dict[str, float] = {"robust_pixel_rows": float(rows),
                                 "robust_pixel_errors": float(sum(bool(a.error) for a in self.attacks))}
        for attack in self.attacks:
            out.update(attack.metrics())
        return out


def classifier_of(network: TorchNetwork) -> Any:
    """The network as ART's PyTorchClassifier (logits in, the loss's gradient out)."""
    # ART and torch are imported here, not at the top: they cost seconds and only torch models with
    # continuous inputs come here.
    import torch
    from art.estimators.classification import PyTorchClassifier

    if network.clip_values is None or network.input_shape is None:
        raise ValueError("its inputs are discrete (no clip values): gradients cannot move them")
    class Float32(torch.nn.Module):
        """The network fed float32: HopSkipJump hands ART float64 arrays, which ART passes on as they are."""

        def __init__(self, module: Any) -> None:
            super().__init__()
            self.module = module

        def forward(self, x: Any) -> Any:
            return self.module(x.float())

    on_gpu = any(p.is_cuda for p in network.module.parameters())
    return PyTorchClassifier(model=Float32(network.module).eval(), loss=torch.nn.CrossEntropyLoss(),
                             input_shape=tuple(network.input_shape), nb_classes=len(network.classes),
                             clip_values=tuple(network.clip_values), device_type="gpu" if on_gpu else "cpu")


def pixel_attacks(network: TorchNetwork, x: np.ndarray, settings: GradientSettings,
                  has_time: Callable[[float], bool]) -> PixelOutcome:
    """FGSM, PGD, then HopSkipJump on `x` (network inputs), `chunk` rows at a time while
    `has_time(seconds the next chunk is expected to take)` says it fits: the mean chunk of the
    attack so far, or the last chunk of the one before. The figures are over the rows attacked."""
    # Imported here for the reason classifier_of gives.
    from art.attacks.evasion import FastGradientMethod, HopSkipJump, ProjectedGradientDescent

    classifier = classifier_of(network)
    x = np.asarray(x, dtype=np.float32)
    before = classifier.predict(x, batch_size=settings.batch_size).argmax(axis=1)
    np.random.seed(settings.seed)  # ART's random parts draw from numpy's global generator
    makers: dict[str, Callable[[], Any]] = {
        "fgsm": lambda: FastGradientMethod(classifier, norm=np.inf, eps=settings.eps,
                                           eps_step=settings.eps_step, minimal=True,
                                           batch_size=settings.batch_size),
        "pgd": lambda: ProjectedGradientDescent(classifier, norm=np.inf, eps=settings.eps,
                                                eps_step=settings.eps / 4, max_iter=settings.pgd_iter,
                                                batch_size=settings.batch_size, verbose=False),
        "pixel_hsj": lambda: HopSkipJump(classifier, batch_size=settings.batch_size, targeted=False,
                                         norm=np.inf, max_iter=settings.hsj_iter, max_eval=settings.hsj_evals,
                                         init_eval=max(1, settings.hsj_evals // 5), verbose=False),
    }
    attacks, adversarial, chunk_s = [], [], 0.0
    for name in ATTACKS:
        attack = PixelAttack(name, eps=settings.eps)
        attacks.append(attack)
        started, done, parts = time.perf_counter(), 0, []
        try:
            for start in range(0, len(x), settings.chunk):
                if not has_time(chunk_s):
                    attack.skipped = f"time limit reached after {done} of {len(x)} rows"
                    break
                tick = time.perf_counter()
                rows = slice(start, start + settings.chunk)
                # Untargeted, away from the network's own prediction (not the truth): a flip is a change.
                maker = makers[name]()
                found = maker.generate(x=x[rows]) if name == "pixel_hsj" else maker.generate(x=x[rows],
                                                                                             y=before[rows])
                parts.append(np.asarray(found, dtype=np.float32))
                done += len(parts[-1])
                spent = time.perf_counter() - tick
                chunk_s = spent if len(parts) == 1 else 0.7 * chunk_s + 0.3 * spent
            if parts:
                perturbed = np.concatenate(parts)
                after = classifier.predict(perturbed, batch_size=settings.batch_size).argmax(axis=1)
        except Exception as exc:  # noqa: BLE001 - recorded with its error; the other attacks go on
            attack.error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        else:
            if parts:
                delta = (perturbed - x[:done]).reshape(done, -1)
                attack.flipped = (after != before[:done]).tolist()
                attack.linf = np.abs(delta).max(axis=1).tolist()
                attack.l2 = np.linalg.norm(delta, axis=1).tolist()
                adversarial.append(perturbed)
        attack.seconds = time.perf_counter() - started
    return PixelOutcome(attacks, adversarial)


def noise_cases(x: np.ndarray, clip_values: tuple[float, float], amplitude: float,
                rng: np.random.Generator) -> np.ndarray:
    """Copies of `x` with uniform noise of `amplitude` (input units), clipped to the input range:
    the cases the activation steering adds, wider each round to reach neurons not yet fired."""
    noisy = x + rng.uniform(-amplitude, amplitude, size=x.shape).astype(np.float32)
    return np.clip(noisy, clip_values[0], clip_values[1]).astype(np.float32)
