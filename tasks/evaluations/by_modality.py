"""What the post-job evaluations do differently for one modality, and the registry that finds it.

The evaluations sit above the modalities (docs/design.md, "Layers"), so a modality plug-in cannot
name an explainer or a corruption family itself; its entry here does, one level up. An entry is a
`ModalityEvaluations` named after its modality, the module attribute `MODALITY_EVALUATIONS` of a
module of tasks/evaluations/modalities/ (the project's modalities: text, multimodal, image) or of a
package named in AUTOML_EVAL_PLUGINS (beside the plug-in's own `MODALITY`, in the same module if
it likes: this module imports nothing heavy). A modality with no entry (the table, and any
plug-in that declares none) is evaluated as a table: every field's default is the table's
behaviour.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tasks.evaluations.base import EvaluationContext, EvaluationResult
from tasks.images.layout import ImageLayout, pixel_table_layout
from tasks.plugins import Registry
from tasks.specs import DatasetSpec

# explain: the job's explanation (files into context.folder, figures from explain's own figures).
Explainer = Callable[[EvaluationContext], EvaluationResult]
# robustness: where a test fold with these columns holds its images, or None.
ImagesOf = Callable[[DatasetSpec, list[str]], ImageLayout | None]


def no_info(spec: DatasetSpec) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class ModalityEvaluations:
    """One modality's entry; a field left at its default is the table's behaviour."""

    name: str  # the modality's name (a card's `modality:`)
    # Evaluation name -> why it does not apply to this modality's jobs (one sentence): the job's
    # evaluation is then `not applicable` with that reason, before it starts.
    not_applicable: Mapping[str, str] = field(default_factory=dict)
    # explain: run instead of the table's explanation (permutation importance, SHAP, fidelity).
    explainer: Explainer | None = None
    # robustness: the corruption families its jobs are given (robustness's FAMILIES); None: every
    # family with something to hit in the fold. A corruption of another family is listed as not
    # applicable, naming this field.
    corruption_families: frozenset[str] | None = None
    # robustness: the fold's numeric columns STREAM__FEATURE are a sensor stream's features: the
    # stream corruptions hit each stream whole, and those that cannot be applied faithfully to
    # windowed features (clock offset, clock jitter) are listed as not applicable with their reason.
    sensor_streams: bool = False
    # robustness: where the test fold holds its images (the image corruptions' target); by
    # default those of a pixel table (a tabular card's `pixels_of`), else none.
    images: ImagesOf = pixel_table_layout
    # robustness: figures of the dataset kept beside the corruptions in the result's info.
    robustness_info: Callable[[DatasetSpec], dict[str, Any]] = no_info


MODALITY_EVALUATIONS: Registry[ModalityEvaluations] = Registry(
    "modality's evaluations", "modalities' evaluations", base=ModalityEvaluations,
    package="tasks.evaluations.modalities", attribute="MODALITY_EVALUATIONS")


def evaluations_of(modality: str) -> ModalityEvaluations:
    """The entry of `modality`, or the table's behaviour when it has none."""
    if modality in MODALITY_EVALUATIONS.entries():
        return MODALITY_EVALUATIONS.get(modality)
    return ModalityEvaluations(modality)
