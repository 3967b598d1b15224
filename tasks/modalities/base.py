"""What a modality plug-in does with the data, and how the data layer finds it.

The default (a table) is the base class itself: rows are identical when their values are, the
folds group by no column, the gate runs no checks of its own, and Great Expectations sees the
frame as it is. A modality overrides what it changes; the folds, the gate, the flow's step before
the gate and tracking ask `modality_of(spec)` instead of testing `spec.modality`. What a card or a
suite may hold because of the modality is declared on `Modality` (tasks/modality.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from tasks.errors import UserError
from tasks.modality import MODALITIES, Modality
from tasks.specs import DatasetSpec

# One check of the data gate, as tasks/data/validate.py reports it: name, passed, sentence, observed.
GateCheck = tuple[str, bool, str, Any]


class ModalityPlugin(Modality):
    """A modality's hooks; this base class is the tabular behaviour every other modality starts from."""

    # Whether the gate's verdict can be reused while the card, the data file and the folds file are
    # unchanged; False where the gate also reads files of its own (images, streams).
    verdict_reusable: ClassVar[bool] = True
    # Whether `before_gate` does anything (the benchmark flow runs it as a task of its own).
    prepares: ClassVar[bool] = False

    def row_identity(self, spec: DatasetSpec, frame: pd.DataFrame) -> np.ndarray | None:
        """One identity per row (rows with equal identities are the same example, kept in one
        fold); None: rows compare by their values, the table's way."""
        return None

    def default_fold_groups(self, spec: DatasetSpec) -> str | None:
        """The column whose equal values share a fold when the card names none; None: no column."""
        return None

    def shared_folds(self, spec: DatasetSpec) -> list[str]:
        """Other dataset names saved with this dataset's very folds (multimodal: its combinations)."""
        return []

    def before_gate(self, spec: DatasetSpec) -> list[str]:
        """What must run before the gate reads the data (multimodal: aligning its streams); returns
        why it failed (each reason a sentence that says which step), empty when it did not."""
        return []

    def gate_checks(self, spec: DatasetSpec, frame: pd.DataFrame) -> list[GateCheck]:
        """The gate's checks of this modality's own data, beside the table's."""
        return []

    def for_expectations(self, spec: DatasetSpec, frame: pd.DataFrame) -> pd.DataFrame:
        """The frame as Great Expectations should see it (text it can count and write as JSON)."""
        return frame

    def run_artifacts(self, spec: DatasetSpec) -> list[Path]:
        """Files of the dataset to attach to the execution's run (multimodal: its alignment report)."""
        return []


def modality_of(spec: DatasetSpec) -> ModalityPlugin:
    """The plug-in of the card's modality (checked known when the card was read)."""
    plugin = MODALITIES.get(spec.modality)
    if not isinstance(plugin, ModalityPlugin):
        raise UserError(f"modality '{spec.modality}': its MODALITY declares the modality but has no hooks; "
                        "make it an instance of tasks.modalities.base.ModalityPlugin.")
    return plugin
