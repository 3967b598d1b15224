"""What a modality plug-in is, and the registry that finds the modalities.

A modality is a module of tasks/modalities/ (or of a package named in AUTOML_EVAL_PLUGINS) defining
``MODALITY``, a ModalityPlugin. A card's `modality` names one; an unknown name is one sentence
listing the known ones. The plug-in declares what the modality adds to a card (`card_blocks`,
each block's pydantic model) and to a suite (`suite_fields`), and answers for the data layer:
which rows are the same example, which column groups the folds, which datasets share its saved
folds, what runs before the gate, the gate's own checks, what Great Expectations sees, and which
files go with the execution's run. The base class is the table's behaviour; a modality overrides
what it changes, so the data layer asks `modality_of(spec)` and never tests `spec.modality`.

This module sits with the nouns, below tasks/specs.py, so that a card's `modality` and blocks are
checked where the card is read. The registry imports the plug-in modules by name when first asked
(as every registry does), so nothing here imports the data layer the plug-ins use.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from tasks.plugins import Registry

if TYPE_CHECKING:  # the card's type only: tasks/specs.py imports this module
    import numpy as np
    import pandas as pd

    from tasks.specs import DatasetSpec

# One check of the data gate, as tasks/data/validate.py reports it: name, passed, sentence, observed.
GateCheck = tuple[str, bool, str, Any]

# The modality of a card that names none: a table.
TABULAR = "tabular"


class ModalityPlugin:
    """A modality's declarations and hooks; this base class is the tabular behaviour every other
    modality starts from."""

    name: ClassVar[str] = TABULAR
    # Top-level card blocks this modality adds, each checked by its pydantic model when the card is
    # read (a block left out is checked as `{}`, so a model with required fields makes it required).
    # A plug-in's blocks reach its hooks as plain data in `spec.modality_blocks[BLOCK]`. The
    # project's own modalities' blocks (image, forecast, streams, ...) are still fields of
    # DatasetSpec, checked in detail by their packages.
    card_blocks: ClassVar[Mapping[str, type[BaseModel]]] = {}
    # Top-level suite fields this modality reads (multimodal: `modality_combinations`).
    suite_fields: ClassVar[frozenset[str]] = frozenset()
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


MODALITIES: Registry[ModalityPlugin] = Registry(
    "modality", "modalities", base=ModalityPlugin, package="tasks.modalities", attribute="MODALITY")


def check_modality(name: str) -> None:
    """Nothing for a known modality; else the registry's one sentence naming the known ones."""
    # The table is always known, so a tabular card is read without importing any plug-in module.
    if name != TABULAR:
        MODALITIES.get(name)


def modality_of(spec: DatasetSpec) -> ModalityPlugin:
    """The plug-in of the card's modality (checked known when the card was read)."""
    return MODALITIES.get(spec.modality)


def suite_fields() -> frozenset[str]:
    """Every top-level suite field some modality reads."""
    return frozenset().union(*(plugin.suite_fields for plugin in MODALITIES.all().values()))


def block_owners() -> dict[str, str]:
    """Card block -> the modality that declares it, over every plug-in."""
    return {block: plugin.name for plugin in MODALITIES.all().values() for block in plugin.card_blocks}
