"""Text as a modality plug-in: a text card is a table with raw-string columns (role `text`), so its
rows, folds and gate are the table's. What text changes lives with its users: the frameworks that
read raw text say so (`modalities`), and the explain evaluation explains text with its own explainer."""

from __future__ import annotations

from tasks.modalities.base import ModalityPlugin


class TextModality(ModalityPlugin):
    name = "text"


MODALITY = TextModality()
