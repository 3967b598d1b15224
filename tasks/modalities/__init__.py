"""Modalities as plug-ins: what a card's `modality` changes in the data's handling, one module each.

A module defining ``MODALITY`` (a ModalityPlugin, tasks/modalities/base.py) is found by the
project's plug-in registry; a modality without one is handled as a table. Images are the first one
(tasks/modalities/images.py); text, streams and forecasting still branch on `spec.modality` where
they are used.
"""
