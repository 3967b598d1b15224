"""What a modality supplies to the data layer, and how the data layer finds it.

The default (a table) is the base class itself: rows are identical when their values are, the gate
runs no checks of its own, and Great Expectations sees the frame as it is. A modality overrides
what it changes; the folds and the gate ask `modality_of(spec)` instead of testing `spec.modality`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pandas as pd

from tasks.plugins import Registry
from tasks.specs import DatasetSpec

# One check of the data gate, as tasks/data/validate.py reports it: name, passed, sentence, observed.
GateCheck = tuple[str, bool, str, Any]


class ModalityPlugin:
    """A modality's hooks; this base class is the tabular behaviour every other modality starts from."""

    name: ClassVar[str] = "tabular"

    def row_identity(self, spec: DatasetSpec, frame: pd.DataFrame) -> np.ndarray | None:
        """One identity per row (rows with equal identities are the same example, kept in one
        fold); None: rows compare by their values, the table's way."""
        return None

    def gate_checks(self, spec: DatasetSpec, frame: pd.DataFrame) -> list[GateCheck]:
        """The gate's checks of this modality's own data, beside the table's."""
        return []

    def for_expectations(self, spec: DatasetSpec, frame: pd.DataFrame) -> pd.DataFrame:
        """The frame as Great Expectations should see it (text it can count and write as JSON)."""
        return frame


MODALITIES: Registry[ModalityPlugin] = Registry(
    "modality", "modalities", base=ModalityPlugin, package="tasks.modalities", attribute="MODALITY",
    skip=frozenset({"base"}))
TABLE = ModalityPlugin()


def modality_of(spec: DatasetSpec) -> ModalityPlugin:
    """The plug-in of the card's modality, or the table's behaviour where it has none."""
    return MODALITIES.get(spec.modality) if spec.modality in MODALITIES.entries() else TABLE
