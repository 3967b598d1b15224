"""Images: robustness's image corruptions hit the card's image column."""

from __future__ import annotations

from tasks.evaluations.by_modality import ModalityEvaluations
from tasks.images.layout import card_layout

MODALITY_EVALUATIONS = ModalityEvaluations("image", images=card_layout)
