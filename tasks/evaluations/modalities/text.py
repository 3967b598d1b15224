"""Text: explained at token level (explain's text explainer), not per feature."""

from __future__ import annotations

from tasks.evaluations.by_modality import ModalityEvaluations
from tasks.evaluations.explain import explain_text

MODALITY_EVALUATIONS = ModalityEvaluations("text", explainer=explain_text)
