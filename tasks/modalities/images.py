"""The image modality as a plug-in: an image's identity is its pixels, the gate decodes and checks
every image against the card's `image:` block, and Great Expectations sees content hashes."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tasks.images.card import image_card, image_column
from tasks.images.checks import image_checks
from tasks.images.codec import content_hashes
from tasks.modalities.base import GateCheck, ModalityPlugin
from tasks.specs import DatasetSpec


class ImageModality(ModalityPlugin):
    name = "image"
    verdict_reusable = False  # the gate decodes the image files under the dataset's folder

    def row_identity(self, spec: DatasetSpec, frame: pd.DataFrame) -> np.ndarray:
        # The same picture is the same example whatever its label or file name: images group by
        # the content hash of their pixels.
        return np.asarray(content_hashes(frame[image_column(spec)].tolist()))

    def gate_checks(self, spec: DatasetSpec, frame: pd.DataFrame) -> list[GateCheck]:
        """Decodes, size, channels, declared labels (tasks/images/checks.py)."""
        column = image_column(spec)
        return list(image_checks(spec.name, spec.file, frame[column], frame[spec.target], image_card(spec)))

    def for_expectations(self, spec: DatasetSpec, frame: pd.DataFrame) -> pd.DataFrame:
        column = image_column(spec)
        return frame.assign(**{column: content_hashes(frame[column].tolist())})


MODALITY = ImageModality()
