"""Sensor streams: robustness corrupts whole streams and keeps the alignment gate's figures beside."""

from __future__ import annotations

from typing import Any

from tasks.align import alignment_metrics
from tasks.evaluations.by_modality import ModalityEvaluations
from tasks.specs import DatasetSpec


def alignment(spec: DatasetSpec) -> dict[str, Any]:
    # The stream corruptions stand beside the alignment gate's own figures (residual skew etc.).
    return {"alignment": alignment_metrics(spec.name)}


MODALITY_EVALUATIONS = ModalityEvaluations("multimodal", sensor_streams=True, robustness_info=alignment)
