"""The table, as a modality plug-in: the base class's behaviour as it is (tasks/modality.py)."""

from __future__ import annotations

from tasks.modality import ModalityPlugin

MODALITY = ModalityPlugin()
