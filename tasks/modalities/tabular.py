"""The table, as a modality plug-in: the base class's behaviour as it is (tasks/modalities/base.py)."""

from __future__ import annotations

from tasks.modalities.base import ModalityPlugin

MODALITY = ModalityPlugin()
