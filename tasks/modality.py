"""What the card reader knows of a modality, and the registry that finds the modalities.

A modality is a module of tasks/modalities/ (or of a package named in AUTOML_EVAL_PLUGINS) defining
``MODALITY``, a ModalityPlugin (tasks/modalities/base.py, a subclass of the `Modality` here). A
card's `modality` names one; an unknown name is one sentence listing the known ones. What a card
or a suite may hold because of a modality is declared here: its card blocks (each with its
pydantic model) and its suite fields. What the modality does with the data (row identity, folds,
the gate) is in the plug-in's hooks, a layer up.

This module sits with the nouns, below tasks/specs.py, so that a card's `modality` and blocks are
checked where the card is read. The registry imports the plug-in modules by name when first asked
(as every registry does); nothing here imports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from pydantic import BaseModel

from tasks.plugins import Registry

# The modality of a card that names none: a table.
TABULAR = "tabular"


class Modality:
    """A modality's declarations, as the card and suite readers need them."""

    name: ClassVar[str] = TABULAR
    # Top-level card blocks this modality adds, each checked by its pydantic model when the card is
    # read (a block left out is checked as `{}`, so a model with required fields makes it required).
    # A plug-in's blocks reach its hooks as plain data in `spec.modality_blocks[BLOCK]`. The
    # project's own modalities' blocks (image, forecast, streams, ...) are still fields of
    # DatasetSpec, checked in detail by their packages.
    card_blocks: ClassVar[Mapping[str, type[BaseModel]]] = {}
    # Top-level suite fields this modality reads (multimodal: `modality_combinations`).
    suite_fields: ClassVar[frozenset[str]] = frozenset()


MODALITIES: Registry[Modality] = Registry(
    "modality", "modalities", base=Modality, package="tasks.modalities", attribute="MODALITY",
    skip=frozenset({"base"}))


def check_modality(name: str) -> None:
    """Nothing for a known modality; else the registry's one sentence naming the known ones."""
    # The table is always known, so a tabular card is read without importing any plug-in module.
    if name != TABULAR:
        MODALITIES.get(name)


def suite_fields() -> frozenset[str]:
    """Every top-level suite field some modality reads."""
    return frozenset().union(*(plugin.suite_fields for plugin in MODALITIES.all().values()))


def block_owners() -> dict[str, str]:
    """Card block -> the modality that declares it, over every plug-in."""
    return {block: plugin.name for plugin in MODALITIES.all().values() for block in plugin.card_blocks}
